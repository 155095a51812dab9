// GPT-2's pre-tokenizer, written out by hand (no regex library).
//
// Splits text into the pieces that GPT-2's pattern
//   's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
// matches, following llama.cpp's unicode_regex_split_custom_gpt2; letters,
// numbers and spaces come from classify() (see unicode_class.hpp for its
// approximation). Bytes that are not well-formed UTF-8 count as punctuation,
// one byte each, so every input byte lands in exactly one piece.
#pragma once

#include <string_view>
#include <vector>

namespace conveyor::tokenizer_detail {

// Consecutive views into `text` that together cover all of it.
std::vector<std::string_view> gpt2_pretokenize(std::string_view text);

}  // namespace conveyor::tokenizer_detail
