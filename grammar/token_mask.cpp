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
  LazyDfa(const FlatGrammar& g, int32_t pos) : pda_(g) {
    intern({pda_.pool().intern(pos, kBottom)});
  }

  static constexpr int32_t kStart = 0;
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

// What the classification walk collects.
struct Classes {
  std::vector<int32_t> accepted;
  std::vector<std::pair<std::string_view, int32_t>> uncertain;  // (suffix to check from the caller, token)
};

// Every token below trie node `c` (depth `depth`), where no stack survives:
// accepted if the alternative ended exactly at its end, uncertain for each
// exit on the path, else rejected.
// Without a caller, an exit can only end the text: only the tokens that end
// exactly there count.
void classify_dead_subtree(const TokenIndex& index, int32_t c, int32_t depth, bool exited_at_c,
                           const std::vector<int32_t>& path_exits, bool has_caller, Classes& out) {
  if (!has_caller) {
    if (exited_at_c) {
      for (int32_t id : index.text_trie().ids_at(c)) out.accepted.push_back(id);
    }
    return;
  }
  if (path_exits.empty() && !exited_at_c) return;
  for (int32_t id : index.text_trie().ids_below(c)) {
    const std::string_view bytes = index.bytes(id);
    if (exited_at_c && int32_t(bytes.size()) == depth) {
      out.accepted.push_back(id);
      continue;
    }
    for (int32_t k : path_exits) out.uncertain.emplace_back(bytes.substr(size_t(k)), id);
    if (exited_at_c) out.uncertain.emplace_back(bytes.substr(size_t(depth)), id);
  }
}

}  // namespace

PositionMask compute_position_mask(const FlatGrammar& g, const TokenIndex& index, int32_t pos) {
  const TokenTrie& trie = index.text_trie();
  LazyDfa dfa(g, pos);
  const bool has_caller = g.has_caller[size_t(pos)];
  Classes classes;
  std::vector<int32_t> path_exits;  // depths at which p's alternative could end on the current path
  struct Frame {
    int32_t node, state, next_child, depth;
    bool exited;  // whether this frame pushed onto path_exits
  };
  std::vector<Frame> frames{{0, LazyDfa::kStart, 1, 0, false}};
  while (!frames.empty()) {
    Frame& f = frames.back();
    if (f.next_child >= trie.end[size_t(f.node)]) {
      if (f.exited) path_exits.pop_back();
      frames.pop_back();
      continue;
    }
    const int32_t c = f.next_child;
    f.next_child = trie.end[size_t(c)];
    const int32_t depth = f.depth + 1;
    const uint8_t b = trie.byte[size_t(c)];
    if (!dfa.allowed(f.state).test(b)) {
      classify_dead_subtree(index, c, depth, false, path_exits, has_caller, classes);
      continue;
    }
    bool exited = false;
    const int32_t next = dfa.step(f.state, b, exited);
    if (dfa.dead(next)) {
      classify_dead_subtree(index, c, depth, exited, path_exits, has_caller, classes);
      continue;
    }
    for (int32_t id : trie.ids_at(c)) classes.accepted.push_back(id);
    if (!trie.has_children(c)) continue;
    if (exited) path_exits.push_back(depth);
    frames.push_back({c, next, c + 1, depth, exited});  // invalidates f
  }

  PositionMask m;
  std::sort(classes.accepted.begin(), classes.accepted.end());
  const size_t words = (size_t(index.vocab_size()) + 63) / 64;
  if (classes.accepted.size() * 32 < size_t(index.vocab_size())) {
    m.accepted_ids = std::move(classes.accepted);
  } else {
    m.accepted_bits.assign(words, 0);
    for (int32_t id : classes.accepted) set_bit(m.accepted_bits, id);
  }
  if (!classes.uncertain.empty()) m.uncertain = build_trie(classes.uncertain);
  return m;
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
