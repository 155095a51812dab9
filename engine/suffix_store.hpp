// Recent requests' tokens, indexed for speculative decoding's suffix method
// (`--speculative suffix`, engine/speculation.hpp), as SuffixDecoding does
// for agent workloads: an agent's requests repeat each other's outputs (the
// same tool calls, the same JSON shapes, the same phrases), so the
// continuation of a sequence's last tokens is often in an earlier request.
//
// The store keeps the last `capacity` tokens of finished sequences (prompt
// and output, one after another) and, for every position, the n-grams of
// lengths min_n..max_n that end there, in a hash index that remembers the
// latest position after each. propose() finds the longest n-gram of a
// context's tail that occurred, and drafts what followed its latest
// occurrence. When the store is full, the older half is dropped and the
// index rebuilt (amortised over the tokens added since).
//
// Thread-safety: none; the scheduler core owns one.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

namespace conveyor {

class SuffixStore {
 public:
  SuffixStore(int32_t capacity, int32_t min_n, int32_t max_n);

  // Adds one sequence's tokens (a separator keeps sequences apart).
  void add(std::span<const int32_t> tokens);
  // Appends to `drafts` (cleared first) up to `k` tokens that followed the
  // latest occurrence of the longest tail of `context` (min_n..max_n
  // tokens) in the store; none when no tail occurred. Returns the tail's
  // length (0: none).
  int32_t propose(std::span<const int32_t> context, int32_t k, std::vector<int32_t>& drafts) const;

  size_t size() const { return tokens_.size(); }

 private:
  static uint64_t hash(std::span<const int32_t> gram);
  void index_from(size_t begin);  // indexes the n-grams ending at begin.. end
  int32_t capacity_, min_n_, max_n_;
  std::vector<int32_t> tokens_;  // sequences back to back, each followed by -1
  std::unordered_map<uint64_t, uint32_t> after_;  // n-gram hash -> position after its latest occurrence
};

}  // namespace conveyor
