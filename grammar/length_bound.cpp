#include "grammar/length_bound.hpp"

#include <algorithm>
#include <deque>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace conveyor::grammar {
namespace {

Error too_large(const std::string& what) {
  return make_error(Errc::invalid_argument, "the pattern is too large to bound its length (" + what + ")");
}

// Thompson's construction: states joined by empty moves and by moves on
// one code point of a set. Every loop gets a state of its own, so that no
// loop can re-enter a neighbour's moves.
class Nfa {
 public:
  struct Move {
    int32_t set;
    int32_t to;
  };
  std::vector<std::vector<int32_t>> empty_moves;
  std::vector<std::vector<Move>> moves;
  std::vector<std::vector<CodepointRange>> sets;

  int32_t add_state() {
    empty_moves.emplace_back();
    moves.emplace_back();
    return int32_t(moves.size()) - 1;
  }

  Status build(const Expr& e, int32_t from, int32_t to) {
    if (int32_t(moves.size()) > kMaxLengthBoundNfaStates)
      return too_large("more than " + std::to_string(kMaxLengthBoundNfaStates) + " automaton states");
    switch (e.kind) {
      case Expr::Kind::empty:
        empty_moves[size_t(from)].push_back(to);
        return {};
      case Expr::Kind::chars: {
        auto set = normalize_codepoints(e.ranges, e.negated);
        if (set.empty()) return {};  // matches nothing
        sets.push_back(std::move(set));
        moves[size_t(from)].push_back({int32_t(sets.size()) - 1, to});
        return {};
      }
      case Expr::Kind::seq: {
        if (e.items.empty()) empty_moves[size_t(from)].push_back(to);
        int32_t at = from;
        for (size_t i = 0; i < e.items.size(); ++i) {
          const int32_t next = i + 1 == e.items.size() ? to : add_state();
          if (Status s = build(e.items[i], at, next); !s) return s;
          at = next;
        }
        return {};
      }
      case Expr::Kind::alt:
        for (const Expr& item : e.items)
          if (Status s = build(item, from, to); !s) return s;
        return {};
      case Expr::Kind::repeat: {
        const Expr& item = e.items[0];
        int32_t at = from;
        for (int32_t i = 0; i < e.min; ++i) {
          const int32_t next = add_state();
          if (Status s = build(item, at, next); !s) return s;
          at = next;
        }
        if (e.max < 0) {
          const int32_t loop = add_state();
          empty_moves[size_t(at)].push_back(loop);
          if (Status s = build(item, loop, loop); !s) return s;
          empty_moves[size_t(loop)].push_back(to);
          return {};
        }
        for (int32_t i = e.min; i < e.max; ++i) {
          empty_moves[size_t(at)].push_back(to);
          const int32_t next = add_state();
          if (Status s = build(item, at, next); !s) return s;
          at = next;
        }
        empty_moves[size_t(at)].push_back(to);
        return {};
      }
      case Expr::Kind::rule:
        return make_error(Errc::invalid_argument, "a length bound on a grammar rule is not supported");
      case Expr::Kind::token:
        return make_error(Errc::invalid_argument, "a length bound on a token is not supported");
    }
    return {};
  }

  // The states reachable from `states` by empty moves, sorted.
  std::vector<int32_t> closure(std::vector<int32_t> states) const {
    if (seen_.size() != moves.size()) seen_.assign(moves.size(), 0);
    ++stamp_;  // marks of earlier calls are other numbers: no clearing
    std::vector<int32_t> out, stack = std::move(states);
    while (!stack.empty()) {
      const int32_t s = stack.back();
      stack.pop_back();
      if (seen_[size_t(s)] == stamp_) continue;
      seen_[size_t(s)] = stamp_;
      out.push_back(s);
      for (int32_t t : empty_moves[size_t(s)])
        if (seen_[size_t(t)] != stamp_) stack.push_back(t);
    }
    std::sort(out.begin(), out.end());
    return out;
  }

 private:
  mutable std::vector<uint32_t> seen_;
  mutable uint32_t stamp_ = 0;
};

struct Dfa {
  struct Move {
    std::vector<CodepointRange> set;
    int32_t to;
  };
  std::vector<std::vector<Move>> moves;  // state 0 is the start
  std::vector<char> accepting;
};

// The subset construction, over the intervals the NFA's sets cut the code
// points into (each set is a union of them).
Expected<Dfa> determinize(const Nfa& nfa, int32_t start, int32_t accept) {
  std::vector<uint32_t> cuts;
  for (const auto& set : nfa.sets)
    for (const auto& [lo, hi] : set) {
      cuts.push_back(lo);
      cuts.push_back(hi + 1);
    }
  std::sort(cuts.begin(), cuts.end());
  cuts.erase(std::unique(cuts.begin(), cuts.end()), cuts.end());
  // covers[set]: the intervals [cuts[i], cuts[i + 1]) the set is made of.
  std::vector<std::vector<int32_t>> covers(nfa.sets.size());
  for (size_t s = 0; s < nfa.sets.size(); ++s)
    for (const auto& [lo, hi] : nfa.sets[s])
      for (auto i = size_t(std::lower_bound(cuts.begin(), cuts.end(), lo) - cuts.begin());
           i + 1 < cuts.size() && cuts[i] <= hi; ++i)
        covers[s].push_back(int32_t(i));

  Dfa dfa;
  std::map<std::vector<int32_t>, int32_t> ids;
  std::vector<std::vector<int32_t>> subsets;
  const auto id_of = [&](std::vector<int32_t> subset) {
    auto [it, added] = ids.emplace(std::move(subset), int32_t(subsets.size()));
    if (added) {
      subsets.push_back(it->first);
      dfa.accepting.push_back(std::binary_search(it->first.begin(), it->first.end(), accept));
      dfa.moves.emplace_back();
    }
    return it->second;
  };
  id_of(nfa.closure({start}));
  int64_t work = 0;
  for (size_t d = 0; d < subsets.size(); ++d) {
    if (int32_t(subsets.size()) > kMaxLengthBoundDfaStates)
      return too_large("more than " + std::to_string(kMaxLengthBoundDfaStates) + " deterministic states");
    std::map<int32_t, std::vector<int32_t>> targets;  // interval -> NFA states after it
    for (int32_t s : subsets[d])
      for (const Nfa::Move& m : nfa.moves[size_t(s)]) {
        work += int64_t(covers[size_t(m.set)].size());
        for (int32_t i : covers[size_t(m.set)]) targets[i].push_back(m.to);
      }
    if ((work += int64_t(subsets[d].size())) > kMaxLengthBoundWork)
      return too_large("its automaton takes more than " + std::to_string(kMaxLengthBoundWork) + " steps to build");
    std::map<int32_t, std::vector<CodepointRange>> by_target;
    for (auto& [interval, states] : targets) {
      std::vector<int32_t> next = nfa.closure(std::move(states));
      if ((work += int64_t(next.size())) > kMaxLengthBoundWork)
        return too_large("its automaton takes more than " + std::to_string(kMaxLengthBoundWork) + " steps to build");
      const int32_t to = id_of(std::move(next));
      auto& set = by_target[to];
      const uint32_t lo = cuts[size_t(interval)], hi = cuts[size_t(interval) + 1] - 1;
      if (!set.empty() && set.back().second + 1 == lo) set.back().second = hi;
      else set.emplace_back(lo, hi);
    }
    for (auto& [to, set] : by_target) dfa.moves[d].push_back({std::move(set), to});
  }
  return dfa;
}

// The strings both automata accept: the reachable pairs of their states,
// moving on the code points both moves allow.
Expected<Dfa> intersect(const Dfa& x, const Dfa& y) {
  Dfa out;
  std::map<std::pair<int32_t, int32_t>, int32_t> ids;
  std::vector<std::pair<int32_t, int32_t>> pairs;
  const auto id_of = [&](int32_t a, int32_t c) {
    auto [it, added] = ids.emplace(std::make_pair(a, c), int32_t(pairs.size()));
    if (added) {
      pairs.emplace_back(a, c);
      out.accepting.push_back(x.accepting[size_t(a)] && y.accepting[size_t(c)]);
      out.moves.emplace_back();
    }
    return it->second;
  };
  id_of(0, 0);
  int64_t work = 0;
  for (size_t p = 0; p < pairs.size(); ++p) {
    if (int32_t(pairs.size()) > kMaxLengthBoundDfaStates)
      return too_large("more than " + std::to_string(kMaxLengthBoundDfaStates) + " deterministic states");
    const auto [a, c] = pairs[p];
    work += int64_t(x.moves[size_t(a)].size()) * int64_t(y.moves[size_t(c)].size());
    if (work > kMaxLengthBoundWork)
      return too_large("their intersection takes more than " + std::to_string(kMaxLengthBoundWork) + " steps to build");
    for (const Dfa::Move& mx : x.moves[size_t(a)])
      for (const Dfa::Move& my : y.moves[size_t(c)]) {
        std::vector<CodepointRange> both;  // the sets are sorted and disjoint: merge
        for (size_t i = 0, j = 0; i < mx.set.size() && j < my.set.size();) {
          const uint32_t lo = std::max(mx.set[i].first, my.set[j].first);
          const uint32_t hi = std::min(mx.set[i].second, my.set[j].second);
          if (lo <= hi) both.emplace_back(lo, hi);
          if (mx.set[i].second < my.set[j].second) ++i;
          else ++j;
        }
        if (both.empty()) continue;
        const int32_t to = id_of(mx.to, my.to);  // may grow out.moves: before indexing it
        out.moves[p].push_back({std::move(both), to});
      }
  }
  return out;
}

// `e` with every repetition whose maximum reaches `max_length` unbounded:
// the same strings of at most max_length code points (a match repeating X
// more than max_length times has that many empty X's to spare), with far
// fewer automaton states. An email address's labels ({0,61}) under a
// maxLength of 40 made about 2,900 rules a string, over 2 MB.
Expr unbound_long_repeats(Expr e, int32_t max_length) {
  for (Expr& item : e.items) item = unbound_long_repeats(std::move(item), max_length);
  if (e.kind == Expr::Kind::repeat && e.max >= max_length) e.max = -1;
  return e;
}

}  // namespace

Expected<Element> add_bounded_regexes(GrammarBuilder& b, std::span<const Expr> exprs, int32_t min_length,
                                      int32_t max_length, TextForm form) {
  std::optional<Dfa> dfa;
  for (const Expr& given : exprs) {
    const Expr e = max_length >= 0 ? unbound_long_repeats(given, max_length) : given;
    Nfa nfa;
    const int32_t start = nfa.add_state(), accept = nfa.add_state();
    if (Status s = nfa.build(e, start, accept); !s) return s.error();
    auto one = determinize(nfa, start, accept);
    if (!one) return one.error();
    if (dfa) {
      auto both = intersect(*dfa, *one);
      if (!both) return both.error();
      one = std::move(both);
    }
    dfa = std::move(*one);
  }
  if (!dfa) return make_error(Errc::invalid_argument, "no expression to bound");
  const auto states = int32_t(dfa->moves.size());
  const bool bounded = max_length >= 0;
  // Counts run 0..cap; without a maximum, minLength stands for "minLength or more".
  const int32_t cap = bounded ? max_length : min_length;
  int64_t total_moves = 0;
  for (const auto& moves : dfa->moves) total_moves += int64_t(moves.size());
  // The liveness pass below visits every move at every count.
  if (int64_t(states) * (cap + 1) > int64_t(40) * kMaxLengthBoundRules ||
      (total_moves + states) * (cap + 1) > 4 * kMaxLengthBoundWork)
    return too_large(std::to_string(states) + " states and " + std::to_string(total_moves) + " moves times " +
                     std::to_string(cap + 1) + " lengths");
  const auto next = [&](int32_t k) { return bounded ? k + 1 : std::min(k + 1, cap); };
  const auto at = [&](int32_t d, int32_t k) { return size_t(k) * size_t(states) + size_t(d); };
  const auto accepts = [&](int32_t d, int32_t k) { return dfa->accepting[size_t(d)] && k >= min_length; };

  // live: the state can still end at an allowed length.
  std::vector<char> live(size_t(states) * size_t(cap + 1), 0);
  const auto any_live_move = [&](int32_t d, int32_t k) {
    if (bounded && k == cap) return false;
    for (const Dfa::Move& m : dfa->moves[size_t(d)])
      if (live[at(m.to, next(k))]) return true;
    return false;
  };
  if (!bounded) {
    // The top count loops on itself: live there are the states that reach an
    // accepting one, found backwards from those.
    std::vector<std::vector<int32_t>> into(size_t(states), std::vector<int32_t>{});
    for (int32_t d = 0; d < states; ++d)
      for (const Dfa::Move& m : dfa->moves[size_t(d)]) into[size_t(m.to)].push_back(d);
    std::vector<int32_t> stack;
    for (int32_t d = 0; d < states; ++d)
      if (accepts(d, cap)) {
        live[at(d, cap)] = 1;
        stack.push_back(d);
      }
    while (!stack.empty()) {
      const int32_t d = stack.back();
      stack.pop_back();
      for (int32_t from : into[size_t(d)])
        if (!live[at(from, cap)]) {
          live[at(from, cap)] = 1;
          stack.push_back(from);
        }
    }
  }
  for (int32_t k = bounded ? cap : cap - 1; k >= 0; --k)
    for (int32_t d = 0; d < states; ++d) live[at(d, k)] = accepts(d, k) || any_live_move(d, k);
  if (!live[at(0, 0)]) return b.bytes(ByteSet{});

  // Each move's character class, lowered once, when a rule first uses it.
  ExprLowering lowering(b, form);
  std::vector<std::vector<std::optional<Element>>> classes(dfa->moves.size());
  for (int32_t d = 0; d < states; ++d) classes[size_t(d)].resize(dfa->moves[size_t(d)].size());
  const auto class_of = [&](int32_t d, size_t i) -> Expected<Element> {
    std::optional<Element>& c = classes[size_t(d)][i];
    if (!c) {
      auto element = lowering.lower_element(Expr::chars_of(dfa->moves[size_t(d)][i].set), "char");
      if (!element) return element.error();
      c = *element;
    }
    return *c;
  };

  // The rules of the live pairs the start reaches, breadth first.
  std::vector<int32_t> rule(live.size(), -1);
  std::deque<std::pair<int32_t, int32_t>> queue;
  int32_t rules = 0;
  int64_t alternatives = 0;
  const auto rule_of = [&](int32_t d, int32_t k) -> Expected<int32_t> {
    int32_t& r = rule[at(d, k)];
    if (r < 0) {
      if (++rules > kMaxLengthBoundRules)
        return too_large("more than " + std::to_string(kMaxLengthBoundRules) + " rules");
      r = b.add_rule("bounded");
      queue.emplace_back(d, k);
    }
    return r;
  };
  auto root = rule_of(0, 0);
  if (!root) return root.error();
  while (!queue.empty()) {
    const auto [d, k] = queue.front();
    queue.pop_front();
    const int32_t r = rule[at(d, k)];
    if (accepts(d, k)) b.add_alternative(r, {});
    if (bounded && k == cap) continue;
    const auto& moves = dfa->moves[size_t(d)];
    for (size_t i = 0; i < moves.size(); ++i) {
      if (!live[at(moves[i].to, next(k))]) continue;
      if (++alternatives > kMaxLengthBoundMoves)
        return too_large("more than " + std::to_string(kMaxLengthBoundMoves) + " alternatives");
      auto target = rule_of(moves[i].to, next(k));
      if (!target) return target.error();
      auto chars = class_of(d, i);
      if (!chars) return chars.error();
      b.add_alternative(r, {*chars, b.rule_ref(*target)});
    }
  }
  return b.rule_ref(*root);
}

}  // namespace conveyor::grammar
