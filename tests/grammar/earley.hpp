// An Earley recognizer over the grammar IR, for the compilers' tests: it
// accepts any context-free grammar (ambiguous, nullable rules and all) in
// polynomial time, so a test can run whole JSON documents through a
// compiled schema without the matcher, and compare the two. Control tokens
// are symbols of their own, kTokenSymbol + id, which token elements match
// (a not_token element any but its own); bytes never match them.
#pragma once

#include <cstdint>
#include <string_view>
#include <set>
#include <tuple>
#include <vector>

#include "grammar/grammar.hpp"

namespace conveyor::grammar::testing {

inline constexpr int32_t kTokenSymbol = 256;

// Whether `text` (bytes, and tokens as kTokenSymbol + id) is in the language
// of g's root rule.
inline bool earley_accepts(const Grammar& g, const std::vector<int32_t>& text) {
  std::vector<bool> nullable(g.rules.size(), false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < g.rules.size(); ++r) {
      if (nullable[r]) continue;
      for (const Alternative& alt : g.rules[r].alternatives) {
        bool all = true;
        for (const Element& e : alt) all = all && e.kind == Element::Kind::rule && nullable[size_t(e.index)];
        if (all) { nullable[r] = changed = true; break; }
      }
    }
  }
  struct Item {
    int32_t rule, alt, dot;
    uint32_t origin;
  };
  struct Sets {
    std::vector<Item> items;
    std::set<std::tuple<int32_t, int32_t, int32_t, uint32_t>> seen;
  };
  std::vector<Sets> sets(text.size() + 1);
  const auto add = [&](size_t pos, Item it) {
    if (sets[pos].seen.emplace(it.rule, it.alt, it.dot, it.origin).second) sets[pos].items.push_back(it);
  };
  for (size_t a = 0; a < g.rules[size_t(g.root)].alternatives.size(); ++a) add(0, {g.root, int32_t(a), 0, 0});
  for (size_t pos = 0; pos <= text.size(); ++pos) {
    for (size_t k = 0; k < sets[pos].items.size(); ++k) {
      const Item it = sets[pos].items[k];
      const Alternative& alt = g.rules[size_t(it.rule)].alternatives[size_t(it.alt)];
      if (size_t(it.dot) == alt.size()) {
        const std::vector<Item>& waiting = sets[it.origin].items;
        for (size_t w = 0; w < waiting.size(); ++w) {
          const Item o = waiting[w];
          const Alternative& oalt = g.rules[size_t(o.rule)].alternatives[size_t(o.alt)];
          if (size_t(o.dot) < oalt.size() && oalt[size_t(o.dot)] == Element{Element::Kind::rule, it.rule}) {
            add(pos, {o.rule, o.alt, o.dot + 1, o.origin});
          }
        }
        continue;
      }
      const Element& e = alt[size_t(it.dot)];
      if (e.kind == Element::Kind::bytes) {
        if (pos < text.size() && text[pos] < kTokenSymbol && g.byte_sets[size_t(e.index)].test(uint8_t(text[pos]))) {
          add(pos + 1, {it.rule, it.alt, it.dot + 1, it.origin});
        }
        continue;
      }
      if (e.is_token()) {
        const bool negated = e.kind == Element::Kind::not_token;
        if (pos < text.size() && text[pos] >= kTokenSymbol && (text[pos] == kTokenSymbol + e.index) != negated)
          add(pos + 1, {it.rule, it.alt, it.dot + 1, it.origin});
        continue;
      }
      for (size_t a = 0; a < g.rules[size_t(e.index)].alternatives.size(); ++a) {
        add(pos, {e.index, int32_t(a), 0, uint32_t(pos)});
      }
      if (nullable[size_t(e.index)]) add(pos, {it.rule, it.alt, it.dot + 1, it.origin});
    }
    if (pos < text.size() && sets[pos + 1].items.empty()) return false;
  }
  for (const Item& it : sets[text.size()].items) {
    if (it.rule == g.root && it.origin == 0 &&
        size_t(it.dot) == g.rules[size_t(g.root)].alternatives[size_t(it.alt)].size()) {
      return true;
    }
  }
  return false;
}

inline bool earley_accepts(const Grammar& g, std::string_view text) {
  std::vector<int32_t> symbols;
  for (char c : text) symbols.push_back(uint8_t(c));
  return earley_accepts(g, symbols);
}

}  // namespace conveyor::grammar::testing
