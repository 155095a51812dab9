#include "grammar/gbnf.hpp"

#include <algorithm>
#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <vector>

#include "grammar/expr.hpp"

namespace conveyor::grammar {
namespace {

bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '-' || c == '_';
}

struct RuleInfo {
  std::string name;
  Expr body;
  size_t defined_at = std::string_view::npos;  // offset of the definition
  size_t first_use = std::string_view::npos;   // offset of the first reference
};

class GbnfParser {
 public:
  GbnfParser(std::string_view text, const TokenLookup& tokens) : t_(text), tokens_(tokens) {}

  Expected<std::vector<RuleInfo>> parse() {
    skip_space(true);
    while (i_ < t_.size()) {
      if (auto s = rule(); !s) return s.error();
      skip_space(true);
    }
    for (const RuleInfo& r : rules_) {
      if (r.defined_at == std::string_view::npos) {
        return fail_at(r.first_use, "rule '" + r.name + "' is not defined");
      }
    }
    if (!index_.contains("root")) return make_error(Errc::invalid_argument, "gbnf: no rule 'root' (the start rule)");
    return std::move(rules_);
  }

  Error fail_at(size_t at, const std::string& what) const {
    return make_error(Errc::invalid_argument, "gbnf: " + what + " (" + position(at) + ")");
  }

  std::string position(size_t at) const {
    size_t line = 1, column = 1;
    for (size_t k = 0; k < at && k < t_.size(); ++k) {
      if (t_[k] == '\n') { ++line; column = 1; } else { ++column; }
    }
    return "line " + std::to_string(line) + ", column " + std::to_string(column);
  }

 private:
  Error fail(const std::string& what) const { return fail_at(i_, what); }
  bool peek(char c) const { return i_ < t_.size() && t_[i_] == c; }

  // Spaces, tabs and comments; newlines too when `newlines`.
  void skip_space(bool newlines) {
    while (i_ < t_.size()) {
      const char c = t_[i_];
      if (c == ' ' || c == '\t' || (newlines && (c == '\n' || c == '\r'))) {
        ++i_;
      } else if (c == '#') {
        while (i_ < t_.size() && t_[i_] != '\n') ++i_;
      } else {
        break;
      }
    }
  }

  std::string_view name() {
    const size_t start = i_;
    while (i_ < t_.size() && is_name_char(t_[i_])) ++i_;
    return t_.substr(start, i_ - start);
  }

  int32_t rule_index(std::string_view n) {
    const auto [it, added] = index_.try_emplace(std::string(n), int32_t(rules_.size()));
    if (added) rules_.push_back(RuleInfo{std::string(n), {}, std::string_view::npos, std::string_view::npos});
    return it->second;
  }

  Expected<bool> rule() {
    const size_t start = i_;
    const std::string_view n = name();
    if (n.empty()) return fail("expected a rule name");
    skip_space(false);
    if (!t_.substr(i_).starts_with("::=")) return fail("expected '::=' after the rule name");
    i_ += 3;
    skip_space(true);
    auto body = alternates(false);
    if (!body) return body.error();
    if (peek('\r')) ++i_;
    if (i_ < t_.size() && !peek('\n')) return fail("expected the end of the line");
    RuleInfo& r = rules_[size_t(rule_index(n))];
    if (r.defined_at != std::string_view::npos) {
      return fail_at(start, "rule '" + r.name + "' is defined twice (first at " + position(r.defined_at) + ")");
    }
    r.defined_at = start;
    r.body = std::move(*body);
    return true;
  }

  Expected<Expr> alternates(bool nested) {
    std::vector<Expr> alts;
    for (;;) {
      auto seq = sequence(nested);
      if (!seq) return seq;
      alts.push_back(std::move(*seq));
      if (!peek('|')) return Expr::alternatives(std::move(alts));
      ++i_;
      skip_space(true);
    }
  }

  Expected<Expr> sequence(bool nested) {
    std::vector<Expr> items;
    while (i_ < t_.size()) {
      const char c = t_[i_];
      if (c == '"') {
        auto lit = literal();
        if (!lit) return lit;
        items.push_back(std::move(*lit));
      } else if (c == '[') {
        auto cls = char_class();
        if (!cls) return cls;
        items.push_back(std::move(*cls));
      } else if (c == '.') {
        ++i_;
        items.push_back(Expr::chars_of({}, true));
      } else if (c == '(') {
        if (++depth_ > kMaxNesting) return fail("groups nested more than " + std::to_string(kMaxNesting) + " deep");
        ++i_;
        skip_space(true);
        auto inner = alternates(true);
        if (!inner) return inner;
        if (!peek(')')) return fail("expected ')'");
        ++i_;
        --depth_;
        items.push_back(std::move(*inner));
      } else if (is_name_char(c)) {
        const size_t at = i_;
        const int32_t r = rule_index(name());
        if (rules_[size_t(r)].first_use == std::string_view::npos) rules_[size_t(r)].first_use = at;
        items.push_back(Expr::reference(r));
      } else if (c == '*' || c == '+' || c == '?' || c == '{') {
        if (items.empty()) return fail(std::string("expected something to repeat before '") + c + "'");
        int32_t min = 0, max = -1;
        if (c == '{') {
          auto s = counts(min, max);
          if (!s) return s.error();
        } else {
          ++i_;
          if (c == '+') min = 1;
          if (c == '?') max = 1;
        }
        items.back() = Expr::repeated(std::move(items.back()), min, max);
      } else if (c == '<' || (c == '!' && i_ + 1 < t_.size() && t_[i_ + 1] == '<')) {
        const bool negated = c == '!';
        i_ += negated ? 1 : 0;
        auto token = token_reference();
        if (!token) return token.error();
        items.push_back(Expr::token_of(*token, negated));
      } else {
        break;
      }
      skip_space(nested);
    }
    return Expr::sequence(std::move(items));
  }

  // <[id]>: the token of that id; <text>: the token whose text that is.
  Expected<int32_t> token_reference() {
    const size_t at = i_;
    if (i_ + 1 >= t_.size() || t_[i_ + 1] != '[') {
      const size_t close = t_.find('>', i_ + 1);
      const size_t newline = t_.find('\n', i_ + 1);
      if (close == std::string_view::npos || close == i_ + 1 || newline < close) return fail("expected <text> or <[id]>");
      const std::string_view text = t_.substr(i_, close + 1 - i_);
      const int32_t id = tokens_ ? tokens_(text) : -1;
      if (id < 0) {
        return fail(tokens_ ? "'" + std::string(text) + "' is not one token of the vocabulary"
                            : "'" + std::string(text) + "': token references by text need the vocabulary; write <[id]>");
      }
      i_ = close + 1;
      return id;
    }
    i_ += 2;
    int64_t id = 0;
    const size_t digits = i_;
    while (i_ < t_.size() && t_[i_] >= '0' && t_[i_] <= '9' && i_ - digits < 10) id = id * 10 + (t_[i_++] - '0');
    if (i_ == digits || id > INT32_MAX || i_ + 1 >= t_.size() || t_[i_] != ']' || t_[i_ + 1] != '>')
      return fail_at(at, "expected a token id, <[id]>");
    i_ += 2;
    return int32_t(id);
  }

  Expected<bool> counts(int32_t& min, int32_t& max) {
    const size_t at = i_;
    ++i_;  // '{'
    skip_space(true);
    const auto number = [&](int32_t& v) {
      const size_t start = i_;
      int64_t n = 0;
      while (i_ < t_.size() && t_[i_] >= '0' && t_[i_] <= '9') {
        n = std::min<int64_t>(n * 10 + (t_[i_] - '0'), int64_t(kMaxRepeatCount) + 1);
        ++i_;
      }
      v = int32_t(n);
      return i_ > start;
    };
    const bool has_min = number(min);
    skip_space(true);
    if (peek('}')) {
      if (!has_min) return fail("expected a count in {...}");
      max = min;
    } else {
      if (!peek(',')) return fail("expected ',' or '}' in {...}");
      ++i_;
      skip_space(true);
      if (!number(max)) max = -1;
      if (!has_min) min = 0;
      skip_space(true);
      if (!peek('}')) return fail("expected '}'");
    }
    ++i_;
    if (min > kMaxRepeatCount || max > kMaxRepeatCount) {
      return fail_at(at, "repetition count above " + std::to_string(kMaxRepeatCount));
    }
    if (max >= 0 && max < min) return fail_at(at, "repetition {m,n} with n < m");
    return true;
  }

  // One character of a literal or class: UTF-8, or an escape.
  Expected<uint32_t> character() {
    if (i_ >= t_.size()) return fail("unexpected end of the grammar");
    if (t_[i_] != '\\') {
      size_t n = 0;
      const int32_t cp = decode_utf8(t_, i_, n);
      if (cp < 0) return fail("invalid UTF-8");
      i_ += n;
      return uint32_t(cp);
    }
    if (i_ + 1 >= t_.size()) return fail("unexpected end of the grammar after '\\'");
    const char e = t_[i_ + 1];
    i_ += 2;
    size_t digits = 0;
    switch (e) {
      case 'n': return '\n';
      case 'r': return '\r';
      case 't': return '\t';
      case '\\': case '"': case '[': case ']': case '-': case '/': case '\'': return uint32_t(e);
      case 'x': digits = 2; break;
      case 'u': digits = 4; break;
      case 'U': digits = 8; break;
      default: i_ -= 2; return fail(std::string("unknown escape '\\") + e + "'");
    }
    uint32_t v = 0;
    for (size_t k = 0; k < digits; ++k) {
      const int d = i_ < t_.size() ? hex_digit_value(t_[i_]) : -1;
      if (d < 0) return fail("expected a hex digit");
      v = v * 16 + uint32_t(d);
      ++i_;
    }
    if (v > 0x10FFFF || (v >= 0xD800 && v <= 0xDFFF)) return fail("escape is not a character");
    return v;
  }

  Expected<Expr> literal() {
    ++i_;  // '"'
    std::vector<Expr> chars;
    while (!peek('"')) {
      if (i_ >= t_.size() || peek('\n')) return fail("unterminated string literal");
      auto cp = character();
      if (!cp) return cp.error();
      chars.push_back(Expr::codepoint(*cp));
    }
    ++i_;
    return Expr::sequence(std::move(chars));
  }

  Expected<Expr> char_class() {
    ++i_;  // '['
    bool negated = false;
    if (peek('^')) { ++i_; negated = true; }
    std::vector<CodepointRange> ranges;
    while (!peek(']')) {
      if (i_ >= t_.size()) return fail("unterminated character class");
      auto lo = character();
      if (!lo) return lo.error();
      uint32_t hi = *lo;
      if (peek('-') && i_ + 1 < t_.size() && t_[i_ + 1] != ']') {
        ++i_;
        auto h = character();
        if (!h) return h.error();
        if (*h < *lo) return fail("range out of order in character class");
        hi = *h;
      }
      ranges.emplace_back(*lo, hi);
    }
    ++i_;
    return Expr::chars_of(std::move(ranges), negated);
  }

  std::string_view t_;
  const TokenLookup& tokens_;
  size_t i_ = 0;
  int depth_ = 0;  // groups open
  std::vector<RuleInfo> rules_;
  std::map<std::string, int32_t> index_;
};

// The rules each rule can reach before reading a byte, for left recursion.
void leftmost(const ExprLowering& lowering, const Expr& e, std::vector<int32_t>& out) {
  switch (e.kind) {
    case Expr::Kind::rule: out.push_back(e.rule); return;
    case Expr::Kind::seq:
      for (const Expr& x : e.items) {
        leftmost(lowering, x, out);
        if (!lowering.nullable(x)) return;
      }
      return;
    case Expr::Kind::alt:
      for (const Expr& x : e.items) leftmost(lowering, x, out);
      return;
    case Expr::Kind::repeat:
      if (e.max != 0) leftmost(lowering, e.items[0], out);
      return;
    case Expr::Kind::empty:
    case Expr::Kind::chars:
    case Expr::Kind::token: return;
  }
}

}  // namespace

Expected<Grammar> grammar_from_gbnf(std::string_view text, const TokenLookup& tokens) {
  GbnfParser parser(text, tokens);
  auto parsed = parser.parse();
  if (!parsed) return parsed.error();
  std::vector<RuleInfo>& rules = *parsed;
  GrammarBuilder b;
  for (const RuleInfo& r : rules) b.add_rule(r.name);  // indices as the parser numbered them

  // Which rules match "" (a fixpoint), and each rule's non-empty variant,
  // made on demand for repetitions of nullable rules.
  std::vector<bool> nullable(rules.size(), false);
  std::map<int32_t, int32_t> nonempty_rules;
  ExprLowering* lowering_ptr = nullptr;
  Status nonempty_status;
  ExprLowering lowering(
      b, TextForm::raw,
      ExprLowering::Rules{
          [&](int32_t r) { return size_t(r) < nullable.size() && nullable[size_t(r)]; },
          [&](int32_t r) {
            if (const auto it = nonempty_rules.find(r); it != nonempty_rules.end()) return it->second;
            const int32_t ne = b.add_rule(rules[size_t(r)].name + "-nonempty");
            nonempty_rules.emplace(r, ne);
            auto body = lowering_ptr->lower_nonempty(rules[size_t(r)].body);
            if (body) b.add_alternative(ne, std::move(*body));
            else if (nonempty_status) nonempty_status = body.error();
            return ne;
          }});
  lowering_ptr = &lowering;
  for (bool changed = true; changed;) {
    changed = false;
    for (size_t r = 0; r < rules.size(); ++r) {
      if (!nullable[r] && lowering.nullable(rules[r].body)) nullable[r] = changed = true;
    }
  }

  // Left recursion, reported with the cycle and where it starts.
  std::vector<std::vector<int32_t>> left(rules.size());
  for (size_t r = 0; r < rules.size(); ++r) leftmost(lowering, rules[r].body, left[r]);
  std::vector<uint8_t> mark(rules.size(), 0);  // 0 unvisited, 1 on the path, 2 done
  std::vector<int32_t> path;
  std::function<int32_t(int32_t)> visit = [&](int32_t r) -> int32_t {
    mark[size_t(r)] = 1;
    path.push_back(r);
    for (int32_t next : left[size_t(r)]) {
      if (mark[size_t(next)] == 1) return next;
      if (mark[size_t(next)] == 0) {
        if (const int32_t found = visit(next); found >= 0) return found;
      }
    }
    path.pop_back();
    mark[size_t(r)] = 2;
    return -1;
  };
  for (size_t r = 0; r < rules.size(); ++r) {
    if (mark[r] != 0) continue;
    const int32_t start = visit(int32_t(r));
    if (start < 0) continue;
    std::string cycle;
    bool on = false;
    for (int32_t p : path) {
      on = on || p == start;
      if (on) cycle += rules[size_t(p)].name + " -> ";
    }
    cycle += rules[size_t(start)].name;
    return parser.fail_at(rules[size_t(start)].defined_at, "rule '" + rules[size_t(start)].name +
                                                                "' is left-recursive: " + cycle);
  }

  for (size_t r = 0; r < rules.size(); ++r) {
    auto body = lowering.lower(rules[r].body);
    if (!body) return parser.fail_at(rules[r].defined_at, body.error().message);
    b.add_alternative(int32_t(r), std::move(*body));
  }
  if (!nonempty_status) return make_error(Errc::invalid_argument, "gbnf: " + nonempty_status.error().message);
  auto g = std::move(b).build(int32_t(std::find_if(rules.begin(), rules.end(), [](const RuleInfo& r) {
                                        return r.name == "root";
                                      }) - rules.begin()));
  if (!g) return make_error(Errc::invalid_argument, "gbnf: " + g.error().message);
  if (!matches_some_text(*g)) return make_error(Errc::invalid_argument, "gbnf: rule 'root' matches no finite text");
  return g;
}

}  // namespace conveyor::grammar
