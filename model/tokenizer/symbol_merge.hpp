// The merge loop that SentencePiece and byte-level BPE share: the text starts
// as one symbol per UTF-8 character, kept in a doubly linked list; the best
// adjacent pair merges first, as long as some pair may merge. A priority queue
// holds candidate pairs; an entry whose symbols changed since it was queued is
// skipped when it comes up, so the whole loop is O(n log n).
#pragma once

#include <cstddef>
#include <optional>
#include <queue>
#include <string_view>
#include <vector>

namespace conveyor::tokenizer_detail {

// A run of the text that is (so far) one token; merged-away symbols keep length 0.
struct Symbol {
  size_t offset;
  size_t length;
  ptrdiff_t prev;  // -1: none
  ptrdiff_t next;  // -1: none
};

// One symbol per UTF-8 character; an ill-formed byte is a symbol of its own.
void split_characters(std::string_view text, std::vector<Symbol>& symbols);

// Merges adjacent symbols of `symbols` (over `text`) in order of priority:
// `priority(merged, left_length)` gives the priority of merging the pair whose
// joined text is `merged` (the left symbol being its first left_length bytes),
// higher first, or nullopt when the pair may not merge. Ties go to the
// leftmost pair.
template <class Priority>
void merge_symbols(std::string_view text, std::vector<Symbol>& symbols, Priority&& priority) {
  struct Candidate {
    double priority;
    size_t left;
    size_t right;
    size_t length;  // bytes of the merged text; stale when the symbols changed
  };
  struct Lower {
    bool operator()(const Candidate& a, const Candidate& b) const {
      return a.priority < b.priority || (a.priority == b.priority && a.left > b.left);
    }
  };
  std::priority_queue<Candidate, std::vector<Candidate>, Lower> queue;
  const auto try_add = [&](ptrdiff_t left, ptrdiff_t right) {
    if (left < 0 || right < 0) return;
    const Symbol& l = symbols[size_t(left)];
    const size_t length = l.length + symbols[size_t(right)].length;
    const std::optional<double> p = priority(text.substr(l.offset, length), l.length);
    if (p) queue.push({*p, size_t(left), size_t(right), length});
  };
  for (size_t i = 1; i < symbols.size(); ++i) try_add(ptrdiff_t(i) - 1, ptrdiff_t(i));

  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    Symbol& left = symbols[c.left];
    Symbol& right = symbols[c.right];
    // Lengths only grow, so equal lengths mean both symbols are unchanged.
    if (left.length == 0 || right.length == 0 || left.length + right.length != c.length) continue;
    left.length += right.length;
    right.length = 0;
    left.next = right.next;
    if (right.next >= 0) symbols[size_t(right.next)].prev = ptrdiff_t(c.left);
    try_add(left.prev, ptrdiff_t(c.left));
    try_add(ptrdiff_t(c.left), left.next);
  }
}

}  // namespace conveyor::tokenizer_detail
