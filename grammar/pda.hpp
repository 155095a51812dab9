// The byte-level pushdown automaton under the matcher and the token masks.
//
// A grammar position is a place in an alternative: (rule, alternative,
// element index), one past the end included, numbered flat (FlatGrammar). A
// stack is a linked list of nodes (position, parent node) in a StackPool
// that interns them, so equal stacks are one node id and stacks share their
// tails. A parser state is a set of stack TOPS: nodes whose position is a
// byte class; the special top kRootDone is the empty stack (the root is
// complete). A parent node holds where to continue (a "return address")
// once the alternative above it ends.
//
// Advancing by a byte keeps the tops whose class holds it, moves each past
// its class and expands (Pda::expand): a rule reference pushes each of the
// rule's alternatives, an alternative's end pops to the parent. A reference
// in LAST position does not push a return address (a tail call), so
// star()'s right recursion runs in constant stack depth. check() refuses
// left recursion, so expansion ends.
//
// Internal to grammar/. Not thread-safe: one Pda (and its pool) per thread.
#pragma once

#include <array>
#include <cstdint>
#include <vector>

#include "grammar/grammar.hpp"

namespace conveyor::grammar::detail {

// As a parent: the root's caller. As a top: the empty stack (the root is complete).
inline constexpr int32_t kRootDone = -1;
// As a parent: the unknown caller of the position a token mask is
// precomputed for; popping to it is an "exit" (grammar/token_mask.hpp).
inline constexpr int32_t kBottom = -2;

struct FlatGrammar {
  // What sits at a position; byte_set and rule both -1: the end of an
  // alternative. A token element is a byte class that no byte matches, with
  // the token's id in `token` (and `not_token` for any token but that one):
  // the byte walks, the DFA and the token masks treat it as a dead end, and
  // only Pda::advance_token moves past it.
  struct Slot {
    int32_t byte_set = -1;
    int32_t rule = -1;
    int32_t token = -1;
    bool not_token = false;
    bool takes(int32_t id) const { return token >= 0 && (id == token) != not_token; }
  };
  std::vector<Slot> slots;               // [positions]
  std::vector<int32_t> alt_start;        // [alternatives] each one's first position
  std::vector<int32_t> rule_first_alt;   // [rules + 1] rule r's alternatives: alt_start[rule_first_alt[r] ..]
  std::vector<ByteSet> byte_sets;
  // Bytes that every byte set treats alike share a class (JSON grammars
  // have a few dozen): transitions are stored per class, not per byte.
  std::array<uint8_t, 256> byte_class{};
  std::vector<uint8_t> class_byte;  // [classes] one byte of each
  std::vector<int32_t> rule_of;  // [positions] the rule each lies in
  // [positions] a hash of the position's place in its alternative and of the
  // alternatives of its rule, with rule references all alike: the copies a
  // bounded repetition makes share it (token masks compare only those).
  std::vector<uint64_t> shape;
  // [rules] where a caller continues once the rule ends (sorted); empty:
  // the rule returns only to the root's end, so popping past it ends the text.
  std::vector<std::vector<int32_t>> rule_returns;
  bool has_caller(int32_t pos) const { return !rule_returns[size_t(rule_of[size_t(pos)])].empty(); }
  // [rules] the bytes that can come first once the rule ends, in any caller
  // (what its return addresses start with, and, where one can end its own
  // rule at once, what follows that rule): a token's suffix past the end of
  // a rule that starts with another byte is rejected wherever it is.
  std::vector<ByteSet> follow;
  int32_t root = 0;
  bool has_tokens = false;  // some slot is a token element

  int32_t positions() const { return int32_t(slots.size()); }
  // Its tables' heap bytes.
  size_t memory_bytes() const;
  bool is_end(int32_t pos) const { return slots[size_t(pos)].byte_set < 0 && slots[size_t(pos)].rule < 0; }
  bool is_token(int32_t pos) const { return slots[size_t(pos)].token >= 0; }
};

// `g` (which check() accepts) as flat positions. References to small rules
// of byte classes (UTF-8 characters, escapes) are inlined first: a
// one-character rule that a star repeats (GrammarBuilder::codepoints'
// UTF-8 alternatives) would otherwise end after every byte, and each such
// end makes tokens context-dependent (grammar/token_mask.hpp); inlined, the
// whole repetition is one rule.
FlatGrammar flatten(const Grammar& g);

struct StackNode {
  int32_t pos;
  int32_t parent;  // a node id, kRootDone or kBottom
  bool operator==(const StackNode&) const = default;
};

// Interned stack nodes. truncate() forgets the newest nodes (undo after a
// trial walk) in O(1): a hash slot holding an id at or past size() counts as
// free, which keeps probing correct because nodes are forgotten newest first.
class StackPool {
 public:
  int32_t intern(int32_t pos, int32_t parent);
  const StackNode& operator[](int32_t id) const { return nodes_[size_t(id)]; }
  int32_t size() const { return int32_t(nodes_.size()); }
  void truncate(int32_t size) { nodes_.resize(size_t(size)); }
  size_t memory_bytes() const { return nodes_.capacity() * sizeof(StackNode) + table_.capacity() * sizeof(int32_t); }

 private:
  void rebuild(size_t capacity);

  std::vector<StackNode> nodes_;
  std::vector<int32_t> table_;  // node ids, -1 never used
  size_t used_slots_ = 0;       // slots ever written since the last rebuild
};

// A set of (position, parent) pairs, emptied in O(1) by a new stamp.
class SeenSet {
 public:
  bool insert(uint64_t key);  // false when already in
  void clear() { ++stamp_; count_ = 0; }

 private:
  std::vector<uint64_t> keys_;
  std::vector<uint32_t> stamps_;
  uint32_t stamp_ = 1;
  size_t count_ = 0;
};

class Pda {
 public:
  explicit Pda(const FlatGrammar& g) : g_(&g) {}

  const FlatGrammar& grammar() const { return *g_; }
  StackPool& pool() { return pool_; }
  const StackPool& pool() const { return pool_; }

  // Appends to `out` the tops of the state before any byte.
  void initial(std::vector<int32_t>& out);
  // Appends to `out` the tops reached from "continue at `pos`, then return
  // to `parent`" (popping `parent` to continue: expand(parent's pos,
  // parent's parent)). Returns whether an alternative ended over kBottom.
  bool expand(int32_t pos, int32_t parent, std::vector<int32_t>& out);
  // Appends to `arena` the tops after byte `b` from the tops
  // arena[begin, end). Returns whether an alternative ended over kBottom.
  bool advance(std::vector<int32_t>& arena, size_t begin, size_t end, uint8_t b);
  // The same after token `token`, for the tops at token elements that take it.
  void advance_token(std::vector<int32_t>& arena, size_t begin, size_t end, int32_t token);
  // The bytes some top in tops[0, n) accepts.
  ByteSet allowed(const int32_t* tops, size_t n) const;

 private:
  // Expands the work list into `out`, deduplicating within one step.
  bool run(std::vector<int32_t>& out);

  const FlatGrammar* g_;
  StackPool pool_;
  SeenSet seen_;
  std::vector<StackNode> work_;
};

}  // namespace conveyor::grammar::detail
