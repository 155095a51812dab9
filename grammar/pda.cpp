#include "grammar/pda.hpp"

#include <algorithm>
#include <iterator>

namespace conveyor::grammar::detail {

namespace {

using Alternatives = std::vector<Alternative>;

// Rules that can reach themselves through references (Tarjan's strongly
// connected components, iterative so that long rule chains cannot overflow
// the call stack).
std::vector<bool> recursive_rules(const std::vector<Alternatives>& rules) {
  const size_t n = rules.size();
  std::vector<std::vector<int32_t>> refs(n);
  std::vector<bool> recursive(n, false);
  for (size_t r = 0; r < n; ++r) {
    for (const Alternative& alt : rules[r]) {
      for (const Element& e : alt) {
        if (e.kind != Element::Kind::rule) continue;
        refs[r].push_back(e.index);
        if (size_t(e.index) == r) recursive[r] = true;
      }
    }
  }
  std::vector<int32_t> index(n, -1), low(n, 0), scc_stack;
  std::vector<bool> on_stack(n, false);
  int32_t next_index = 0;
  struct Frame { int32_t rule; size_t edge; };
  for (size_t start = 0; start < n; ++start) {
    if (index[start] >= 0) continue;
    std::vector<Frame> frames{{int32_t(start), 0}};
    index[start] = low[start] = next_index++;
    scc_stack.push_back(int32_t(start));
    on_stack[start] = true;
    while (!frames.empty()) {
      Frame& f = frames.back();
      const auto r = size_t(f.rule);
      if (f.edge < refs[r].size()) {
        const auto w = size_t(refs[r][f.edge++]);
        if (index[w] < 0) {
          index[w] = low[w] = next_index++;
          scc_stack.push_back(int32_t(w));
          on_stack[w] = true;
          frames.push_back({int32_t(w), 0});
        } else if (on_stack[w]) {
          low[r] = std::min(low[r], index[w]);
        }
        continue;
      }
      if (low[r] == index[r]) {
        std::vector<int32_t> component;
        int32_t w;
        do {
          w = scc_stack.back();
          scc_stack.pop_back();
          on_stack[size_t(w)] = false;
          component.push_back(w);
        } while (size_t(w) != r);
        if (component.size() > 1) {
          for (int32_t c : component) recursive[size_t(c)] = true;
        }
      }
      frames.pop_back();
      if (!frames.empty()) {
        const auto parent = size_t(frames.back().rule);
        low[parent] = std::min(low[parent], low[r]);
      }
    }
  }
  return recursive;
}

// Inlining limits: small rules only, and no alternative multiplied past
// kMaxProduct, so a grammar grows by a bounded factor.
constexpr size_t kMaxInlinedAlternatives = 32;
constexpr size_t kMaxInlinedLength = 16;
constexpr size_t kMaxProduct = 64;

// Replaces references to small non-recursive rules by their alternatives
// (A ::= x R y with R ::= a | b becomes A ::= x a y | x b y), until none is
// left or the grammar has grown enough.
void inline_small_rules(std::vector<Alternatives>& rules, int32_t root) {
  const std::vector<bool> recursive = recursive_rules(rules);
  size_t total = 0;
  for (const Alternatives& alts : rules) {
    for (const Alternative& a : alts) total += a.size() + 1;
  }
  const size_t budget = total * 8 + 4096;
  const auto inlinable = [&](const Element& e) {
    if (e.kind != Element::Kind::rule || e.index == root || recursive[size_t(e.index)]) return false;
    const Alternatives& alts = rules[size_t(e.index)];
    return alts.size() <= kMaxInlinedAlternatives &&
           std::all_of(alts.begin(), alts.end(), [](const Alternative& a) { return a.size() <= kMaxInlinedLength; });
  };
  for (bool changed = true; changed && total < budget;) {
    changed = false;
    for (Alternatives& alts : rules) {
      Alternatives out;
      for (const Alternative& alt : alts) {
        Alternatives expanded{{}};
        for (size_t i = 0; i < alt.size(); ++i) {
          const Element& e = alt[i];
          // A rule of several alternatives copies what follows it into each:
          // only where at most one element follows (`item star`), else the
          // copies would be parallel stacks all the way to the end.
          const bool inline_it = inlinable(e) && (rules[size_t(e.index)].size() == 1 || i + 2 >= alt.size()) &&
                                 expanded.size() * rules[size_t(e.index)].size() <= kMaxProduct;
          if (!inline_it) {
            for (Alternative& x : expanded) x.push_back(e);
            continue;
          }
          Alternatives product;
          for (const Alternative& x : expanded) {
            for (const Alternative& tail : rules[size_t(e.index)]) {
              Alternative joined = x;
              joined.insert(joined.end(), tail.begin(), tail.end());
              product.push_back(std::move(joined));
            }
          }
          expanded = std::move(product);
          changed = true;
        }
        for (Alternative& x : expanded) {
          total += x.size() + 1;
          out.push_back(std::move(x));
        }
      }
      alts = std::move(out);
      if (total >= budget) break;
    }
  }
}

uint64_t pair_key(int32_t pos, int32_t parent) {
  return (uint64_t(uint32_t(pos)) << 32) | uint32_t(parent);
}

uint64_t mix(uint64_t k) {
  k ^= k >> 33;
  k *= 0xff51afd7ed558ccdULL;
  k ^= k >> 33;
  return k;
}

// Where a caller of each rule can continue once the rule ends (the return
// addresses of its stack nodes): the position after each reference to it
// before the end of an alternative, and, since a reference in last position
// passes its caller on, the return addresses of the rules that reference it
// last. A rule with none returns only to the root's end.
void add_rule_returns(FlatGrammar& f) {
  const size_t rules = f.rule_first_alt.size() - 1;
  std::vector<std::vector<int32_t>> tail_callers(rules);
  f.rule_returns.assign(rules, {});
  for (int32_t pos = 0; pos < f.positions(); ++pos) {
    const int32_t callee = f.slots[size_t(pos)].rule;
    if (callee < 0) continue;
    if (f.is_end(pos + 1)) {
      tail_callers[size_t(callee)].push_back(f.rule_of[size_t(pos)]);
    } else {
      f.rule_returns[size_t(callee)].push_back(pos + 1);
    }
  }
  for (auto& r : f.rule_returns) std::sort(r.begin(), r.end());
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t callee = 0; callee < rules; ++callee) {
      for (int32_t caller : tail_callers[callee]) {
        if (size_t(caller) == callee) continue;
        std::vector<int32_t> merged;
        const auto& mine = f.rule_returns[callee];
        const auto& theirs = f.rule_returns[size_t(caller)];
        std::set_union(mine.begin(), mine.end(), theirs.begin(), theirs.end(), std::back_inserter(merged));
        if (merged.size() != mine.size()) {
          f.rule_returns[callee] = std::move(merged);
          changed = true;
        }
      }
    }
  }
}

}  // namespace

FlatGrammar flatten(const Grammar& g) {
  std::vector<Alternatives> rules;
  rules.reserve(g.rules.size());
  for (const Rule& r : g.rules) rules.push_back(r.alternatives);
  inline_small_rules(rules, g.root);
  FlatGrammar f;
  f.byte_sets = g.byte_sets;
  f.root = g.root;
  for (size_t r = 0; r < rules.size(); ++r) {
    f.rule_first_alt.push_back(int32_t(f.alt_start.size()));
    for (const Alternative& alt : rules[r]) {
      f.alt_start.push_back(f.positions());
      for (const Element& e : alt) {
        FlatGrammar::Slot s;
        (e.kind == Element::Kind::bytes ? s.byte_set : s.rule) = e.index;
        f.slots.push_back(s);
        f.rule_of.push_back(int32_t(r));
      }
      f.slots.push_back({});
      f.rule_of.push_back(int32_t(r));
    }
  }
  f.rule_first_alt.push_back(int32_t(f.alt_start.size()));
  add_rule_returns(f);
  return f;
}

int32_t StackPool::intern(int32_t pos, int32_t parent) {
  if ((used_slots_ + 1) * 2 > table_.size()) rebuild(std::max<size_t>(64, nodes_.size() * 4));
  const size_t mask = table_.size() - 1;
  const StackNode key{pos, parent};
  for (size_t h = mix(pair_key(pos, parent)) & mask;; h = (h + 1) & mask) {
    const int32_t id = table_[h];
    if (id < 0 || id >= size()) {
      if (id < 0) ++used_slots_;
      table_[h] = size();
      nodes_.push_back(key);
      return table_[h];
    }
    if (nodes_[size_t(id)] == key) return id;
  }
}

void StackPool::rebuild(size_t capacity) {
  size_t size = 64;
  while (size < capacity) size *= 2;
  table_.assign(size, -1);
  const size_t mask = size - 1;
  for (int32_t id = 0; id < this->size(); ++id) {
    const StackNode& n = nodes_[size_t(id)];
    size_t h = mix(pair_key(n.pos, n.parent)) & mask;
    while (table_[h] >= 0) h = (h + 1) & mask;
    table_[h] = id;
  }
  used_slots_ = nodes_.size();
}

bool SeenSet::insert(uint64_t key) {
  if ((count_ + 1) * 2 > keys_.size()) {
    std::vector<uint64_t> old_keys = std::move(keys_);
    std::vector<uint32_t> old_stamps = std::move(stamps_);
    const size_t size = std::max<size_t>(64, old_keys.size() * 2);
    keys_.assign(size, 0);
    stamps_.assign(size, 0);
    count_ = 0;
    for (size_t i = 0; i < old_keys.size(); ++i) {
      if (old_stamps[i] == stamp_) insert(old_keys[i]);
    }
  }
  const size_t mask = keys_.size() - 1;
  for (size_t h = mix(key) & mask;; h = (h + 1) & mask) {
    if (stamps_[h] != stamp_) {
      stamps_[h] = stamp_;
      keys_[h] = key;
      ++count_;
      return true;
    }
    if (keys_[h] == key) return false;
  }
}

void Pda::initial(std::vector<int32_t>& out) {
  seen_.clear();
  const FlatGrammar& g = *g_;
  for (int32_t a = g.rule_first_alt[size_t(g.root)]; a < g.rule_first_alt[size_t(g.root) + 1]; ++a) {
    work_.push_back({g.alt_start[size_t(a)], kRootDone});
  }
  run(out);
}

bool Pda::expand(int32_t pos, int32_t parent, std::vector<int32_t>& out) {
  seen_.clear();
  work_.push_back({pos, parent});
  return run(out);
}

bool Pda::advance(std::vector<int32_t>& arena, size_t begin, size_t end, uint8_t b) {
  seen_.clear();
  bool exited = false;
  for (size_t i = begin; i < end; ++i) {
    const int32_t top = arena[i];
    if (top == kRootDone) continue;
    const StackNode n = pool_[top];
    if (!g_->byte_sets[size_t(g_->slots[size_t(n.pos)].byte_set)].test(b)) continue;
    work_.push_back({n.pos + 1, n.parent});
    exited |= run(arena);
  }
  return exited;
}

bool Pda::run(std::vector<int32_t>& out) {
  const FlatGrammar& g = *g_;
  bool exited = false;
  while (!work_.empty()) {
    const StackNode item = work_.back();
    work_.pop_back();
    if (!seen_.insert(pair_key(item.pos, item.parent))) continue;
    const FlatGrammar::Slot slot = g.slots[size_t(item.pos)];
    if (slot.byte_set >= 0) {
      out.push_back(pool_.intern(item.pos, item.parent));
    } else if (slot.rule >= 0) {
      const int32_t ret = g.is_end(item.pos + 1) ? item.parent : pool_.intern(item.pos + 1, item.parent);
      for (int32_t a = g.rule_first_alt[size_t(slot.rule)]; a < g.rule_first_alt[size_t(slot.rule) + 1]; ++a) {
        work_.push_back({g.alt_start[size_t(a)], ret});
      }
    } else if (item.parent == kRootDone) {
      if (seen_.insert(pair_key(kRootDone, kRootDone))) out.push_back(kRootDone);
    } else if (item.parent == kBottom) {
      exited = true;
    } else {
      work_.push_back(pool_[item.parent]);
    }
  }
  return exited;
}

ByteSet Pda::allowed(const int32_t* tops, size_t n) const {
  ByteSet s;
  for (size_t i = 0; i < n; ++i) {
    if (tops[i] == kRootDone) continue;
    const ByteSet& b = g_->byte_sets[size_t(g_->slots[size_t(pool_[tops[i]].pos)].byte_set)];
    for (size_t w = 0; w < 4; ++w) s.bits[w] |= b.bits[w];
  }
  return s;
}

}  // namespace conveyor::grammar::detail
