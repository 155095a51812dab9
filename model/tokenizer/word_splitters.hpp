// Hand-written equivalents of the three expressions most byte-level BPE
// vocabularies split with (internal header):
//   gpt2:   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
//   llama3: (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}|
//           ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
//   qwen2:  llama3 with \p{N} for \p{N}{1,3}
// (the case-insensitive contractions take ASCII case variants only). They
// classify characters with ICU's properties, as the regex engine does, and
// run several times faster than it; pretokenizer_test checks that they cut
// random text exactly where ICU running the expressions does.
#pragma once

#include <cstdint>
#include <vector>

namespace conveyor::tokenizer_detail {

enum class WordSplitter : uint8_t { gpt2, llama3, qwen2 };

// [begin, end) in UTF-16 code units.
struct Span16 {
  int32_t begin;
  int32_t end;
};

// Appends to `out` the matches of the expression in units[begin, end), which
// is well-formed UTF-16 and taken as the whole input (no look-ahead past
// `end`). The matches cover the span: these expressions match any character.
void split_words(WordSplitter kind, const char16_t* units, int32_t begin, int32_t end,
                 std::vector<Span16>& out);

}  // namespace conveyor::tokenizer_detail
