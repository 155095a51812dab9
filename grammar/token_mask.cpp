#include "grammar/token_mask.hpp"

#include <algorithm>
#include <array>
#include <string_view>
#include <unordered_map>

namespace conveyor::grammar::detail {

namespace {

struct VectorHash {
  size_t operator()(const std::vector<int32_t>& v) const {
    uint64_t h = v.size();
    for (int32_t x : v) h = (h ^ uint32_t(x)) * 0x100000001b3ULL;
    return size_t(h);
  }
};

// States are sets of stack tops over kBottom (interned, sorted); a
// transition is computed on first use. The pool is never truncated, so node
// ids (and so states) stay valid for the whole walk.
class LazyDfa {
 public:
  explicit LazyDfa(const FlatGrammar& g) : pda_(g) {}

  // The start state: a top at `pos` (a byte class) below which is kBottom.
  int32_t start_at(int32_t pos) { return intern({pda_.pool().intern(pos, kBottom)}); }
  // The start state: continuing at return address `ret` above kBottom;
  // `exited` tells whether that can end at once.
  int32_t start_after(int32_t ret, bool& exited) {
    std::vector<int32_t> tops;
    exited = pda_.expand(ret, kBottom, tops);
    std::sort(tops.begin(), tops.end());
    return intern(std::move(tops));
  }

  bool dead(int32_t state) const { return sets_[size_t(state)].empty(); }
  const ByteSet& allowed(int32_t state) const { return allowed_[size_t(state)]; }

  // The state after `b`; `exited` tells whether an alternative ended over kBottom.
  int32_t step(int32_t state, uint8_t b, bool& exited) {
    int32_t t = next_[size_t(state)][b];
    if (t < 0) {
      scratch_.assign(sets_[size_t(state)].begin(), sets_[size_t(state)].end());
      const size_t n = scratch_.size();
      const bool ex = pda_.advance(scratch_, 0, n, b);
      std::vector<int32_t> tops(scratch_.begin() + long(n), scratch_.end());
      std::sort(tops.begin(), tops.end());
      t = intern(std::move(tops)) * 2 + (ex ? 1 : 0);
      next_[size_t(state)][b] = t;  // intern() may have grown next_: index again
    }
    exited = (t & 1) != 0;
    return t >> 1;
  }

 private:
  int32_t intern(std::vector<int32_t> tops) {
    const auto [it, added] = ids_.try_emplace(tops, int32_t(sets_.size()));
    if (added) {
      allowed_.push_back(pda_.allowed(tops.data(), tops.size()));
      sets_.push_back(std::move(tops));
      next_.emplace_back();
      next_.back().fill(-1);
    }
    return it->second;
  }

  Pda pda_;
  std::vector<std::vector<int32_t>> sets_;
  std::vector<ByteSet> allowed_;
  std::vector<std::array<int32_t, 256>> next_;  // state * 2 + exited, or -1: not computed yet
  std::unordered_map<std::vector<int32_t>, int32_t, VectorHash> ids_;
  std::vector<int32_t> scratch_;
};

// Classifies the strings of `trie` (tokens, or token suffixes) from a DFA
// state with kBottom below it.
class Classifier {
 public:
  Classifier(const TokenIndex& index, const TokenTrie& trie, bool has_caller)
      : index_(index), trie_(trie), has_caller_(has_caller) {}

  PositionMask run(LazyDfa& dfa, int32_t start, bool start_exited);

 private:
  // Every string below trie node `c` (depth `depth`), where no stack
  // survives: accepted if the alternative ended exactly at its end,
  // uncertain for each exit on the path, else rejected. Without a caller an
  // exit can only end the text, so only strings ending there count.
  void dead_subtree(int32_t c, int32_t depth, bool exited_at_c) {
    if (!has_caller_) {
      if (exited_at_c) {
        for (int32_t id : trie_.ids_at(c)) accepted_.push_back(id);
      }
      return;
    }
    if (path_exits_.empty() && !exited_at_c) return;
    const auto first = size_t(trie_.first_id[size_t(c)]);
    const auto last = size_t(trie_.first_id[size_t(trie_.end[size_t(c)])]);
    for (size_t e = first; e < last; ++e) {
      const int32_t id = trie_.ids[e];
      const int32_t offset = trie_.offset(e);
      const std::string_view bytes = index_.bytes(id).substr(size_t(offset));
      if (exited_at_c && int32_t(bytes.size()) == depth) {
        accepted_.push_back(id);
        continue;
      }
      for (int32_t k : path_exits_) uncertain_.push_back({bytes.substr(size_t(k)), id, offset + k});
      if (exited_at_c) uncertain_.push_back({bytes.substr(size_t(depth)), id, offset + depth});
    }
  }

  const TokenIndex& index_;
  const TokenTrie& trie_;
  const bool has_caller_;
  std::vector<int32_t> accepted_;
  std::vector<TrieEntry> uncertain_;  // suffixes to check from the caller
  std::vector<int32_t> path_exits_;   // depths at which the alternative could end on the current path
};

PositionMask Classifier::run(LazyDfa& dfa, int32_t start, bool start_exited) {
  struct Frame {
    int32_t node, state, next_child, depth;
    bool exited;  // whether this frame pushed onto path_exits_
  };
  std::vector<Frame> frames{{0, start, 1, 0, start_exited}};
  if (start_exited) {
    path_exits_.push_back(0);
    if (!has_caller_) {
      for (int32_t id : trie_.ids_at(0)) accepted_.push_back(id);
    }
  }
  while (!frames.empty()) {
    Frame& f = frames.back();
    if (f.next_child >= trie_.end[size_t(f.node)]) {
      if (f.exited) path_exits_.pop_back();
      frames.pop_back();
      continue;
    }
    const int32_t c = f.next_child;
    f.next_child = trie_.end[size_t(c)];
    const int32_t depth = f.depth + 1;
    const uint8_t b = trie_.byte[size_t(c)];
    if (dfa.dead(f.state) || !dfa.allowed(f.state).test(b)) {
      dead_subtree(c, depth, false);
      continue;
    }
    bool exited = false;
    const int32_t next = dfa.step(f.state, b, exited);
    if (dfa.dead(next)) {
      dead_subtree(c, depth, exited);
      continue;
    }
    for (int32_t id : trie_.ids_at(c)) accepted_.push_back(id);
    if (!trie_.has_children(c)) continue;
    if (exited) path_exits_.push_back(depth);
    frames.push_back({c, next, c + 1, depth, exited});  // invalidates f
  }

  PositionMask m;
  std::sort(accepted_.begin(), accepted_.end());
  accepted_.erase(std::unique(accepted_.begin(), accepted_.end()), accepted_.end());
  const size_t words = (size_t(index_.vocab_size()) + 63) / 64;
  if (accepted_.size() * 32 < size_t(index_.vocab_size())) {
    m.accepted_ids = std::move(accepted_);
  } else {
    m.accepted_bits.assign(words, 0);
    for (int32_t id : accepted_) set_bit(m.accepted_bits, id);
  }
  if (!uncertain_.empty()) m.uncertain = build_trie(uncertain_, true);
  return m;
}

}  // namespace

PositionMask compute_position_mask(const FlatGrammar& g, const TokenIndex& index, int32_t pos) {
  LazyDfa dfa(g);
  const int32_t start = dfa.start_at(pos);
  return Classifier(index, index.text_trie(), g.has_caller(pos)).run(dfa, start, false);
}

PositionMask compute_return_mask(const FlatGrammar& g, const TokenIndex& index, const PositionMask& inner,
                                 int32_t ret) {
  LazyDfa dfa(g);
  bool exited = false;
  const int32_t start = dfa.start_after(ret, exited);
  return Classifier(index, inner.uncertain, g.has_caller(ret)).run(dfa, start, exited);
}

void PositionMask::add_accepted(std::span<uint64_t> mask) const {
  if (!accepted_bits.empty()) {
    const size_t n = std::min(mask.size(), accepted_bits.size());
    for (size_t w = 0; w < n; ++w) mask[w] |= accepted_bits[w];
    return;
  }
  for (int32_t id : accepted_ids) set_bit(mask, id);
}

size_t PositionMask::memory_bytes() const {
  return sizeof(*this) + accepted_ids.capacity() * sizeof(int32_t) + accepted_bits.capacity() * sizeof(uint64_t) +
         uncertain.memory_bytes();
}

void mark_accepted(Pda& pda, const TokenTrie& trie, std::vector<int32_t>& arena, size_t begin, size_t end,
                   std::span<uint64_t> mask) {
  // Each frame's tops lie at arena[set_begin, set_end), its nodes past
  // pool_mark; while a frame is on top, nothing lies beyond them, so popping
  // it restores the arena and the pool to its parent's.
  struct Frame {
    int32_t node, next_child, pool_mark;
    size_t restore, set_begin, set_end;
    ByteSet allowed;
  };
  std::vector<Frame> frames;
  frames.push_back({0, 1, pda.pool().size(), arena.size(), begin, end, pda.allowed(arena.data() + begin, end - begin)});
  while (!frames.empty()) {
    Frame& f = frames.back();
    if (f.next_child >= trie.end[size_t(f.node)]) {
      arena.resize(f.restore);
      pda.pool().truncate(f.pool_mark);
      frames.pop_back();
      continue;
    }
    const int32_t c = f.next_child;
    f.next_child = trie.end[size_t(c)];
    const uint8_t b = trie.byte[size_t(c)];
    if (!f.allowed.test(b)) continue;
    const int32_t pool_mark = pda.pool().size();
    const size_t b0 = arena.size();
    pda.advance(arena, f.set_begin, f.set_end, b);
    if (arena.size() > b0) {
      for (int32_t id : trie.ids_at(c)) set_bit(mask, id);
      if (trie.has_children(c)) {
        const ByteSet allowed = pda.allowed(arena.data() + b0, arena.size() - b0);
        frames.push_back({c, c + 1, pool_mark, b0, b0, arena.size(), allowed});  // invalidates f
        continue;
      }
    }
    arena.resize(b0);
    pda.pool().truncate(pool_mark);
  }
}

}  // namespace conveyor::grammar::detail
