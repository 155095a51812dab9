// A trie of byte strings (token bytes, or the suffixes a token mask checks at
// run time), laid out in preorder so that a subtree is a contiguous range of
// nodes and of ids: walking it needs no pointers, and "every token below this
// node" is one slice.
//
// Internal to grammar/ (the matcher and the token index share it).
// Immutable once built; safe to share between threads.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>
#include <vector>

namespace conveyor::grammar::detail {

struct TokenTrie {
  // Node 0 is the root (the empty prefix). Node n's subtree is the nodes
  // [n, end[n]); its children are n+1, end[n+1], end[end[n+1]], ... while
  // below end[n].
  std::vector<uint8_t> byte;         // [nodes] the byte on the edge into n (root: 0)
  std::vector<int32_t> end;          // [nodes]
  std::vector<int32_t> first_id;     // [nodes + 1] ids ending at n: ids[first_id[n] .. first_id[n+1])
  std::vector<int32_t> ids;          // the strings' ids, in the preorder of their nodes
  // Where every string starts in its token, when the strings are token
  // suffixes (string i is token ids[i]'s bytes from `offset` on).
  int32_t offset = 0;

  int32_t nodes() const { return int32_t(byte.size()); }
  bool has_children(int32_t n) const { return end[size_t(n)] > n + 1; }
  std::span<const int32_t> ids_at(int32_t n) const {
    return {ids.data() + first_id[size_t(n)], ids.data() + first_id[size_t(n) + 1]};
  }
  // The ids of every string in n's subtree (n's own included).
  std::span<const int32_t> ids_below(int32_t n) const {
    return {ids.data() + first_id[size_t(n)], ids.data() + first_id[size_t(end[size_t(n)])]};
  }
  size_t memory_bytes() const {
    return sizeof(*this) + byte.capacity() + (end.capacity() + first_id.capacity() + ids.capacity()) * sizeof(int32_t);
  }
};

struct TrieEntry {
  std::string_view bytes;
  int32_t id = 0;
  auto operator<=>(const TrieEntry&) const = default;
};

// The trie of `entries` (suffixes from `offset` on, or whole tokens). Empty
// strings sit at the root. Equal strings share a node. The entries are
// sorted in place.
TokenTrie build_trie(std::vector<TrieEntry>& entries, int32_t offset = 0);

}  // namespace conveyor::grammar::detail
