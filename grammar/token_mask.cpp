#include "grammar/token_mask.hpp"

#include <algorithm>
#include <bit>
#include <array>
#include <string_view>
#include <unordered_map>

namespace conveyor::grammar::detail {

LazyDfa::LazyDfa(const FlatGrammar& g) : g_(&g), classes_(g.class_byte.size()), pda_(g), begin_{0} { rehash(64); }

int32_t LazyDfa::start_at(int32_t pos) {
  const int32_t top = pda_.pool().intern(pos, kBottom);
  return intern({&top, 1});
}

int32_t LazyDfa::start_after(int32_t ret, bool& exited) {
  scratch_.clear();
  exited = pda_.expand(ret, kBottom, scratch_);
  std::sort(scratch_.begin(), scratch_.end());
  return intern(scratch_);
}

int32_t LazyDfa::compute_step(int32_t state, uint8_t b, bool& exited) {
  const std::span<const int32_t> from = tops(state);
  scratch_.assign(from.begin(), from.end());
  const size_t n = scratch_.size();
  exited = pda_.advance(scratch_, 0, n, b);
  std::sort(scratch_.begin() + long(n), scratch_.end());
  const int32_t next = intern(std::span<const int32_t>(scratch_).subspan(n));
  next_[size_t(state) * classes_ + g_->byte_class[b]] = next * 2 + (exited ? 1 : 0);
  return next;
}

namespace {
uint64_t hash_tops(std::span<const int32_t> set) {
  uint64_t h = set.size();
  for (int32_t x : set) h = (h ^ uint32_t(x)) * 0x100000001b3ULL;
  return h ^ (h >> 29);
}
}  // namespace

int32_t LazyDfa::intern(std::span<const int32_t> set) {
  const size_t mask = slots_.size() - 1;
  size_t i = size_t(hash_tops(set)) & mask;
  for (; slots_[i] >= 0; i = (i + 1) & mask) {
    const std::span<const int32_t> other = tops(slots_[i]);
    if (std::equal(set.begin(), set.end(), other.begin(), other.end())) return slots_[i];
  }
  const int32_t id = states();
  slots_[i] = id;
  allowed_.push_back(pda_.allowed(set.data(), set.size()));
  tops_.insert(tops_.end(), set.begin(), set.end());
  begin_.push_back(uint32_t(tops_.size()));
  next_.resize(next_.size() + classes_, -1);
  if (size_t(states()) * 2 > slots_.size()) rehash(slots_.size() * 2);
  return id;
}

void LazyDfa::rehash(size_t slots) {
  slots_.assign(slots, -1);
  const size_t mask = slots - 1;
  for (int32_t s = 0; s < states(); ++s) {
    size_t i = size_t(hash_tops(tops(s))) & mask;
    while (slots_[i] >= 0) i = (i + 1) & mask;
    slots_[i] = s;
  }
}

size_t LazyDfa::memory_bytes() const {
  return pda_.pool().memory_bytes() + next_.capacity() * sizeof(int32_t) + allowed_.capacity() * sizeof(ByteSet) +
         tops_.capacity() * sizeof(int32_t) + begin_.capacity() * sizeof(uint32_t) +
         slots_.capacity() * sizeof(int32_t);
}

bool LazyDfa::equivalent(int32_t a, int32_t b, int32_t depth) {
  // Pairs still to compare, with the bytes left; a pair met again with no
  // more bytes left than before needs nothing new.
  // Past kMaxPairs the answer is "no": a costly check is not worth a mask.
  constexpr size_t kMaxPairs = 4096;
  std::unordered_map<uint64_t, int32_t> seen;
  std::vector<std::array<int32_t, 3>> todo{{a, b, depth}};
  while (!todo.empty()) {
    if (seen.size() > kMaxPairs) return false;
    const auto [x, y, left] = todo.back();
    todo.pop_back();
    if (x == y) continue;
    const uint64_t key = (uint64_t(uint32_t(x)) << 32) | uint32_t(y);
    const auto [it, added] = seen.try_emplace(key, left);
    if (!added) {
      if (it->second >= left) continue;
      it->second = left;
    }
    if (dead(x) != dead(y) || !(allowed(x) == allowed(y))) return false;
    if (left == 0) continue;
    for (uint8_t byte : g_->class_byte) {
      if (!allowed(x).test(byte)) continue;
      bool ex = false, ey = false;
      const int32_t nx = step(x, byte, ex);
      const int32_t ny = step(y, byte, ey);
      if (ex != ey) return false;
      todo.push_back({nx, ny, left - 1});
    }
  }
  return true;
}

bool LazyDfa::same_on(int32_t a, int32_t b, std::string_view bytes) {
  for (char c : bytes) {
    if (a == b) return true;
    if (dead(a) != dead(b) || !(allowed(a) == allowed(b))) return false;
    if (!allowed(a).test(uint8_t(c))) return true;
    bool ea = false, eb = false;
    a = step(a, uint8_t(c), ea);
    b = step(b, uint8_t(c), eb);
    if (ea != eb) return false;
  }
  return true;
}

namespace {

// Classifies the strings of `trie` (tokens, or token suffixes) from a DFA
// state with kBottom below it.
class Classifier {
 public:
  // `follow`: the bytes that can come after an exit (FlatGrammar::follow).
  Classifier(const TokenIndex& index, bool has_caller, const ByteSet& follow)
      : index_(index), has_caller_(has_caller), follow_(follow) {}

  // Classifies the strings of `trie` from `start`; may be called for
  // several tries before finish().
  void run(const TokenTrie& trie, LazyDfa& dfa, int32_t start, bool start_exited);
  const PositionMask* finish(MaskStore& store);

 private:
  // Every string below trie node `c` (depth `depth`), where no stack
  // survives: accepted if the alternative ended exactly at its end,
  // uncertain for each exit on the path, else rejected. Without a caller an
  // exit can only end the text, so only strings ending there count.
  void dead_subtree(int32_t c, int32_t depth, bool exited_at_c) {
    if (!has_caller_) {
      if (exited_at_c) {
        for (int32_t id : trie_->ids_at(c)) accepted_.push_back(id);
      }
      return;
    }
    if (path_exits_.empty() && !exited_at_c) return;
    const auto first = size_t(trie_->first_id[size_t(c)]);
    const auto last = size_t(trie_->first_id[size_t(trie_->end[size_t(c)])]);
    const int32_t offset = trie_->offset;
    for (size_t e = first; e < last; ++e) {
      const int32_t id = trie_->ids[e];
      const std::string_view bytes = index_.bytes(id).substr(size_t(offset));
      if (exited_at_c && int32_t(bytes.size()) == depth) {
        accepted_.push_back(id);
        continue;
      }
      for (int32_t k : path_exits_) add_uncertain(bytes, id, offset, k);
      if (exited_at_c) add_uncertain(bytes, id, offset, depth);
    }
  }

  // Token `id`'s suffix past an exit `k` bytes into `bytes` (its bytes from
  // `offset` on), unless no caller can take its first byte.
  void add_uncertain(std::string_view bytes, int32_t id, int32_t offset, int32_t k) {
    if (follow_.test(uint8_t(bytes[size_t(k)]))) uncertain_.push_back({offset + k, {bytes.substr(size_t(k)), id}});
  }

  const TokenIndex& index_;
  const TokenTrie* trie_ = nullptr;  // the one run() walks
  const bool has_caller_;
  const ByteSet& follow_;
  std::vector<int32_t> accepted_;
  std::vector<std::pair<int32_t, TrieEntry>> uncertain_;  // (offset, suffix) to check from the caller
  std::vector<int32_t> path_exits_;  // depths at which the alternative could end on the current path
};

void Classifier::run(const TokenTrie& trie, LazyDfa& dfa, int32_t start, bool start_exited) {
  trie_ = &trie;
  struct Frame {
    int32_t node, state, next_child, depth;
    bool exited;  // whether this frame pushed onto path_exits_
  };
  std::vector<Frame> frames{{0, start, 1, 0, start_exited}};
  if (start_exited) {
    path_exits_.push_back(0);
    if (!has_caller_) {
      for (int32_t id : trie.ids_at(0)) accepted_.push_back(id);
    }
  }
  while (!frames.empty()) {
    Frame& f = frames.back();
    if (f.next_child >= trie.end[size_t(f.node)]) {
      if (f.exited) path_exits_.pop_back();
      frames.pop_back();
      continue;
    }
    const int32_t c = f.next_child;
    f.next_child = trie.end[size_t(c)];
    const int32_t depth = f.depth + 1;
    const uint8_t b = trie.byte[size_t(c)];
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
    for (int32_t id : trie.ids_at(c)) accepted_.push_back(id);
    if (!trie.has_children(c)) continue;
    if (exited) path_exits_.push_back(depth);
    frames.push_back({c, next, c + 1, depth, exited});  // invalidates f
  }
}

const PositionMask* Classifier::finish(MaskStore& store) {
  PositionMask m;
  // A list when it is smaller than the bitset, decided on the distinct
  // ids (duplicates only make the list longer), so that equal sets always
  // take the same form and MaskStore finds them equal.
  const size_t vocab = size_t(index_.vocab_size());
  if (accepted_.size() * 32 < vocab) {
    std::sort(accepted_.begin(), accepted_.end());
    accepted_.erase(std::unique(accepted_.begin(), accepted_.end()), accepted_.end());
    m.accepted_ids = std::move(accepted_);
  } else {
    m.accepted_bits.assign((vocab + 63) / 64, 0);
    for (int32_t id : accepted_) set_bit(m.accepted_bits, id);
    size_t distinct = 0;
    for (uint64_t w : m.accepted_bits) distinct += size_t(std::popcount(w));
    if (distinct * 32 < vocab) {
      for (size_t w = 0; w < m.accepted_bits.size(); ++w) {
        for (uint64_t bits = m.accepted_bits[w]; bits != 0; bits &= bits - 1)
          m.accepted_ids.push_back(int32_t(w * 64 + size_t(std::countr_zero(bits))));
      }
      m.accepted_bits.clear();
      m.accepted_bits.shrink_to_fit();
    }
  }
  // A trie per offset: the sets of tokens leaving at one offset recur
  // from position to position more often than the sets of all of them.
  std::sort(uncertain_.begin(), uncertain_.end());
  uncertain_.erase(std::unique(uncertain_.begin(), uncertain_.end()), uncertain_.end());
  std::vector<TrieEntry> group;
  for (size_t i = 0; i < uncertain_.size();) {
    const int32_t offset = uncertain_[i].first;
    group.clear();
    for (; i < uncertain_.size() && uncertain_[i].first == offset; ++i) group.push_back(uncertain_[i].second);
    m.uncertain.push_back(store.intern(group, offset));
  }
  return store.intern(std::move(m));
}

uint64_t hash_entries(const std::vector<TrieEntry>& sorted, int32_t offset) {
  uint64_t h = (uint64_t(uint32_t(offset)) << 32) ^ sorted.size();
  for (const TrieEntry& e : sorted) h = (h ^ uint32_t(e.id)) * 0x100000001b3ULL;
  return h;
}

// Whether `trie` holds exactly `sorted` (in build_trie's order) from `offset` on.
// The ids suffice: every entry of a trie is its token's bytes from the
// trie's one offset on, so (id, offset) determines the string.
bool holds(const TokenTrie& trie, const std::vector<TrieEntry>& sorted, int32_t offset) {
  if (trie.offset != offset || trie.ids.size() != sorted.size()) return false;
  for (size_t i = 0; i < sorted.size(); ++i) {
    if (trie.ids[i] != sorted[i].id) return false;
  }
  return true;
}

}  // namespace

const TokenTrie* MaskStore::intern(std::vector<TrieEntry>& entries, int32_t offset) {
  // build_trie's order: its ids come out in it, so equal sets compare id by id.
  if (!std::is_sorted(entries.begin(), entries.end())) std::sort(entries.begin(), entries.end());
  auto& same_hash = tries_by_hash_[hash_entries(entries, offset)];
  for (const auto& t : same_hash) {
    if (holds(*t, entries, offset)) return t.get();
  }
  same_hash.push_back(std::make_unique<const TokenTrie>(build_trie(entries, offset)));
  trie_bytes_ += same_hash.back()->memory_bytes() + sizeof(same_hash.back());
  ++tries_;
  return same_hash.back().get();
}

const PositionMask* MaskStore::intern(PositionMask mask) {
  uint64_t h = mask.accepted_ids.size() * 0x9e3779b97f4a7c15ULL + mask.uncertain.size();
  for (int32_t id : mask.accepted_ids) h = (h ^ uint32_t(id)) * 0x100000001b3ULL;
  for (uint64_t w : mask.accepted_bits) h = (h ^ w) * 0x100000001b3ULL;
  for (const TokenTrie* t : mask.uncertain) h = (h ^ reinterpret_cast<uintptr_t>(t)) * 0x100000001b3ULL;
  auto& same_hash = masks_by_hash_[h];
  for (const auto& m : same_hash) {
    if (*m == mask) return m.get();
  }
  mask.accepted_ids.shrink_to_fit();
  same_hash.push_back(std::make_unique<const PositionMask>(std::move(mask)));
  mask_bytes_ += same_hash.back()->memory_bytes() + sizeof(same_hash.back());
  ++masks_;
  return same_hash.back().get();
}

const PositionMask* compute_position_mask(LazyDfa& dfa, MaskStore& store, const FlatGrammar& g, const TokenIndex& index,
                                          int32_t pos) {
  Classifier c(index, g.has_caller(pos), g.follow[size_t(g.rule_of[size_t(pos)])]);
  c.run(index.text_trie(), dfa, dfa.start_at(pos), false);
  return c.finish(store);
}

const PositionMask* compute_return_mask(LazyDfa& dfa, MaskStore& store, const FlatGrammar& g, const TokenIndex& index,
                                        const PositionMask& inner, int32_t ret) {
  bool exited = false;
  const int32_t start = dfa.start_after(ret, exited);
  Classifier c(index, g.has_caller(ret), g.follow[size_t(g.rule_of[size_t(ret)])]);
  for (const TokenTrie* trie : inner.uncertain) c.run(*trie, dfa, start, exited);
  return c.finish(store);
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
         uncertain.capacity() * sizeof(uncertain[0]);
}

namespace {

// Each frame's tops lie at arena[set_begin, set_end), its nodes past
// pool_mark; while a frame is on top, nothing lies beyond them, so popping
// it restores the arena and the pool to its parent's.
struct MarkFrame {
  int32_t node, next_child, pool_mark;
  size_t restore, set_begin, set_end;
  ByteSet allowed;
};

void mark_in_trie(Pda& pda, const TokenTrie& trie, std::vector<int32_t>& arena, size_t begin, size_t end,
                  const ByteSet& allowed_at_root, std::vector<MarkFrame>& frames, std::span<uint64_t> mask) {
  frames.push_back({0, 1, pda.pool().size(), arena.size(), begin, end, allowed_at_root});
  while (!frames.empty()) {
    MarkFrame& f = frames.back();
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

}  // namespace

void mark_accepted(Pda& pda, std::span<const TokenTrie* const> tries, std::vector<int32_t>& arena, size_t begin,
                   size_t end, std::span<uint64_t> mask) {
  std::vector<MarkFrame> frames;
  const ByteSet allowed = pda.allowed(arena.data() + begin, end - begin);
  for (const TokenTrie* trie : tries) mark_in_trie(pda, *trie, arena, begin, end, allowed, frames, mask);
}

}  // namespace conveyor::grammar::detail
