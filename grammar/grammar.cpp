#include "grammar/grammar.hpp"

#include <algorithm>
#include <cstdio>
#include <functional>

namespace conveyor::grammar {

void ByteSet::set_range(uint8_t lo, uint8_t hi) {
  for (unsigned b = lo; b <= hi; ++b) set(uint8_t(b));
}

namespace {

// Which rules can match the empty string (a fixpoint over the rules).
std::vector<bool> nullable_rules(const Grammar& g) {
  std::vector<bool> nullable(g.rules.size(), false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < g.rules.size(); ++r) {
      if (nullable[r]) continue;
      for (const Alternative& alt : g.rules[r].alternatives) {
        const bool all = std::all_of(alt.begin(), alt.end(), [&](const Element& e) {
          return e.kind == Element::Kind::rule && nullable[size_t(e.index)];
        });
        if (all) {
          nullable[r] = changed = true;
          break;
        }
      }
    }
  }
  return nullable;
}

std::string byte_text(uint8_t b) {
  if (b >= 0x20 && b < 0x7f && b != '\\' && b != ']' && b != '-' && b != '^' && b != '"') {
    return std::string(1, char(b));
  }
  char buf[8];
  std::snprintf(buf, sizeof buf, "\\x%02X", b);
  return buf;
}

std::string set_text(const ByteSet& s) {
  std::string out = "[";
  for (int b = 0; b < 256;) {
    if (!s.test(uint8_t(b))) { ++b; continue; }
    int e = b;
    while (e + 1 < 256 && s.test(uint8_t(e + 1))) ++e;
    out += byte_text(uint8_t(b));
    if (e > b) out += "-" + byte_text(uint8_t(e));
    b = e + 1;
  }
  return out + "]";
}

// UTF-8 byte-range sequences covering the code points [lo, hi] (no
// surrogates inside, one encoded length): the classic split by continuation
// boundaries, so that each sequence is a product of byte ranges.
using ByteRanges = std::vector<std::pair<uint8_t, uint8_t>>;

int utf8_length(uint32_t cp) { return cp < 0x80 ? 1 : cp < 0x800 ? 2 : cp < 0x10000 ? 3 : 4; }

void encode(uint32_t cp, uint8_t out[4]) {
  switch (utf8_length(cp)) {
    case 1: out[0] = uint8_t(cp); break;
    case 2: out[0] = uint8_t(0xC0 | (cp >> 6)); out[1] = uint8_t(0x80 | (cp & 0x3F)); break;
    case 3:
      out[0] = uint8_t(0xE0 | (cp >> 12)); out[1] = uint8_t(0x80 | ((cp >> 6) & 0x3F));
      out[2] = uint8_t(0x80 | (cp & 0x3F));
      break;
    default:
      out[0] = uint8_t(0xF0 | (cp >> 18)); out[1] = uint8_t(0x80 | ((cp >> 12) & 0x3F));
      out[2] = uint8_t(0x80 | ((cp >> 6) & 0x3F)); out[3] = uint8_t(0x80 | (cp & 0x3F));
  }
}

void utf8_sequences(uint32_t lo, uint32_t hi, std::vector<ByteRanges>& out) {
  if (lo > hi) return;
  static constexpr uint32_t kLengthEnds[] = {0x7F, 0x7FF, 0xFFFF};
  for (uint32_t end : kLengthEnds) {
    if (lo <= end && hi > end) {
      utf8_sequences(lo, end, out);
      utf8_sequences(end + 1, hi, out);
      return;
    }
  }
  const int n = utf8_length(lo);
  for (int i = 1; i < n; ++i) {
    const uint32_t m = (uint32_t(1) << (6 * i)) - 1;
    if ((lo & ~m) != (hi & ~m)) {
      if ((lo & m) != 0) {
        utf8_sequences(lo, lo | m, out);
        utf8_sequences((lo | m) + 1, hi, out);
        return;
      }
      if ((hi & m) != m) {
        utf8_sequences(lo, (hi & ~m) - 1, out);
        utf8_sequences(hi & ~m, hi, out);
        return;
      }
    }
  }
  uint8_t a[4], b[4];
  encode(lo, a);
  encode(hi, b);
  ByteRanges seq;
  for (int k = 0; k < n; ++k) seq.emplace_back(a[k], b[k]);
  out.push_back(std::move(seq));
}

}  // namespace

std::vector<CodepointRange> normalize_codepoints(std::vector<CodepointRange> ranges, bool negated) {
  for (auto& [lo, hi] : ranges) hi = std::min<uint32_t>(hi, 0x10FFFF);
  std::erase_if(ranges, [](const CodepointRange& r) { return r.first > r.second; });
  std::sort(ranges.begin(), ranges.end());
  std::vector<CodepointRange> merged;
  for (const auto& r : ranges) {
    if (!merged.empty() && r.first <= merged.back().second + 1) {
      merged.back().second = std::max(merged.back().second, r.second);
    } else {
      merged.push_back(r);
    }
  }
  if (negated) {
    std::vector<CodepointRange> inverse;
    uint32_t next = 0;
    for (const auto& [lo, hi] : merged) {
      if (lo > next) inverse.emplace_back(next, lo - 1);
      next = hi + 1;
    }
    if (next <= 0x10FFFF) inverse.emplace_back(next, 0x10FFFF);
    merged = std::move(inverse);
  }
  // Surrogates are not characters; UTF-8 cannot encode them.
  std::vector<CodepointRange> out;
  for (const auto& [lo, hi] : merged) {
    if (hi < 0xD800 || lo > 0xDFFF) { out.emplace_back(lo, hi); continue; }
    if (lo < 0xD800) out.emplace_back(lo, 0xD7FF);
    if (hi > 0xDFFF) out.emplace_back(0xE000, hi);
  }
  return out;
}

Status check(const Grammar& g) {
  const auto fail = [](std::string m) { return make_error(Errc::invalid_argument, std::move(m)); };
  if (g.root < 0 || size_t(g.root) >= g.rules.size()) return fail("grammar has no root rule");
  if (g.trigger_token < -1) return fail("grammar trigger token " + std::to_string(g.trigger_token) + " is negative");
  for (const Rule& r : g.rules) {
    if (r.alternatives.empty()) return fail("grammar rule '" + r.name + "' has no alternative");
    for (const Alternative& alt : r.alternatives) {
      for (const Element& e : alt) {
        if (e.is_token()) {
          if (e.index < 0) return fail("grammar rule '" + r.name + "' refers to a negative token id");
          continue;
        }
        const size_t limit = e.kind == Element::Kind::rule ? g.rules.size() : g.byte_sets.size();
        if (e.index < 0 || size_t(e.index) >= limit) {
          return fail("grammar rule '" + r.name + "' refers to a missing " +
                      (e.kind == Element::Kind::rule ? "rule" : "byte class"));
        }
      }
    }
  }
  // Left recursion: a cycle through references that are preceded only by
  // nullable rules in their alternative.
  const std::vector<bool> nullable = nullable_rules(g);
  std::vector<std::vector<int32_t>> left(g.rules.size());
  for (size_t r = 0; r < g.rules.size(); ++r) {
    for (const Alternative& alt : g.rules[r].alternatives) {
      for (const Element& e : alt) {
        if (e.kind != Element::Kind::rule) break;
        left[r].push_back(e.index);
        if (!nullable[size_t(e.index)]) break;
      }
    }
  }
  enum Mark : uint8_t { unvisited, open, closed };
  std::vector<Mark> mark(g.rules.size(), unvisited);
  std::string cycle;
  std::function<bool(int32_t)> visit = [&](int32_t r) {
    mark[size_t(r)] = open;
    for (int32_t next : left[size_t(r)]) {
      if (mark[size_t(next)] == open) { cycle = g.rules[size_t(next)].name; return false; }
      if (mark[size_t(next)] == unvisited && !visit(next)) return false;
    }
    mark[size_t(r)] = closed;
    return true;
  };
  for (size_t r = 0; r < g.rules.size(); ++r) {
    if (mark[r] == unvisited && !visit(int32_t(r))) {
      return fail("grammar rule '" + cycle + "' is left-recursive (it can reach itself before reading a byte)");
    }
  }
  return Status::ok();
}

size_t memory_bytes(const Grammar& g) {
  size_t bytes = heap_bytes(g.rules) + heap_bytes(g.byte_sets);
  for (const Rule& r : g.rules) {
    if (r.name.capacity() > 15) bytes += r.name.capacity() + 1 + kHeapBlockBytes;  // past the inline buffer
    bytes += heap_bytes(r.alternatives);
    for (const Alternative& a : r.alternatives) bytes += heap_bytes(a);
  }
  return bytes;
}

std::string to_string(const Grammar& g) {
  std::string out;
  if (g.trigger_token >= 0) out += "# free text until token " + std::to_string(g.trigger_token) + "\n";
  for (size_t r = 0; r < g.rules.size(); ++r) {
    out += g.rules[r].name + (int32_t(r) == g.root ? " (root)" : "") + " ::=";
    for (size_t a = 0; a < g.rules[r].alternatives.size(); ++a) {
      if (a) out += " |";
      const Alternative& alt = g.rules[r].alternatives[a];
      if (alt.empty()) out += " \"\"";
      for (const Element& e : alt) {
        out += ' ';
        switch (e.kind) {
          case Element::Kind::rule: out += g.rules[size_t(e.index)].name; break;
          case Element::Kind::bytes: out += set_text(g.byte_sets[size_t(e.index)]); break;
          case Element::Kind::token: out += "<[" + std::to_string(e.index) + "]>"; break;  // llama.cpp's GBNF spelling
          case Element::Kind::not_token: out += "!<[" + std::to_string(e.index) + "]>"; break;
        }
      }
    }
    out += '\n';
  }
  return out;
}

std::vector<int32_t> token_elements(const Grammar& g) {
  std::vector<int32_t> ids;
  for (const Rule& r : g.rules) {
    for (const Alternative& alt : r.alternatives) {
      for (const Element& e : alt) {
        if (e.is_token()) ids.push_back(e.index);
      }
    }
  }
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  return ids;
}

int32_t GrammarBuilder::add_rule(std::string_view name) {
  const std::string base(name.empty() ? "rule" : name);
  std::string unique = base;
  // Suffixes continue from the last one given for this base, so that adding
  // n rules of one name costs O(n), not O(n^2) (repeat adds thousands).
  for (int& suffix = next_suffix_[base]; names_.contains(unique);) unique = base + "_" + std::to_string(++suffix);
  const auto index = int32_t(g_.rules.size());
  names_.emplace(unique, index);
  g_.rules.push_back(Rule{std::move(unique), {}});
  return index;
}

int32_t GrammarBuilder::find_rule(std::string_view name) const {
  const auto it = names_.find(std::string(name));
  return it == names_.end() ? -1 : it->second;
}

void GrammarBuilder::add_alternative(int32_t rule, Alternative alt) {
  g_.rules[size_t(rule)].alternatives.push_back(std::move(alt));
}

bool GrammarBuilder::has_alternatives(int32_t rule) const {
  return !g_.rules[size_t(rule)].alternatives.empty();
}

Element GrammarBuilder::bytes(const ByteSet& set) {
  const auto [it, added] = set_index_.try_emplace(set, int32_t(g_.byte_sets.size()));
  if (added) g_.byte_sets.push_back(set);
  return {Element::Kind::bytes, it->second};
}

Element GrammarBuilder::byte(uint8_t b) {
  ByteSet s;
  s.set(b);
  return bytes(s);
}

Alternative GrammarBuilder::literal(std::string_view s) {
  Alternative alt;
  alt.reserve(s.size());
  for (char c : s) alt.push_back(byte(uint8_t(c)));
  return alt;
}

Element GrammarBuilder::codepoints(std::vector<CodepointRange> ranges, bool negated) {
  ByteSet ascii;
  std::vector<ByteRanges> sequences;
  for (const auto& [lo, hi] : normalize_codepoints(std::move(ranges), negated)) {
    if (lo < 0x80) ascii.set_range(uint8_t(lo), uint8_t(std::min<uint32_t>(hi, 0x7F)));
    if (hi >= 0x80) utf8_sequences(std::max<uint32_t>(lo, 0x80), hi, sequences);
  }
  if (sequences.empty()) return bytes(ascii);
  const int32_t rule = add_rule("char");
  if (!ascii.empty()) add_alternative(rule, {bytes(ascii)});
  for (const ByteRanges& seq : sequences) {
    Alternative alt;
    for (const auto& [lo, hi] : seq) {
      ByteSet s;
      s.set_range(lo, hi);
      alt.push_back(bytes(s));
    }
    add_alternative(rule, std::move(alt));
  }
  return rule_ref(rule);
}

Element GrammarBuilder::star(const Alternative& item) {
  // r ::= item r | "": right recursion, which the matcher runs in constant
  // stack depth (a reference in last position replaces its caller).
  const int32_t r = add_rule("star");
  Alternative again = item;
  again.push_back(rule_ref(r));
  add_alternative(r, std::move(again));
  add_alternative(r, {});
  return rule_ref(r);
}

Element GrammarBuilder::plus(const Alternative& item) {
  const int32_t r = add_rule("plus");
  Alternative alt = item;
  alt.push_back(star(item));
  add_alternative(r, std::move(alt));
  return rule_ref(r);
}

Element GrammarBuilder::optional(const Alternative& item) {
  const int32_t r = add_rule("opt");
  add_alternative(r, item);
  add_alternative(r, {});
  return rule_ref(r);
}

Element GrammarBuilder::repeat(const Alternative& item, int32_t min, int32_t max) {
  // What follows the min copies.
  Alternative rest;
  if (max < 0) {
    rest.push_back(star(item));
  } else if (max > min) {
    // (item (item (...)?)?)?: nested, so each count has one parse.
    Element tail = optional(item);
    for (int32_t i = min + 1; i < max; ++i) {
      Alternative more = item;
      more.push_back(tail);
      tail = optional(more);
    }
    rest.push_back(tail);
  }
  // A few copies in a row; more as a chain of rules, each a copy and then
  // the next rule in last position (a tail call). In a row, each copy of a
  // rule reference would leave a return address of its own, with token
  // masks of its own (minLength 10000: a megabyte a token); chained, the
  // counts far from the end are alike and share their masks.
  constexpr int32_t kCopiesInARow = 4;
  if (min <= kCopiesInARow) {
    const int32_t r = add_rule("repeat");
    Alternative alt;
    for (int32_t i = 0; i < min; ++i) alt.insert(alt.end(), item.begin(), item.end());
    alt.insert(alt.end(), rest.begin(), rest.end());
    add_alternative(r, std::move(alt));
    return rule_ref(r);
  }
  // The first copy's rule first: flatten() inlines small rules in rule
  // order, up to a budget, and a text meets the first copies first.
  const int32_t first = add_rule("repeat");
  for (int32_t i = 1; i < min; ++i) add_rule("repeat");
  for (int32_t i = 0; i + 1 < min; ++i) {
    Alternative alt = item;
    alt.push_back(rule_ref(first + i + 1));
    add_alternative(first + i, std::move(alt));
  }
  Alternative last = item;
  last.insert(last.end(), rest.begin(), rest.end());
  add_alternative(first + min - 1, std::move(last));
  return rule_ref(first);
}

Element GrammarBuilder::choice(std::vector<Alternative> alts, std::string_view name) {
  const int32_t r = add_rule(name);
  for (Alternative& a : alts) add_alternative(r, std::move(a));
  return rule_ref(r);
}

Expected<Grammar> GrammarBuilder::build(int32_t root) && {
  g_.root = root;
  if (Status s = check(g_); !s) return s.error();
  return std::move(g_);
}

}  // namespace conveyor::grammar
