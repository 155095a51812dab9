#include "grammar/pda.hpp"

#include <algorithm>
#include <iterator>
#include <unordered_map>

namespace conveyor::grammar::detail {

namespace {

using Alternatives = std::vector<Alternative>;

// Inlining limits: small rules only, and no alternative multiplied past
// kMaxProduct, so a grammar grows by a bounded factor.
constexpr size_t kMaxInlinedAlternatives = 32;
constexpr size_t kMaxInlinedLength = 16;
constexpr size_t kMaxProduct = 64;

// Replaces references to small rules of byte classes only (leaves) by their
// alternatives (A ::= x R y with R ::= a | b becomes A ::= x a y | x b y),
// until none is left or the grammar has grown enough. A rule whose
// references were all inlined is a leaf in the next round: UTF-8
// characters, escapes. Rules that reference others stay: a chain of nested
// options (repeat()'s {0,80}) would otherwise be unrolled into one rule per
// count, each a copy of the rest.
void inline_small_rules(std::vector<Alternatives>& rules, int32_t root) {
  size_t total = 0;
  for (const Alternatives& alts : rules) {
    for (const Alternative& a : alts) total += a.size() + 1;
  }
  const size_t budget = total * 8 + 4096;
  const auto inlinable = [&](const Element& e) {
    if (e.kind != Element::Kind::rule || e.index == root) return false;
    const Alternatives& alts = rules[size_t(e.index)];
    return alts.size() <= kMaxInlinedAlternatives && std::all_of(alts.begin(), alts.end(), [](const Alternative& a) {
             return a.size() <= kMaxInlinedLength && std::all_of(a.begin(), a.end(), [](const Element& x) {
                      return x.kind == Element::Kind::bytes;
                    });
           });
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
          // only where exactly one element follows (`char star`), or where
          // it is the whole alternative (its alternatives are spliced in).
          // With more, the copies would be parallel stacks to the end; after
          // something, in last position, it is a tail call already, and
          // inlining there would unroll a chain of nested options.
          // (e.index names a rule only when e is one: read its size after inlinable().)
          const size_t alts = inlinable(e) ? rules[size_t(e.index)].size() : 0;
          const bool inline_it = alts > 0 && (alts == 1 || alt.size() == 1 || i + 2 == alt.size()) &&
                                 expanded.size() * alts <= kMaxProduct;
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
//
// A rule's set is its own addresses and those of every rule that reaches it
// by tail calls: each strongly connected component of the tail-call graph
// shares one set, computed once after those of its callers (Tarjan's order),
// so a chain of n rules (an object's n required members) costs n merges, not
// n passes over the chain.
void add_rule_returns(FlatGrammar& f) {
  const auto rules = int32_t(f.rule_first_alt.size() - 1);
  std::vector<std::vector<int32_t>> tail_callers(static_cast<size_t>(rules));
  f.rule_returns.assign(size_t(rules), {});
  for (int32_t pos = 0; pos < f.positions(); ++pos) {
    const int32_t callee = f.slots[size_t(pos)].rule;
    if (callee < 0) continue;
    if (f.is_end(pos + 1)) {
      tail_callers[size_t(callee)].push_back(f.rule_of[size_t(pos)]);
    } else {
      f.rule_returns[size_t(callee)].push_back(pos + 1);
    }
  }
  // Tarjan's algorithm without recursion, over the edges callee -> caller.
  constexpr int32_t kUnvisited = -1;
  const auto n = static_cast<size_t>(rules);
  std::vector<int32_t> index(n, kUnvisited), low(n, 0), component(n, -1);
  std::vector<int32_t> stack, members;
  std::vector<std::pair<int32_t, size_t>> path;  // (rule, next caller to visit)
  std::vector<int32_t> merged;
  int32_t counter = 0, components = 0;
  for (int32_t root = 0; root < rules; ++root) {
    if (index[size_t(root)] != kUnvisited) continue;
    path.emplace_back(root, 0);
    while (!path.empty()) {
      auto& [r, next] = path.back();
      if (next == 0 && index[size_t(r)] == kUnvisited) {
        index[size_t(r)] = low[size_t(r)] = counter++;
        stack.push_back(r);
      }
      const std::vector<int32_t>& callers = tail_callers[size_t(r)];
      if (next < callers.size()) {
        const int32_t c = callers[next++];
        if (index[size_t(c)] == kUnvisited) {
          path.emplace_back(c, 0);
        } else if (component[size_t(c)] < 0) {  // on the stack
          low[size_t(r)] = std::min(low[size_t(r)], index[size_t(c)]);
        }
        continue;
      }
      const int32_t done = r;
      path.pop_back();
      if (!path.empty()) low[size_t(path.back().first)] = std::min(low[size_t(path.back().first)], low[size_t(done)]);
      if (low[size_t(done)] != index[size_t(done)]) continue;
      // `done` roots a component: its members are on the stack down to it,
      // and every component its members call into is complete.
      members.clear();
      int32_t m;
      do {
        m = stack.back();
        stack.pop_back();
        component[size_t(m)] = components;
        members.push_back(m);
      } while (m != done);
      std::vector<int32_t> set;
      const auto add = [&](const std::vector<int32_t>& more) {
        merged.clear();
        std::set_union(set.begin(), set.end(), more.begin(), more.end(), std::back_inserter(merged));
        set.swap(merged);
      };
      for (int32_t member : members) {
        std::sort(f.rule_returns[size_t(member)].begin(), f.rule_returns[size_t(member)].end());
        add(f.rule_returns[size_t(member)]);
      }
      for (int32_t member : members) {
        for (int32_t caller : tail_callers[size_t(member)]) {
          if (component[size_t(caller)] != components) add(f.rule_returns[size_t(caller)]);
        }
      }
      for (int32_t member : members) f.rule_returns[size_t(member)] = set;
      ++components;
    }
  }
}

// Partitions the bytes by their membership in every byte set.
void add_byte_classes(FlatGrammar& f) {
  std::array<int32_t, 256> cls{};
  int32_t classes = 1;
  for (const ByteSet& set : f.byte_sets) {
    std::vector<std::array<int32_t, 2>> split(size_t(classes), {-1, -1});
    int32_t next = 0;
    for (int b = 0; b < 256; ++b) {
      int32_t& id = split[size_t(cls[size_t(b)])][set.test(uint8_t(b)) ? 1 : 0];
      if (id < 0) id = next++;
      cls[size_t(b)] = id;
    }
    classes = next;
  }
  f.class_byte.assign(size_t(classes), 0);
  for (int b = 255; b >= 0; --b) {
    f.byte_class[size_t(b)] = uint8_t(cls[size_t(b)]);
    f.class_byte[size_t(cls[size_t(b)])] = uint8_t(b);
  }
}

// FlatGrammar::follow, to the least fixed point: a rule's set starts as the
// first bytes of its return addresses' continuations, and grows by the set
// of the rule around each return address whose continuation can end it.
void add_follow_bytes(FlatGrammar& f) {
  const size_t rules = f.rule_returns.size();
  f.follow.assign(rules, {});
  Pda pda(f);
  std::vector<int32_t> tops;
  // Return address -> (the bytes its continuation starts with, whether it can end its rule at once).
  std::unordered_map<int32_t, std::pair<ByteSet, bool>> continuations;
  std::vector<std::vector<int32_t>> grows(rules);  // rule -> the rules whose set includes its own
  for (size_t r = 0; r < rules; ++r) {
    for (int32_t ret : f.rule_returns[r]) {
      auto [it, added] = continuations.try_emplace(ret);
      if (added) {
        tops.clear();
        const int32_t mark = pda.pool().size();
        it->second.second = pda.expand(ret, kBottom, tops);
        it->second.first = pda.allowed(tops.data(), tops.size());
        pda.pool().truncate(mark);
      }
      const auto& [first, ends] = it->second;
      for (size_t w = 0; w < 4; ++w) f.follow[r].bits[w] |= first.bits[w];
      if (ends) grows[size_t(f.rule_of[size_t(ret)])].push_back(int32_t(r));
    }
  }
  for (auto& rs : grows) {
    std::sort(rs.begin(), rs.end());
    rs.erase(std::unique(rs.begin(), rs.end()), rs.end());
  }
  std::vector<int32_t> work(rules);
  for (size_t r = 0; r < rules; ++r) work[r] = int32_t(r);
  while (!work.empty()) {
    const int32_t q = work.back();
    work.pop_back();
    for (int32_t r : grows[size_t(q)]) {
      ByteSet& set = f.follow[size_t(r)];
      const ByteSet before = set;
      for (size_t w = 0; w < 4; ++w) set.bits[w] |= f.follow[size_t(q)].bits[w];
      if (!(set == before)) work.push_back(r);
    }
  }
}

}  // namespace

size_t FlatGrammar::memory_bytes() const {
  size_t bytes = heap_bytes(slots) + heap_bytes(alt_start) + heap_bytes(rule_first_alt) + heap_bytes(byte_sets) +
                 heap_bytes(class_byte) + heap_bytes(rule_of) + heap_bytes(shape) + heap_bytes(rule_returns) +
                 heap_bytes(follow);
  for (const auto& returns : rule_returns) bytes += heap_bytes(returns);
  return bytes;
}

FlatGrammar flatten(const Grammar& g) {
  std::vector<Alternatives> rules;
  rules.reserve(g.rules.size());
  for (const Rule& r : g.rules) rules.push_back(r.alternatives);
  inline_small_rules(rules, g.root);
  FlatGrammar f;
  f.byte_sets = g.byte_sets;
  f.root = g.root;
  const auto no_bytes = int32_t(f.byte_sets.size());  // token elements' class, added if there are any
  for (size_t r = 0; r < rules.size(); ++r) {
    f.rule_first_alt.push_back(int32_t(f.alt_start.size()));
    for (const Alternative& alt : rules[r]) {
      f.alt_start.push_back(f.positions());
      for (const Element& e : alt) {
        FlatGrammar::Slot s;
        switch (e.kind) {
          case Element::Kind::bytes: s.byte_set = e.index; break;
          case Element::Kind::rule: s.rule = e.index; break;
          case Element::Kind::token:
          case Element::Kind::not_token:
            s.byte_set = no_bytes, s.token = e.index, s.not_token = e.kind == Element::Kind::not_token;
            f.has_tokens = true;
            break;
        }
        f.slots.push_back(s);
        f.rule_of.push_back(int32_t(r));
      }
      f.slots.push_back({});
      f.rule_of.push_back(int32_t(r));
    }
  }
  f.rule_first_alt.push_back(int32_t(f.alt_start.size()));
  if (f.has_tokens) f.byte_sets.emplace_back();
  f.shape.assign(f.slots.size(), 0);
  for (size_t r = 0; r < rules.size(); ++r) {
    uint64_t h = rules[r].size();
    for (const Alternative& alt : rules[r]) {
      h = mix(h + alt.size());
      for (const Element& e : alt) {
        const uint64_t kind = e.kind == Element::Kind::rule ? 0 : uint64_t(e.kind) + 1;  // 1, 3, 4
        h = mix(h ^ (kind == 0 ? 0 : (uint64_t(e.index) + 1) * 8 + kind));
      }
    }
    for (int32_t a = f.rule_first_alt[r]; a < f.rule_first_alt[r + 1]; ++a) {
      const int32_t first = f.alt_start[size_t(a)];
      const auto alternative = uint64_t(a - f.rule_first_alt[r]);
      for (int32_t p = first; p == first || !f.is_end(p - 1); ++p) {
        f.shape[size_t(p)] = mix(h + uint64_t(p - first) * 1000003 + alternative);
      }
    }
  }
  add_rule_returns(f);
  add_byte_classes(f);
  add_follow_bytes(f);
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

void Pda::advance_token(std::vector<int32_t>& arena, size_t begin, size_t end, int32_t token) {
  seen_.clear();
  for (size_t i = begin; i < end; ++i) {
    if (arena[i] == kRootDone) continue;
    const StackNode n = pool_[arena[i]];
    if (!g_->slots[size_t(n.pos)].takes(token)) continue;
    work_.push_back({n.pos + 1, n.parent});
    run(arena);
  }
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
