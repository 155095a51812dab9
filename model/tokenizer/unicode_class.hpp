// A small Unicode character classification for the GPT-2 pre-tokenizer.
//
// The GPT-2 pattern needs \p{L} (letters), \p{N} (numbers) and \s. Rather
// than carry the Unicode database, conveyor classifies ASCII exactly and the
// rest with a table of common non-letter ranges: white space (the Unicode
// White_Space property), decimal digits of the major scripts, superscripts,
// fractions, roman numerals and circled numbers, and punctuation, symbols,
// combining marks, format characters, emoji and private use. Every other code
// point counts as a letter. Known differences from the full database: the
// combining marks of Indic and South-East Asian scripts count as letters (the
// real pattern splits words at them), as do unassigned code points and a few
// letter-like symbols; such text still round-trips, it may only tokenize into
// different (still valid) pieces than the reference implementation. Checked
// against Unicode 14.0: every assigned code point the table calls a non-letter
// has that class; about 3,100 marks and symbols and 1,100 numbers, nearly all
// in historic or minority scripts, are called letters.
#pragma once

#include <cstdint>

namespace conveyor::tokenizer_detail {

enum class CharClass : uint8_t { letter, number, whitespace, other };

CharClass classify(uint32_t code_point);

// For tests: the non-letter table is sorted and its ranges do not overlap.
bool class_table_is_sorted();

}  // namespace conveyor::tokenizer_detail
