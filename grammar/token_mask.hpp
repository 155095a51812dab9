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
//    distinct suffixes go into a trie whose ids are the tokens, so the run
//    time walks each suffix once however many tokens share it (`",` after a
//    string);
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
// the states are few and each trie node costs one table lookup).
//
// Internal to grammar/. A PositionMask is immutable once computed.
#pragma once

#include <cstdint>
#include <span>
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
  TokenTrie uncertain;                  // token suffixes to check from the caller (with offsets)

  void add_accepted(std::span<uint64_t> mask) const;
  size_t memory_bytes() const;
};

PositionMask compute_position_mask(const FlatGrammar& g, const TokenIndex& index, int32_t pos);
// `inner`'s uncertain tokens classified from return address `ret` (a
// position after a rule reference) with an unknown caller below.
PositionMask compute_return_mask(const FlatGrammar& g, const TokenIndex& index, const PositionMask& inner,
                                 int32_t ret);

// Walks `trie` from the tops arena[begin, end) of `pda` and sets in `mask`
// the bit of every id at a node whose bytes the tops accept. Leaves `arena`
// and the pool as it found them.
void mark_accepted(Pda& pda, const TokenTrie& trie, std::vector<int32_t>& arena, size_t begin, size_t end,
                   std::span<uint64_t> mask);

inline void set_bit(std::span<uint64_t> mask, int32_t id) { mask[size_t(id) >> 6] |= uint64_t(1) << (id & 63); }

}  // namespace conveyor::grammar::detail
