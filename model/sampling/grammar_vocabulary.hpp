// The bytes of a tokenizer's vocabulary, as the grammar matcher needs them
// (grammar/vocabulary.hpp): the adapter between model/tokenizer and
// grammar/, which depends only on base/. Header-only: it needs nothing of
// grammar/'s library, only the struct.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "grammar/vocabulary.hpp"
#include "model/tokenizer/tokenizer.hpp"

namespace conveyor {

// Every token's bytes (Tokenizer::token_bytes: "" for control tokens) and
// the ids that end generation (LoadedModel::eos_ids). Index the result once
// per model with grammar::index_vocabulary.
inline grammar::VocabularyBytes vocabulary_bytes(const Tokenizer& tokenizer, std::span<const int32_t> end_ids) {
  grammar::VocabularyBytes v;
  v.tokens.reserve(size_t(tokenizer.vocab_size()));
  for (int32_t id = 0; id < tokenizer.vocab_size(); ++id) v.tokens.push_back(tokenizer.token_bytes(id));
  v.end_ids.assign(end_ids.begin(), end_ids.end());
  return v;
}

}  // namespace conveyor
