#include "engine/suffix_store.hpp"

#include <algorithm>

namespace conveyor {

SuffixStore::SuffixStore(int32_t capacity, int32_t min_n, int32_t max_n)
    : capacity_(std::max(capacity, 1)), min_n_(std::max(min_n, 1)), max_n_(std::max(max_n, min_n)) {}

uint64_t SuffixStore::hash(std::span<const int32_t> gram) {
  uint64_t h = 0x9e3779b97f4a7c15ULL ^ gram.size();
  for (int32_t t : gram) {
    h ^= uint64_t(uint32_t(t)) + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
    h *= 0xff51afd7ed558ccdULL;
  }
  return h;
}

void SuffixStore::index_from(size_t begin) {
  for (size_t end = std::max<size_t>(begin, 1); end <= tokens_.size(); ++end) {
    if (end < tokens_.size() && tokens_[end] < 0) continue;  // nothing follows a sequence's end
    for (int32_t n = min_n_; n <= max_n_ && size_t(n) <= end; ++n) {
      const std::span<const int32_t> gram(tokens_.data() + end - size_t(n), size_t(n));
      if (gram.front() < 0 || gram.back() < 0) break;  // crosses a separator
      after_[hash(gram)] = uint32_t(end);
    }
  }
}

void SuffixStore::add(std::span<const int32_t> tokens) {
  if (tokens.empty()) return;
  if (tokens.size() + 1 > size_t(capacity_)) tokens = tokens.last(size_t(capacity_) - 1);
  if (tokens_.size() + tokens.size() + 1 > size_t(capacity_)) {
    // Drop the older half (at a separator) and index what is left afresh.
    size_t cut = tokens_.size() / 2;
    while (cut < tokens_.size() && tokens_[cut] >= 0) ++cut;
    tokens_.erase(tokens_.begin(), tokens_.begin() + long(std::min(cut + 1, tokens_.size())));
    if (tokens_.size() + tokens.size() + 1 > size_t(capacity_)) tokens_.clear();
    after_.clear();
    index_from(0);
  }
  const size_t begin = tokens_.size();
  tokens_.insert(tokens_.end(), tokens.begin(), tokens.end());
  tokens_.push_back(-1);
  index_from(begin);
}

int32_t SuffixStore::propose(std::span<const int32_t> context, int32_t k, std::vector<int32_t>& drafts) const {
  drafts.clear();
  if (k <= 0) return 0;
  for (int32_t n = std::min<int32_t>(max_n_, int32_t(context.size())); n >= min_n_; --n) {
    const std::span<const int32_t> tail = context.last(size_t(n));
    const auto it = after_.find(hash(tail));
    if (it == after_.end()) continue;
    const size_t at = it->second;
    // A hash collision proposes nothing: the tokens must be the tail's.
    if (at < size_t(n) || !std::equal(tail.begin(), tail.end(), tokens_.begin() + long(at) - n)) continue;
    for (size_t i = at; i < tokens_.size() && tokens_[i] >= 0 && int32_t(drafts.size()) < k; ++i)
      drafts.push_back(tokens_[i]);
    if (!drafts.empty()) return n;
  }
  return 0;
}

}  // namespace conveyor
