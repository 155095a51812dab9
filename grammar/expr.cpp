#include "grammar/expr.hpp"

#include <algorithm>
#include <cctype>
#include <string>

namespace conveyor::grammar {

Expr Expr::chars_of(std::vector<CodepointRange> ranges, bool negated) {
  Expr e;
  e.kind = Kind::chars;
  e.ranges = std::move(ranges);
  e.negated = negated;
  return e;
}

Expr Expr::sequence(std::vector<Expr> items) {
  if (items.size() == 1) return std::move(items[0]);
  Expr e;
  if (items.empty()) return e;
  e.kind = Kind::seq;
  e.items = std::move(items);
  return e;
}

Expr Expr::alternatives(std::vector<Expr> items) {
  if (items.size() == 1) return std::move(items[0]);
  Expr e;
  e.kind = Kind::alt;
  e.items = std::move(items);
  return e;
}

Expr Expr::repeated(Expr item, int32_t min, int32_t max) {
  Expr e;
  e.kind = Kind::repeat;
  e.items.push_back(std::move(item));
  e.min = min;
  e.max = max;
  return e;
}

Expr Expr::reference(int32_t rule) {
  Expr e;
  e.kind = Kind::rule;
  e.rule = rule;
  return e;
}

Expr Expr::token_of(int32_t id, bool negated) {
  Expr e;
  e.kind = Kind::token;
  e.token = id;
  e.negated = negated;
  return e;
}

ExprLowering::ExprLowering(GrammarBuilder& b, TextForm form, Rules rules)
    : b_(b), form_(form), rules_(std::move(rules)) {}

bool ExprLowering::nullable(const Expr& e) const {
  switch (e.kind) {
    case Expr::Kind::empty: return true;
    case Expr::Kind::chars:
    case Expr::Kind::token: return false;
    case Expr::Kind::seq:
      return std::all_of(e.items.begin(), e.items.end(), [&](const Expr& x) { return nullable(x); });
    case Expr::Kind::alt:
      return std::any_of(e.items.begin(), e.items.end(), [&](const Expr& x) { return nullable(x); });
    case Expr::Kind::repeat: return e.min == 0 || e.max == 0 || nullable(e.items[0]);
    case Expr::Kind::rule: return rules_.nullable && rules_.nullable(e.rule);
  }
  return false;
}

Expected<Alternative> ExprLowering::lower_nonempty(const Expr& e) {
  if (!nullable(e)) return lower(e);
  switch (e.kind) {
    case Expr::Kind::empty: return Alternative{b_.bytes(ByteSet{})};  // only "": nothing is left
    case Expr::Kind::seq: {
      // Every item is nullable. X1..Xn minus "" = (X1 minus "") X2..Xn |
      // (X2..Xn minus ""): built from the end with a rule per suffix, so
      // the size stays linear in n.
      const size_t n = e.items.size();
      auto last = lower_nonempty(e.items[n - 1]);
      if (!last) return last;
      auto last_whole = lower(e.items[n - 1]);
      if (!last_whole) return last_whole;
      Element suffix = b_.choice({std::move(*last_whole)}, "seq");  // X_i..X_n
      Element tail = b_.choice({std::move(*last)}, "seq");          // X_i..X_n minus ""
      for (size_t i = n - 1; i-- > 0;) {
        auto first = lower_nonempty(e.items[i]);
        if (!first) return first;
        first->push_back(suffix);
        tail = b_.choice({std::move(*first), {tail}}, "seq");
        auto item = lower(e.items[i]);
        if (!item) return item;
        item->push_back(suffix);
        suffix = b_.choice({std::move(*item)}, "seq");
      }
      return Alternative{tail};
    }
    case Expr::Kind::alt: {
      std::vector<Alternative> alts;
      for (const Expr& x : e.items) {
        auto part = lower_nonempty(x);
        if (!part) return part;
        alts.push_back(std::move(*part));
      }
      return Alternative{b_.choice(std::move(alts), "alt")};
    }
    case Expr::Kind::repeat: {  // X{n,m} minus "" = (X minus ""){1,m}
      if (e.max == 0) return Alternative{b_.bytes(ByteSet{})};
      auto body = nullable(e.items[0]) ? lower_nonempty(e.items[0]) : lower(e.items[0]);
      if (!body) return body;
      return repetition(std::move(*body), 1, e.max);
    }
    case Expr::Kind::rule: return Alternative{b_.rule_ref(rules_.nonempty(e.rule))};
    case Expr::Kind::chars:
    case Expr::Kind::token: break;
  }
  return lower(e);
}

Expected<Alternative> ExprLowering::repetition(Alternative item, int32_t min, int32_t max) {
  if (max == 0) return Alternative{};
  if (b_.rule_count() + std::max(min, max) > kMaxGrammarRules) {
    return make_error(Errc::invalid_argument,
                      "the grammar would have more than " + std::to_string(kMaxGrammarRules) + " rules");
  }
  const Element body = item.size() == 1 ? item[0] : b_.choice({std::move(item)}, "item");
  if (min == 0 && max < 0) return Alternative{b_.star({body})};
  if (min == 1 && max < 0) return Alternative{b_.plus({body})};
  if (min == 0 && max == 1) return Alternative{b_.optional({body})};
  if (min == max) return Alternative(size_t(min), body);
  return Alternative{b_.repeat({body}, min, max)};
}

Expected<Alternative> ExprLowering::lower(const Expr& e) {
  if (b_.rule_count() > kMaxGrammarRules) {
    return make_error(Errc::invalid_argument,
                      "the grammar would have more than " + std::to_string(kMaxGrammarRules) + " rules");
  }
  switch (e.kind) {
    case Expr::Kind::empty: return Alternative{};
    case Expr::Kind::chars: return Alternative{chars(e)};
    case Expr::Kind::rule: return Alternative{b_.rule_ref(e.rule)};
    case Expr::Kind::token: return Alternative{e.negated ? b_.not_token(e.token) : b_.token(e.token)};
    case Expr::Kind::seq: {
      Alternative out;
      for (const Expr& x : e.items) {
        auto part = lower(x);
        if (!part) return part;
        out.insert(out.end(), part->begin(), part->end());
      }
      return out;
    }
    case Expr::Kind::alt: {
      std::vector<Alternative> alts;
      for (const Expr& x : e.items) {
        auto part = lower(x);
        if (!part) return part;
        alts.push_back(std::move(*part));
      }
      return Alternative{b_.choice(std::move(alts), "alt")};
    }
    case Expr::Kind::repeat: {
      // See the header: X{n,m} with a nullable X is (X minus ""){0,m}.
      const bool empty_item = nullable(e.items[0]);
      auto body = empty_item ? lower_nonempty(e.items[0]) : lower(e.items[0]);
      if (!body) return body;
      return repetition(std::move(*body), empty_item ? 0 : e.min, e.max);
    }
  }
  return Alternative{};
}

Expected<Element> ExprLowering::lower_element(const Expr& e, std::string_view name) {
  auto alt = lower(e);
  if (!alt) return alt.error();
  if (alt->size() == 1) return (*alt)[0];
  return b_.choice({std::move(*alt)}, name);
}

Element ExprLowering::chars(const Expr& e) {
  std::vector<CodepointRange> set = normalize_codepoints(e.ranges, e.negated);
  if (const auto it = class_cache_.find(set); it != class_cache_.end()) return it->second;
  const Element out = form_ == TextForm::raw ? b_.codepoints(set) : json_chars(set);
  class_cache_.emplace(std::move(set), out);
  return out;
}

namespace {

bool contains(const std::vector<CodepointRange>& set, uint32_t cp) {
  return std::any_of(set.begin(), set.end(), [&](const CodepointRange& r) { return r.first <= cp && cp <= r.second; });
}

char short_escape(uint32_t cp) {
  switch (cp) {
    case '\b': return 'b';
    case '\f': return 'f';
    case '\n': return 'n';
    case '\r': return 'r';
    case '\t': return 't';
    default: return 0;
  }
}

}  // namespace

Element ExprLowering::json_chars(const std::vector<CodepointRange>& set) {
  // Members JSON writes raw: all but controls, '"' and '\'.
  std::vector<CodepointRange> raw;
  for (auto [lo, hi] : set) {
    lo = std::max<uint32_t>(lo, 0x20);
    if (lo > hi) continue;
    for (uint32_t special : {uint32_t('"'), uint32_t('\\')}) {
      if (lo <= special && special <= hi) {
        if (lo < special) raw.emplace_back(lo, special - 1);
        lo = special + 1;
      }
    }
    if (lo <= hi) raw.emplace_back(lo, hi);
  }
  std::vector<Alternative> alts;
  if (!raw.empty()) alts.push_back({b_.codepoints(raw)});
  const Element backslash = b_.byte('\\');
  for (char c : {'"', '\\', '/'}) {
    if (contains(set, uint32_t(c))) alts.push_back({backslash, b_.byte(uint8_t(c))});
  }
  ByteSet hex;
  hex.set_range('0', '9');
  hex.set_range('a', 'f');
  hex.set_range('A', 'F');
  bool all_controls = true;
  for (uint32_t cp = 0; cp < 0x20; ++cp) {
    if (!contains(set, cp)) { all_controls = false; continue; }
    if (const char s = short_escape(cp)) alts.push_back({backslash, b_.byte(uint8_t(s))});
  }
  if (all_controls) {
    ByteSet high;
    high.set_range('0', '1');
    Alternative u = b_.literal("\\u00");
    u.push_back(b_.bytes(high));
    u.push_back(b_.bytes(hex));
    alts.push_back(std::move(u));
  } else {
    for (uint32_t cp = 0; cp < 0x20; ++cp) {
      if (!contains(set, cp)) continue;
      static constexpr char kDigits[] = "0123456789abcdef";
      Alternative u = b_.literal(cp < 0x10 ? "\\u000" : "\\u001");
      ByteSet low;
      low.set(uint8_t(kDigits[cp & 15]));
      low.set(uint8_t(std::toupper(kDigits[cp & 15])));
      u.push_back(b_.bytes(low));
      alts.push_back(std::move(u));
    }
  }
  if (alts.empty()) return b_.bytes(ByteSet{});  // an empty class: never matches
  if (alts.size() == 1 && alts[0].size() == 1) return alts[0][0];
  return b_.choice(std::move(alts), "jchar");
}

int hex_digit_value(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

int32_t decode_utf8(std::string_view text, size_t i, size_t& length) {
  const auto c0 = uint8_t(text[i]);
  const size_t n = c0 < 0x80 ? 1 : (c0 >> 5) == 6 ? 2 : (c0 >> 4) == 14 ? 3 : (c0 >> 3) == 30 ? 4 : 0;
  if (n == 0 || i + n > text.size()) return -1;
  uint32_t cp = n == 1 ? c0 : n == 2 ? (c0 & 0x1F) : n == 3 ? (c0 & 0x0F) : (c0 & 0x07);
  for (size_t k = 1; k < n; ++k) {
    const auto c = uint8_t(text[i + k]);
    if ((c >> 6) != 2) return -1;
    cp = (cp << 6) | (c & 0x3F);
  }
  static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
  if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return -1;
  length = n;
  return int32_t(cp);
}

bool matches_some_text(const Grammar& g) {
  std::vector<bool> productive(g.rules.size(), false);
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < g.rules.size(); ++r) {
      if (productive[r]) continue;
      for (const Alternative& alt : g.rules[r].alternatives) {
        const bool ok = std::all_of(alt.begin(), alt.end(), [&](const Element& e) {
          switch (e.kind) {
            case Element::Kind::rule: return bool(productive[size_t(e.index)]);
            case Element::Kind::bytes: return !g.byte_sets[size_t(e.index)].empty();
            case Element::Kind::token:
            case Element::Kind::not_token: return true;
          }
          return false;
        });
        if (ok) {
          productive[r] = changed = true;
          break;
        }
      }
    }
  }
  return productive[size_t(g.root)];
}

}  // namespace conveyor::grammar
