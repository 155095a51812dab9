// Token masks per grammar position: XGrammar's adaptive token mask cache.
//
// For a position p (a byte class that can be a stack top), every text token
// of the vocabulary is classified by running it from p with an unknown
// caller below (kBottom):
//  - accepted: some stack consumes all of its bytes without popping past p's
//    alternative (or pops exactly at its last byte): accepted whatever the
//    caller is;
//  - uncertain: no stack survives inside, but after its first k bytes p's
//    alternative can end (an "exit"); the token is accepted exactly when its
//    suffix token[k:] is accepted from the caller, for some such k. The
//    suffixes go into tries whose ids are the tokens, one trie per k, so the
//    run time walks each suffix once however many tokens share it (`",`
//    after a string). A suffix is kept only if its first byte can follow
//    p's rule in some caller (FlatGrammar::follow): a bounded string
//    (maxLength: a rule per count, each able to end after any character)
//    would otherwise keep every token too long for the count left, at each
//    offset, for the caller to reject (26 MB of tries for a small schema
//    on Llama 3's vocabulary, 2.6 MB with follow bytes). The tries, and
//    the masks, are interned per grammar (MaskStore), as equal ones recur
//    from position to position;
//  - rejected: the rest.
// The uncertain tokens of p are classified again, the same way, for each
// return address r a caller of p's rule continues at (compute_return_mask:
// from r, with an unknown caller below), once per (p, r) pair: so a top
// (p, caller) contributes accepted(p) ∪ accepted(p, r), and only the
// uncertain tokens of (p, r), if any, are walked at run time from the
// caller's caller (mark_accepted). Whitespace before a word (`ws` then
// `name`) is the case this is for: ~40k Llama 3 tokens (" foo") are
// uncertain for `ws` alone and all accepted for (ws, name).
//
// The classification walks the vocabulary trie with a lazily built DFA over
// stack sets (the stacks above kBottom are bounded by the token length, so
// the states are few and each trie node costs one table lookup). One DFA
// serves every position of a grammar, which also lets a position reuse the
// mask of an equivalent one whose rule has the same follow bytes: a
// bounded repetition (maxLength, {1,80}) makes a position per count, and
// all but the last few behave alike for as many bytes as the longest token
// has (LazyDfa::equivalent on every string of up to TokenIndex::kShortToken
// bytes, same_on for each longer token).
// The DFA grows with the positions computed (each brings its start state and
// those its tokens reach); CompiledGrammar drops it past a budget
// (CompileOptions::dfa_budget_bytes) and starts an empty one.
//
// Internal to grammar/. A PositionMask is immutable once computed.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "grammar/pda.hpp"
#include "grammar/token_trie.hpp"
#include "grammar/vocabulary.hpp"

namespace conveyor::grammar::detail {

struct PositionMask {
  // Accepted tokens, as sorted ids or as a bitset over the vocabulary,
  // whichever is smaller (the other is empty).
  std::vector<int32_t> accepted_ids;
  std::vector<uint64_t> accepted_bits;  // [ceil(vocab / 64)]
  // Token suffixes to check from the caller, a trie per offset in the
  // token; owned by the grammar's MaskStore.
  std::vector<const TokenTrie*> uncertain;

  void add_accepted(std::span<uint64_t> mask) const;
  // Its own bytes (not its tries').
  size_t memory_bytes() const;
  bool operator==(const PositionMask&) const = default;
};

// What one grammar's masks are made of, each distinct mask and suffix trie
// stored once: positions that the DFA cannot prove equivalent often still
// get equal masks (a bounded string's counts far from its bound), and the
// (mask, return address) pairs of one rule mostly do. Not thread-safe.
class MaskStore {
 public:
  // The trie of `entries`, suffixes from `offset` on (sorted in place).
  const TokenTrie* intern(std::vector<TrieEntry>& entries, int32_t offset);
  const PositionMask* intern(PositionMask mask);
  size_t memory_bytes() const { return mask_bytes_ + trie_bytes_; }
  size_t tries() const { return tries_; }
  size_t masks() const { return masks_; }
  size_t trie_bytes() const { return trie_bytes_; }

 private:
  std::unordered_map<uint64_t, std::vector<std::unique_ptr<const TokenTrie>>> tries_by_hash_;
  std::unordered_map<uint64_t, std::vector<std::unique_ptr<const PositionMask>>> masks_by_hash_;
  size_t mask_bytes_ = 0, trie_bytes_ = 0;
  size_t tries_ = 0, masks_ = 0;
};

// Stack sets over kBottom as DFA states, interned, with transitions (per
// byte class) computed on first use. Its pool is never truncated, so states
// stay valid. Not thread-safe.
class LazyDfa {
 public:
  explicit LazyDfa(const FlatGrammar& g);

  // The state of a top at `pos` (a byte class) with kBottom below.
  int32_t start_at(int32_t pos);
  // The state continuing at return address `ret` with kBottom below;
  // `exited` tells whether that can end at once.
  int32_t start_after(int32_t ret, bool& exited);

  bool dead(int32_t state) const { return begin_[size_t(state)] == begin_[size_t(state) + 1]; }
  const ByteSet& allowed(int32_t state) const { return allowed_[size_t(state)]; }
  // The state after `b`; `exited` tells whether an alternative ended over kBottom.
  int32_t step(int32_t state, uint8_t b, bool& exited) {
    const int32_t t = next_[size_t(state) * classes_ + g_->byte_class[b]];
    if (t < 0) return compute_step(state, b, exited);
    exited = (t & 1) != 0;
    return t >> 1;
  }
  // Whether every string of at most `depth` bytes meets the same deaths
  // and exits from both states.
  bool equivalent(int32_t a, int32_t b, int32_t depth);
  // Whether `bytes` meets the same deaths and exits from both states.
  bool same_on(int32_t a, int32_t b, std::string_view bytes);
  int32_t states() const { return int32_t(allowed_.size()); }
  // Its tables, stack sets and pool. O(1): asked after every mask.
  size_t memory_bytes() const;

 private:
  std::span<const int32_t> tops(int32_t state) const {
    return {tops_.data() + begin_[size_t(state)], tops_.data() + begin_[size_t(state) + 1]};
  }
  int32_t compute_step(int32_t state, uint8_t b, bool& exited);
  // The state of the sorted tops `set` (which must not lie in tops_), added if new.
  int32_t intern(std::span<const int32_t> set);
  void rehash(size_t slots);

  const FlatGrammar* g_;
  size_t classes_;
  Pda pda_;
  std::vector<int32_t> tops_;    // every state's sorted tops, one state after another
  std::vector<uint32_t> begin_;  // [states + 1] state s's tops are tops_[begin_[s], begin_[s + 1])
  std::vector<ByteSet> allowed_;  // [states]
  std::vector<int32_t> next_;     // [states * classes] state * 2 + exited, or -1: not computed yet
  std::vector<int32_t> slots_;    // open addressing over the states by their tops; -1 empty
  std::vector<int32_t> scratch_;
};

const PositionMask* compute_position_mask(LazyDfa& dfa, MaskStore& store, const FlatGrammar& g, const TokenIndex& index,
                                          int32_t pos);
// `inner`'s uncertain tokens classified from return address `ret` (a
// position after a rule reference) with an unknown caller below.
const PositionMask* compute_return_mask(LazyDfa& dfa, MaskStore& store, const FlatGrammar& g, const TokenIndex& index,
                                        const PositionMask& inner, int32_t ret);

// Walks `tries` from the tops arena[begin, end) of `pda` and sets in `mask`
// the bit of every id at a node whose bytes the tops accept. Leaves `arena`
// and the pool as it found them.
void mark_accepted(Pda& pda, std::span<const TokenTrie* const> tries, std::vector<int32_t>& arena, size_t begin,
                   size_t end, std::span<uint64_t> mask);

inline void set_bit(std::span<uint64_t> mask, int32_t id) { mask[size_t(id) >> 6] |= uint64_t(1) << (id & 63); }
inline bool test_bit(std::span<const uint64_t> mask, int32_t id) { return (mask[size_t(id) >> 6] >> (id & 63)) & 1; }

}  // namespace conveyor::grammar::detail
