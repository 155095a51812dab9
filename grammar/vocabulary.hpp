// What the grammar matcher needs of a model's vocabulary, and the index it
// builds from it once per model.
//
// VocabularyBytes is plain data: each token's bytes as it adds them to the
// text ("" for control tokens, which a grammar never allows), and the tokens
// that end generation. A tokenizer fills it (the adapter lives outside
// grammar/, which depends only on base/).
//
// TokenIndex holds those bytes in a trie (tokens sharing a prefix share the
// walk when a mask is computed). It is immutable once built and shared, by
// shared_ptr, between every grammar compiled for the model and every thread.
// Building it for a 128k vocabulary takes some tens of milliseconds: do it once.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "grammar/token_trie.hpp"

namespace conveyor::grammar {

struct VocabularyBytes {
  std::vector<std::string> tokens;  // [vocab] each token's bytes ("" for control tokens)
  std::vector<int32_t> end_ids;     // tokens that end generation (eos, eot, ...)
};

class TokenIndex {
 public:
  explicit TokenIndex(VocabularyBytes vocab);

  int32_t vocab_size() const { return int32_t(tokens_.size()); }
  // Token `id`'s bytes; "" for control tokens and ids out of range.
  std::string_view bytes(int32_t id) const {
    return id >= 0 && id < vocab_size() ? std::string_view(tokens_[size_t(id)]) : std::string_view();
  }
  bool is_end(int32_t id) const;
  std::span<const int32_t> end_ids() const { return end_ids_; }  // sorted, distinct, in range
  size_t max_token_length() const { return max_length_; }          // in bytes
  // The text tokens longer than kShortToken bytes (a few percent of a vocabulary).
  static constexpr size_t kShortToken = 16;
  std::span<const int32_t> long_tokens() const { return long_tokens_; }

  // The text token with the longest bytes that `text` starts with (ties:
  // the lowest id), and that length; {-1, 0} when none does.
  std::pair<int32_t, size_t> longest_prefix(std::string_view text) const;

  // Every token with bytes that is not an end token (the ones a grammar can
  // allow as text), in a trie. For grammar/ itself.
  const detail::TokenTrie& text_trie() const { return trie_; }

 private:
  std::vector<std::string> tokens_;
  std::vector<int32_t> end_ids_;
  size_t max_length_ = 0;
  std::vector<int32_t> long_tokens_;
  detail::TokenTrie trie_;
};

// Out-of-range end ids are dropped.
std::shared_ptr<const TokenIndex> index_vocabulary(VocabularyBytes vocab);

}  // namespace conveyor::grammar
