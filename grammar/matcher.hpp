// Constrained decoding: a Grammar compiled against a model's vocabulary, and
// the per-sequence Matcher that says which tokens may come next.
//
//   auto vocab = index_vocabulary(bytes);             // once per model
//   auto compiled = compile(std::move(grammar), vocab);  // once per grammar, shared
//   Matcher m(*compiled);                             // one per sequence
//   m.fill_mask(mask);  sample under the mask;  m.accept_token(token);
//
// The matcher is a pushdown automaton over bytes holding a set of stacks
// (the grammar may be ambiguous; grammar/pda.hpp), so tokens that end inside
// a UTF-8 character or span several grammar symbols need nothing special.
// Masks come from per-position caches in the CompiledGrammar
// (grammar/token_mask.hpp): the first mask at a new grammar position pays a
// walk of the vocabulary (milliseconds on 128k tokens), later ones take
// microseconds. CompiledGrammar::precompute() pays it all up front.
//
// End tokens (TokenIndex::end_ids) are allowed exactly when the root can be
// complete; accepting one terminates the matcher. A token element
// (Element::Kind::token: Mistral's [ARGS], GBNF's <[id]>) allows its token
// there, and only that token: a text token also where its bytes fit, a
// control token (empty bytes) nowhere else; a not_token element (GBNF's
// !<[id]>) allows any one token but its own and the ends, text tokens whole.
// forced_bytes() stops at either.
// compile() refuses a token element that is an end token or out of range.
//
// A grammar with a trigger token (Grammar::trigger_token, a structural tag
// that a control token opens) starts dormant: every token is allowed and
// accepted, end tokens terminate, and nothing is forced, until the trigger
// is accepted; from the next token on the rules hold from the root.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <shared_mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/status.hpp"
#include "grammar/grammar.hpp"
#include "grammar/pda.hpp"
#include "grammar/vocabulary.hpp"

namespace conveyor::grammar {

namespace detail {
struct PositionMask;
class LazyDfa;
class MaskStore;
}

// compile()'s tuning.
struct CompileOptions {
  // The DFA that masks are computed with holds the stack sets met from every
  // position computed so far, so it grows with the positions requests reach
  // (4,000 required properties: 130 MB when they are all reached). Past this
  // many bytes it is dropped, with what names its states, and grows again
  // from empty: the masks stay, and the states the next masks need return.
  // Checked before each mask, and its tables grow by doubling: it holds up
  // to about twice this.
  size_t dfa_budget_bytes = size_t(16) << 20;
};

// A Grammar bound to a TokenIndex, with its token mask cache. Immutable once
// compiled (the lazily filled cache is synchronised inside): share one
// between every request using the grammar, from any thread.
class CompiledGrammar {
 public:
  struct CacheStats {
    int32_t positions = 0;   // byte-class positions (possible stack tops)
    int32_t cached = 0;      // of which the masks are known
    int32_t distinct = 0;    // distinct masks among them (equal positions share one)
    int32_t returns = 0;     // (mask, return address) pairs whose masks are known
    int32_t stored = 0;      // distinct masks stored, the positions' and the pairs' together
    int32_t dfa_states = 0;  // states of the DFA the masks are computed with
    int32_t suffix_tries = 0; // distinct tries of the suffixes masks check at run time
    size_t suffix_bytes = 0;  // of memory_bytes, those tries'
    size_t dfa_bytes = 0;     // of memory_bytes, the DFA's (CompileOptions::dfa_budget_bytes)
    size_t grammar_bytes = 0;  // of memory_bytes, the grammar's own: its rules, flat form and mask slots
    size_t memory_bytes = 0; // held by the grammar, its stored masks and the DFA they are computed with
  };

  // Only compile() makes the key: the matcher relies on check() (a
  // left-recursive grammar would loop).
  class Key {
    explicit Key() = default;
    friend Expected<std::shared_ptr<const CompiledGrammar>> compile(std::shared_ptr<const Grammar>,
                                                                    std::shared_ptr<const TokenIndex>, CompileOptions);
  };
  CompiledGrammar(Key, std::shared_ptr<const Grammar> g, std::shared_ptr<const TokenIndex> vocab,
                  CompileOptions options);
  ~CompiledGrammar();

  const Grammar& grammar() const { return *grammar_; }
  const TokenIndex& vocabulary() const { return *vocab_; }
  // Computes every token mask now (e.g. before the first request): each
  // position's, and each (position, return address) pair's.
  void precompute() const;
  CacheStats cache_stats() const;
  // cache_stats().memory_bytes as of the last mask computed: a load, for
  // callers that look often (the server's grammar cache).
  size_t memory_bytes() const { return memory_bytes_.load(std::memory_order_relaxed); }

  // For Matcher: the flattened grammar, and position `pos`'s mask
  // (computed on first use; the reference stays valid while *this lives).
  const detail::FlatGrammar& flat() const { return flat_; }
  const detail::PositionMask& mask_at(int32_t pos) const;
  // mask_at(pos)'s uncertain tokens classified after return address `ret`.
  const detail::PositionMask& return_mask_at(int32_t pos, int32_t ret) const;

 private:
  std::shared_ptr<const Grammar> grammar_;  // shared with the caller's GrammarConstraint::ir
  CompileOptions options_;
  detail::FlatGrammar flat_;
  std::shared_ptr<const TokenIndex> vocab_;
  std::unique_ptr<std::atomic<const detail::PositionMask*>[]> masks_;  // [positions]
  // Masks are computed one at a time, under build_mu_, with one DFA.
  mutable std::mutex build_mu_;
  mutable std::unique_ptr<detail::LazyDfa> dfa_;
  mutable std::unique_ptr<detail::MaskStore> store_;  // owns the masks and their suffix tries
  // Recently computed masks by (shape, follow bytes, has a caller): the
  // candidates a new position may be equivalent to.
  struct Candidate {
    int32_t start;          // DFA state
    const ByteSet* follow;  // the position's rule's follow bytes
    const detail::PositionMask* mask;
  };
  mutable std::unordered_map<uint64_t, std::vector<Candidate>> recent_;
  // (mask, ret) -> return_mask_at's mask. Read under a shared lock.
  mutable std::shared_mutex returns_mu_;
  mutable std::unordered_map<const detail::PositionMask*, std::unordered_map<int32_t, const detail::PositionMask*>>
      returns_;
  mutable size_t pairs_ = 0;  // entries of returns_ (under build_mu_)
  // held_bytes() as of the last mask computed (or construction).
  mutable std::atomic<size_t> memory_bytes_{0};
  size_t grammar_bytes_ = 0;  // the rules, their flat form and masks_ (fixed once built)
  // The grammar's own bytes, the store's, the DFA's and returns_'s (under build_mu_).
  size_t held_bytes() const;
  void bound_dfa() const;
  void update_memory_bytes() const;
};

// check()s the grammar (Errc::invalid_argument naming the problem) and binds
// it to `vocab`. Cheap: the masks are computed lazily.
Expected<std::shared_ptr<const CompiledGrammar>> compile(std::shared_ptr<const Grammar> g,
                                                         std::shared_ptr<const TokenIndex> vocab,
                                                         CompileOptions options = {});
Expected<std::shared_ptr<const CompiledGrammar>> compile(Grammar g, std::shared_ptr<const TokenIndex> vocab,
                                                         CompileOptions options = {});

// The grammar state of one sequence. Not thread-safe, const methods included
// (they use scratch space inside): one thread at a time. Copyable (a copy
// shares the CompiledGrammar and continues independently).
class Matcher {
 public:
  explicit Matcher(std::shared_ptr<const CompiledGrammar> g);

  int32_t vocab_size() const { return g_->vocabulary().vocab_size(); }
  // Words a mask needs: ceil(vocab_size / 64).
  size_t mask_words() const { return (size_t(vocab_size()) + 63) / 64; }

  // Advances by one token; false (state unchanged) when the grammar refuses
  // it (a control token where no token element expects it included), it is
  // out of range, or the matcher is terminated.
  bool accept_token(int32_t token);
  // Advances by these bytes, all or nothing (one history step, like a token).
  bool accept_bytes(std::string_view bytes);

  // mask[w] bit b set = token 64w + b may come next. `mask` must hold
  // mask_words() (else it is left all zero); it is overwritten. All zero
  // once terminated.
  void fill_mask(std::span<uint64_t> mask) const;

  bool can_end() const;  // the root can be complete here (false once terminated)
  bool is_terminated() const { return history_.back().terminated; }
  // Free text before the grammar's trigger token (see the top of the file).
  bool is_dormant() const { return history_.back().dormant; }

  // The bytes the grammar forces next (every stack agrees on one byte,
  // repeatedly), e.g. `{"name": "` after `{` in a schema whose first
  // property is required. Stops where the grammar could end. At most
  // `limit` bytes.
  std::string forced_bytes(size_t limit = 4096) const;
  // The token the grammar forces next (every stack is at a token element of
  // that one id, e.g. Mistral's [ARGS] after a function's name), or -1.
  int32_t forced_token() const;

  // Undoes the last `steps` successful accept_token / accept_bytes calls
  // (at most accepted_steps(); more rolls back to the start).
  void rollback(int32_t steps);
  int32_t accepted_steps() const { return int32_t(history_.size()) - 1; }
  void reset() { rollback(accepted_steps()); }

  // Bytes held by this matcher's stacks and history (not the shared grammar).
  size_t memory_bytes() const;

 private:
  // One accepted step: its stack tops are arena_[begin, end); its nodes
  // are the pool's first pool_size.
  struct Step {
    size_t begin = 0, end = 0;
    int32_t pool_size = 0;
    bool terminated = false;
    bool dormant = false;  // before the trigger token: the tops are the initial ones
  };

  const Step& current() const { return history_.back(); }
  // Appends to arena_ the tops after `bytes` from the current ones: all of
  // them, or none when the grammar refuses a byte.
  void walk(std::string_view bytes);
  // A step of the tops arena_[base, end) if there are any; else forgets them
  // and the pool's nodes past `pool_mark`.
  bool commit(size_t base, int32_t pool_mark);
  // Sets in `mask` what a not_token element of `token` allows.
  void add_all_but(int32_t token, std::span<uint64_t> mask) const;

  std::shared_ptr<const CompiledGrammar> g_;
  mutable detail::Pda pda_;
  // Every step's tops back to back; const methods append scratch and remove it.
  mutable std::vector<int32_t> arena_;
  std::vector<Step> history_;  // back(): the current state
};

}  // namespace conveyor::grammar
