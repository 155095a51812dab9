#include "grammar/matcher.hpp"

#include <algorithm>
#include <bit>
#include <unordered_set>

#include "grammar/token_mask.hpp"

namespace conveyor::grammar {

using detail::kRootDone;

CompiledGrammar::CompiledGrammar(Key, std::shared_ptr<const Grammar> g, std::shared_ptr<const TokenIndex> vocab,
                                 CompileOptions options)
    : grammar_(std::move(g)), options_(options), flat_(detail::flatten(*grammar_)), vocab_(std::move(vocab)),
      masks_(new std::atomic<const detail::PositionMask*>[size_t(flat_.positions())]),
      dfa_(std::make_unique<detail::LazyDfa>(flat_)), store_(std::make_unique<detail::MaskStore>()) {
  for (int32_t p = 0; p < flat_.positions(); ++p) masks_[size_t(p)].store(nullptr, std::memory_order_relaxed);
  grammar_bytes_ = grammar::memory_bytes(*grammar_) + flat_.memory_bytes() +
                   size_t(flat_.positions()) * sizeof(std::atomic<const detail::PositionMask*>);
  update_memory_bytes();
}

CompiledGrammar::~CompiledGrammar() = default;

// How many recent masks of the same kind a new position is compared with.
constexpr size_t kCandidates = 4;

const detail::PositionMask& CompiledGrammar::mask_at(int32_t pos) const {
  if (const detail::PositionMask* m = masks_[size_t(pos)].load(std::memory_order_acquire)) return *m;
  std::lock_guard lock(build_mu_);
  if (const detail::PositionMask* m = masks_[size_t(pos)].load(std::memory_order_acquire)) return *m;
  bound_dfa();
  const int32_t start = dfa_->start_at(pos);
  // Suffixes are kept by what can follow the position's rule, so only
  // positions whose rules have the same follow bytes may share a mask.
  const ByteSet& follow = flat_.follow[size_t(flat_.rule_of[size_t(pos)])];
  auto& candidates =
      recent_[(flat_.shape[size_t(pos)] ^ ByteSetHash{}(follow) * 0x9e3779b97f4a7c15ULL) * 2 +
              (flat_.has_caller(pos) ? 1 : 0)];
  const detail::PositionMask* m = nullptr;
  const auto same = [&](const Candidate& c) {
    if (!(*c.follow == follow)) return false;
    const int32_t other = c.start;
    if (!dfa_->equivalent(start, other, int32_t(TokenIndex::kShortToken))) return false;
    for (int32_t id : vocab_->long_tokens()) {
      if (!dfa_->same_on(start, other, vocab_->bytes(id))) return false;
    }
    return true;
  };
  for (auto it = candidates.rbegin(); it != candidates.rend() && !m; ++it) {
    if (same(*it)) m = it->mask;
  }
  if (!m) {
    m = detail::compute_position_mask(*dfa_, *store_, flat_, *vocab_, pos);
    if (candidates.size() == kCandidates) candidates.erase(candidates.begin());
    candidates.push_back({start, &follow, m});
  }
  update_memory_bytes();
  masks_[size_t(pos)].store(m, std::memory_order_release);
  return *m;
}

const detail::PositionMask& CompiledGrammar::return_mask_at(int32_t pos, int32_t ret) const {
  const detail::PositionMask& inner = mask_at(pos);
  {
    std::shared_lock lock(returns_mu_);
    if (const auto it = returns_.find(&inner); it != returns_.end()) {
      if (const auto r = it->second.find(ret); r != it->second.end()) return *r->second;
    }
  }
  std::lock_guard build(build_mu_);
  {
    std::shared_lock lock(returns_mu_);
    if (const auto it = returns_.find(&inner); it != returns_.end()) {
      if (const auto r = it->second.find(ret); r != it->second.end()) return *r->second;
    }
  }
  bound_dfa();
  const detail::PositionMask* computed = detail::compute_return_mask(*dfa_, *store_, flat_, *vocab_, inner, ret);
  ++pairs_;
  update_memory_bytes();
  std::unique_lock lock(returns_mu_);
  return *returns_[&inner].try_emplace(ret, computed).first->second;
}

// Under build_mu_, before a mask is computed: CompileOptions::dfa_budget_bytes.
void CompiledGrammar::bound_dfa() const {
  if (dfa_->memory_bytes() <= options_.dfa_budget_bytes) return;
  dfa_ = std::make_unique<detail::LazyDfa>(flat_);
  recent_.clear();
}

// What one returns_ entry costs besides its mask: a node of two hash maps.
constexpr size_t kPairBytes = 64;

// Under build_mu_: what the grammar itself, its masks, their pairs and the DFA hold.
size_t CompiledGrammar::held_bytes() const {
  return grammar_bytes_ + store_->memory_bytes() + dfa_->memory_bytes() + pairs_ * kPairBytes;
}

// Under build_mu_, after a mask or the DFA grew.
void CompiledGrammar::update_memory_bytes() const { memory_bytes_.store(held_bytes(), std::memory_order_relaxed); }

void CompiledGrammar::precompute() const {
  for (int32_t p = 0; p < flat_.positions(); ++p) {
    if (flat_.slots[size_t(p)].byte_set < 0 || flat_.is_token(p) || mask_at(p).uncertain.empty()) continue;
    for (int32_t ret : flat_.rule_returns[size_t(flat_.rule_of[size_t(p)])]) return_mask_at(p, ret);
  }
}

CompiledGrammar::CacheStats CompiledGrammar::cache_stats() const {
  CacheStats s;
  std::unordered_set<const detail::PositionMask*> distinct;
  for (int32_t p = 0; p < flat_.positions(); ++p) {
    if (flat_.slots[size_t(p)].byte_set < 0 || flat_.is_token(p)) continue;
    ++s.positions;
    if (const detail::PositionMask* m = masks_[size_t(p)].load(std::memory_order_acquire)) {
      ++s.cached;
      distinct.insert(m);
    }
  }
  s.distinct = int32_t(distinct.size());
  std::lock_guard lock(build_mu_);
  s.stored = int32_t(store_->masks());
  s.dfa_states = dfa_->states();
  s.suffix_tries = int32_t(store_->tries());
  s.suffix_bytes = store_->trie_bytes();
  s.dfa_bytes = dfa_->memory_bytes();
  s.grammar_bytes = grammar_bytes_;
  s.returns = int32_t(pairs_);
  s.memory_bytes = held_bytes();
  return s;
}

Expected<std::shared_ptr<const CompiledGrammar>> compile(Grammar g, std::shared_ptr<const TokenIndex> vocab,
                                                         CompileOptions options) {
  return compile(std::make_shared<const Grammar>(std::move(g)), std::move(vocab), options);
}

Expected<std::shared_ptr<const CompiledGrammar>> compile(std::shared_ptr<const Grammar> grammar,
                                                         std::shared_ptr<const TokenIndex> vocab,
                                                         CompileOptions options) {
  if (!vocab) return make_error(Errc::invalid_argument, "grammar compiled without a vocabulary");
  if (!grammar) return make_error(Errc::invalid_argument, "no grammar to compile");
  const Grammar& g = *grammar;
  if (Status s = check(g); !s) return s.error();
  const auto refuse = [](std::string what) { return make_error(Errc::invalid_argument, std::move(what)); };
  if (const int32_t t = g.trigger_token;
      t >= 0 && (t >= vocab->vocab_size() || !vocab->bytes(t).empty() || vocab->is_end(t)))
    return refuse("grammar trigger token " + std::to_string(t) + " is not a control token of the vocabulary");
  for (const int32_t t : token_elements(g)) {
    if (t >= vocab->vocab_size()) return refuse("grammar token " + std::to_string(t) + " is not in the vocabulary");
    if (vocab->is_end(t))
      return refuse("grammar token " + std::to_string(t) + " is an end token (the grammar's end is where one may come)");
  }
  return std::shared_ptr<const CompiledGrammar>(
      std::make_shared<CompiledGrammar>(CompiledGrammar::Key(), std::move(grammar), std::move(vocab), options));
}

Matcher::Matcher(std::shared_ptr<const CompiledGrammar> g) : g_(std::move(g)), pda_(g_->flat()) {
  pda_.initial(arena_);
  history_.push_back({0, arena_.size(), pda_.pool().size(), false, g_->grammar().trigger_token >= 0});
}

bool Matcher::accept_token(int32_t token) {
  if (is_terminated() || token < 0 || token >= vocab_size()) return false;
  if (is_dormant()) {  // free text; the trigger wakes the rules up
    Step s = current();
    s.terminated = g_->vocabulary().is_end(token);
    s.dormant = token != g_->grammar().trigger_token;
    history_.push_back(s);
    return true;
  }
  if (g_->vocabulary().is_end(token)) {
    if (!can_end()) return false;
    Step s = current();
    s.terminated = true;
    history_.push_back(s);
    return true;
  }
  // The token's text, and a token element of its id (for a control token, only that).
  const Step from = current();
  const size_t base = arena_.size();
  const int32_t pool_mark = pda_.pool().size();
  if (const std::string_view bytes = g_->vocabulary().bytes(token); !bytes.empty()) walk(bytes);
  if (g_->flat().has_tokens) pda_.advance_token(arena_, from.begin, from.end, token);
  return commit(base, pool_mark);
}

bool Matcher::accept_bytes(std::string_view bytes) {
  if (is_terminated()) return false;
  if (is_dormant() || bytes.empty()) {
    history_.push_back(current());
    return true;
  }
  const size_t base = arena_.size();
  const int32_t pool_mark = pda_.pool().size();
  walk(bytes);
  return commit(base, pool_mark);
}

void Matcher::walk(std::string_view bytes) {
  const size_t base = arena_.size();
  size_t begin = current().begin, end = current().end;
  for (char c : bytes) {
    const size_t out = arena_.size();
    pda_.advance(arena_, begin, end, uint8_t(c));
    if (arena_.size() == out) {
      arena_.resize(base);
      return;
    }
    // Keep only the newest set, at base (the copy moves it down, never onto itself).
    std::copy(arena_.begin() + long(out), arena_.end(), arena_.begin() + long(base));
    arena_.resize(base + (arena_.size() - out));
    begin = base;
    end = arena_.size();
  }
}

bool Matcher::commit(size_t base, int32_t pool_mark) {
  if (arena_.size() == base) {
    pda_.pool().truncate(pool_mark);
    return false;
  }
  history_.push_back({base, arena_.size(), pda_.pool().size(), false});
  return true;
}

bool Matcher::can_end() const {
  if (is_terminated()) return false;
  if (is_dormant()) return true;
  const Step& s = current();
  return std::find(arena_.begin() + long(s.begin), arena_.begin() + long(s.end), kRootDone) !=
         arena_.begin() + long(s.end);
}

void Matcher::fill_mask(std::span<uint64_t> mask) const {
  std::fill(mask.begin(), mask.end(), 0);
  if (is_terminated() || mask.size() < mask_words()) return;
  if (is_dormant()) {
    const size_t n = size_t(vocab_size());
    std::fill(mask.begin(), mask.begin() + long(n / 64), ~uint64_t(0));
    if (n % 64) mask[n / 64] = (uint64_t(1) << (n % 64)) - 1;
    return;
  }
  const Step& s = current();
  const size_t scratch = arena_.size();
  const int32_t pool_mark = pda_.pool().size();
  std::vector<int32_t> done;  // positions whose accepted set is in the mask already
  bool end_allowed = false;
  for (size_t i = s.begin; i < s.end; ++i) {
    const int32_t top = arena_[i];
    if (top == kRootDone) {
      end_allowed = true;
      continue;
    }
    const detail::StackNode node = pda_.pool()[top];
    if (const detail::FlatGrammar::Slot& slot = g_->flat().slots[size_t(node.pos)]; slot.token >= 0) {
      if (slot.not_token) {
        add_all_but(slot.token, mask);
      } else {
        detail::set_bit(mask, slot.token);
      }
      continue;
    }
    const detail::PositionMask& m = g_->mask_at(node.pos);
    if (std::find(done.begin(), done.end(), node.pos) == done.end()) {
      m.add_accepted(mask);
      done.push_back(node.pos);
    }
    // Uncertain tokens continue in the caller; at the root there is none,
    // and a suffix cannot follow the end of the grammar.
    if (m.uncertain.empty() || node.parent == kRootDone) continue;
    const detail::StackNode caller = pda_.pool()[node.parent];
    const detail::PositionMask& r = g_->return_mask_at(node.pos, caller.pos);
    r.add_accepted(mask);
    if (r.uncertain.empty() || caller.parent == kRootDone) continue;
    const detail::StackNode outer = pda_.pool()[caller.parent];
    pda_.expand(outer.pos, outer.parent, arena_);
    detail::mark_accepted(pda_, r.uncertain, arena_, scratch, arena_.size(), mask);
    arena_.resize(scratch);
    pda_.pool().truncate(pool_mark);
  }
  if (end_allowed) {
    for (int32_t id : g_->vocabulary().end_ids()) detail::set_bit(mask, id);
  }
}

void Matcher::add_all_but(int32_t token, std::span<uint64_t> mask) const {
  // Every token but `token` and the ends; those bits stay as other tops set them.
  std::vector<std::pair<int32_t, bool>> kept{{token, detail::test_bit(mask, token)}};
  for (int32_t id : g_->vocabulary().end_ids()) kept.emplace_back(id, detail::test_bit(mask, id));
  const size_t n = size_t(vocab_size());
  std::fill(mask.begin(), mask.begin() + long(n / 64), ~uint64_t(0));
  if (n % 64) mask[n / 64] |= (uint64_t(1) << (n % 64)) - 1;
  for (const auto& [id, was] : kept) {
    if (!was) mask[size_t(id) >> 6] &= ~(uint64_t(1) << (id & 63));
  }
}

std::string Matcher::forced_bytes(size_t limit) const {
  std::string out;
  if (is_terminated() || is_dormant()) return out;
  const size_t scratch = arena_.size();
  const int32_t pool_mark = pda_.pool().size();
  size_t begin = current().begin, end = current().end;
  // The end, or a token element (which no byte matches): no byte is forced.
  const auto stops = [&](int32_t top) { return top == kRootDone || g_->flat().is_token(pda_.pool()[top].pos); };
  while (out.size() < limit) {
    if (std::any_of(arena_.begin() + long(begin), arena_.begin() + long(end), stops)) break;
    const ByteSet allowed = pda_.allowed(arena_.data() + begin, end - begin);
    int count = 0;
    for (uint64_t w : allowed.bits) count += std::popcount(w);
    if (count != 1) break;
    uint8_t b = 0;
    while (!allowed.test(b)) ++b;
    const size_t next = arena_.size();
    pda_.advance(arena_, begin, end, b);
    out.push_back(char(b));
    begin = next;
    end = arena_.size();
  }
  arena_.resize(scratch);
  pda_.pool().truncate(pool_mark);
  return out;
}

int32_t Matcher::forced_token() const {
  if (is_terminated() || is_dormant()) return -1;
  const Step& s = current();
  int32_t token = -1;
  for (size_t i = s.begin; i < s.end; ++i) {
    if (arena_[i] == kRootDone) return -1;
    const detail::FlatGrammar::Slot& slot = g_->flat().slots[size_t(pda_.pool()[arena_[i]].pos)];
    if (slot.token < 0 || slot.not_token || (token >= 0 && slot.token != token)) return -1;
    token = slot.token;
  }
  return token;
}

size_t Matcher::memory_bytes() const {
  return pda_.pool().memory_bytes() + arena_.capacity() * sizeof(int32_t) + history_.capacity() * sizeof(Step);
}

void Matcher::rollback(int32_t steps) {
  const int32_t keep = std::max<int32_t>(1, int32_t(history_.size()) - std::max<int32_t>(0, steps));
  history_.resize(size_t(keep));
  // Later steps' tops lie after this one's (accept_bytes appends), so
  // truncating forgets exactly them.
  arena_.resize(current().end);
  pda_.pool().truncate(current().pool_size);
}

}  // namespace conveyor::grammar
