#include "grammar/vocabulary.hpp"

#include <algorithm>

namespace conveyor::grammar {

TokenIndex::TokenIndex(VocabularyBytes vocab) : tokens_(std::move(vocab.tokens)) {
  for (int32_t id : vocab.end_ids) {
    if (id >= 0 && id < vocab_size()) end_ids_.push_back(id);
  }
  std::sort(end_ids_.begin(), end_ids_.end());
  end_ids_.erase(std::unique(end_ids_.begin(), end_ids_.end()), end_ids_.end());
  std::vector<detail::TrieEntry> entries;
  entries.reserve(tokens_.size());
  for (int32_t id = 0; id < vocab_size(); ++id) {
    max_length_ = std::max(max_length_, tokens_[size_t(id)].size());
    if (tokens_[size_t(id)].empty() || is_end(id)) continue;
    entries.push_back({tokens_[size_t(id)], id});
    if (tokens_[size_t(id)].size() > kShortToken) long_tokens_.push_back(id);
  }
  trie_ = detail::build_trie(entries);
}

std::pair<int32_t, size_t> TokenIndex::longest_prefix(std::string_view text) const {
  std::pair<int32_t, size_t> best{-1, 0};
  if (trie_.nodes() == 0) return best;
  int32_t node = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    // The child of `node` on byte text[i]: children are node + 1, then
    // each child's subtree end, while inside node's subtree.
    int32_t child = node + 1, found = -1;
    while (child < trie_.end[size_t(node)]) {
      if (trie_.byte[size_t(child)] == uint8_t(text[i])) {
        found = child;
        break;
      }
      child = trie_.end[size_t(child)];
    }
    if (found < 0) break;
    node = found;
    const auto ids = trie_.ids_at(node);
    if (!ids.empty()) best = {*std::min_element(ids.begin(), ids.end()), i + 1};
  }
  return best;
}

bool TokenIndex::is_end(int32_t id) const {
  return std::binary_search(end_ids_.begin(), end_ids_.end(), id);
}

std::shared_ptr<const TokenIndex> index_vocabulary(VocabularyBytes vocab) {
  return std::make_shared<const TokenIndex>(std::move(vocab));
}

}  // namespace conveyor::grammar
