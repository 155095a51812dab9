#include "grammar/regex.hpp"

#include <cctype>
#include <string>

namespace conveyor::grammar {
namespace {

constexpr uint32_t kMaxCodepoint = 0x10FFFF;

const std::vector<CodepointRange> kDigit{{'0', '9'}};
const std::vector<CodepointRange> kWord{{'0', '9'}, {'A', 'Z'}, {'_', '_'}, {'a', 'z'}};
// ECMAScript's WhiteSpace and LineTerminator.
const std::vector<CodepointRange> kSpace{{'\t', '\r'}, {' ', ' '},       {0xA0, 0xA0},     {0x1680, 0x1680},
                                         {0x2000, 0x200A}, {0x2028, 0x2029}, {0x202F, 0x202F}, {0x205F, 0x205F},
                                         {0x3000, 0x3000}, {0xFEFF, 0xFEFF}};
const std::vector<CodepointRange> kLineTerminators{{'\n', '\n'}, {'\r', '\r'}, {0x2028, 0x2029}};

std::vector<CodepointRange> complement(const std::vector<CodepointRange>& set) {
  return normalize_codepoints(set, true);
}

class RegexParser {
 public:
  explicit RegexParser(std::string_view p) : p_(p) {}

  // The top-level alternatives, each with its anchors.
  struct Branch {
    Expr expr;
    bool starts_anchored = false, ends_anchored = false;
  };
  Expected<std::vector<Branch>> parse() {
    std::vector<Branch> branches;
    for (;;) {
      Branch br;
      if (peek('^')) { ++i_; br.starts_anchored = true; }
      auto seq = sequence(/*top=*/true);
      if (!seq) return seq.error();
      br.expr = std::move(*seq);
      if (peek('$')) { ++i_; br.ends_anchored = true; }
      branches.push_back(std::move(br));
      if (i_ == p_.size()) return branches;
      if (peek(')')) return fail("unmatched ')'");
      ++i_;  // '|': sequence() stops only there, at ')' or at the end
    }
  }

 private:
  bool peek(char c) const { return i_ < p_.size() && p_[i_] == c; }

  Error fail(std::string what) const {
    return make_error(Errc::invalid_argument, "regex: " + what + " at offset " + std::to_string(i_));
  }

  // The code point at i_; invalid UTF-8 is refused.
  Expected<uint32_t> next_codepoint() {
    size_t n = 0;
    const int32_t cp = decode_utf8(p_, i_, n);
    if (cp < 0) return fail("invalid UTF-8");
    i_ += n;
    return uint32_t(cp);
  }

  // Alternatives up to ')' or the end.
  Expected<Expr> alternation() {
    std::vector<Expr> alts;
    for (;;) {
      auto seq = sequence(/*top=*/false);
      if (!seq) return seq;
      alts.push_back(std::move(*seq));
      if (!peek('|')) return Expr::alternatives(std::move(alts));
      ++i_;
    }
  }

  // Terms up to '|', ')' or the end; at the top level also up to a '$'
  // that ends the alternative (an anchor the caller takes).
  Expected<Expr> sequence(bool top) {
    std::vector<Expr> items;
    while (i_ < p_.size() && !peek('|') && !peek(')')) {
      if (peek('$')) {
        if (top && (i_ + 1 == p_.size() || p_[i_ + 1] == '|')) break;
        return fail("anchor '$' inside the pattern is not supported");
      }
      if (peek('^')) return fail("anchor '^' inside the pattern is not supported");
      if (peek('*') || peek('+') || peek('?')) return fail("nothing to repeat");
      auto atom_expr = atom();
      if (!atom_expr) return atom_expr;
      auto quantified = quantifier(std::move(*atom_expr));
      if (!quantified) return quantified;
      items.push_back(std::move(*quantified));
    }
    return Expr::sequence(std::move(items));
  }

  // {n}, {n,}, {n,m} at i_, or nothing (then i_ is unchanged).
  bool braces(int32_t& min, int32_t& max, bool& too_big) {
    size_t j = i_ + 1;
    auto number = [&](int64_t& v) {
      const size_t start = j;
      v = 0;
      while (j < p_.size() && p_[j] >= '0' && p_[j] <= '9') {
        v = std::min<int64_t>(v * 10 + (p_[j] - '0'), int64_t(kMaxRepeatCount) + 1);
        ++j;
      }
      return j > start;
    };
    int64_t lo = 0, hi = -1;
    if (!number(lo)) return false;
    if (j < p_.size() && p_[j] == ',') {
      ++j;
      if (!number(hi)) hi = -1;
    } else {
      hi = lo;
    }
    if (j >= p_.size() || p_[j] != '}') return false;
    i_ = j + 1;
    too_big = lo > kMaxRepeatCount || hi > kMaxRepeatCount;
    min = int32_t(lo);
    max = int32_t(hi);
    return true;
  }

  Expected<Expr> quantifier(Expr atom) {
    int32_t min = 0, max = -1;
    if (peek('*')) {
      ++i_;
    } else if (peek('+')) {
      ++i_;
      min = 1;
    } else if (peek('?')) {
      ++i_;
      max = 1;
    } else if (peek('{')) {
      bool too_big = false;
      const size_t at = i_;
      if (!braces(min, max, too_big)) return atom;  // a literal '{', Annex B
      if (too_big) { i_ = at; return fail("repetition count above " + std::to_string(kMaxRepeatCount)); }
      if (max >= 0 && max < min) { i_ = at; return fail("repetition {n,m} with m < n"); }
    } else {
      return atom;
    }
    if (peek('?')) ++i_;  // lazy: the same language
    if (peek('*') || peek('+') || peek('?') || peek('{')) {
      int32_t a = 0, b = 0;
      bool big = false;
      const size_t at = i_;
      if (!peek('{') || braces(a, b, big)) { i_ = at; return fail("nothing to repeat"); }
    }
    return Expr::repeated(std::move(atom), min, max);
  }

  Expected<Expr> atom() {
    const char c = p_[i_];
    if (c == '.') {
      ++i_;
      return Expr::chars_of(kLineTerminators, true);
    }
    if (c == '(') return group();
    if (c == '[') return char_class();
    if (c == '\\') {
      std::vector<CodepointRange> set;
      auto single = escape(/*in_class=*/false, set);
      if (!single) return single.error();
      if (*single >= 0) return Expr::codepoint(uint32_t(*single));
      return Expr::chars_of(std::move(set));
    }
    auto cp = next_codepoint();
    if (!cp) return cp.error();
    return Expr::codepoint(*cp);
  }

  Expected<Expr> group() {
    if (++depth_ > kMaxNesting) return fail("groups nested more than " + std::to_string(kMaxNesting) + " deep");
    ++i_;  // '('
    if (peek('?')) {
      const std::string_view rest = p_.substr(i_);
      if (rest.starts_with("?:")) {
        i_ += 2;
      } else if (rest.starts_with("?=") || rest.starts_with("?!") || rest.starts_with("?<=") ||
                 rest.starts_with("?<!")) {
        return fail("lookaround assertions are not supported");
      } else if (rest.starts_with("?<") || rest.starts_with("?P<")) {
        const size_t close = p_.find('>', i_);
        if (close == std::string_view::npos) return fail("unterminated group name");
        i_ = close + 1;
      } else {
        return fail("inline flags and other (? groups are not supported");
      }
    }
    auto inner = alternation();
    if (!inner) return inner;
    if (!peek(')')) return fail("missing ')'");
    ++i_;
    --depth_;
    return inner;
  }

  Expected<Expr> char_class() {
    ++i_;  // '['
    bool negated = false;
    if (peek('^')) { ++i_; negated = true; }
    std::vector<CodepointRange> set;
    while (!peek(']')) {
      if (i_ >= p_.size()) return fail("missing ']'");
      std::vector<CodepointRange> escaped_set;
      auto lo = class_atom(escaped_set);
      if (!lo) return lo.error();
      if (*lo < 0) {  // \d and friends: no range from them
        set.insert(set.end(), escaped_set.begin(), escaped_set.end());
        continue;
      }
      if (peek('-') && i_ + 1 < p_.size() && p_[i_ + 1] != ']') {
        ++i_;
        std::vector<CodepointRange> hi_set;
        auto hi = class_atom(hi_set);
        if (!hi) return hi.error();
        if (*hi < 0) return fail("a class escape cannot end a range");
        if (*hi < *lo) return fail("range out of order in character class");
        set.emplace_back(uint32_t(*lo), uint32_t(*hi));
      } else {
        set.emplace_back(uint32_t(*lo), uint32_t(*lo));
      }
    }
    ++i_;
    return Expr::chars_of(std::move(set), negated);
  }

  // One class member: a code point, or -1 with `set` filled for \d etc.
  Expected<int64_t> class_atom(std::vector<CodepointRange>& set) {
    if (peek('\\')) return escape(/*in_class=*/true, set);
    auto cp = next_codepoint();
    if (!cp) return cp.error();
    return int64_t(*cp);
  }

  Expected<int64_t> hex_digits(size_t count) {
    if (i_ + count > p_.size()) return fail("incomplete hex escape");
    int64_t v = 0;
    for (size_t k = 0; k < count; ++k) {
      const int d = hex_digit_value(p_[i_ + k]);
      if (d < 0) return fail("incomplete hex escape");
      v = v * 16 + d;
    }
    i_ += count;
    return v;
  }

  // After '\': a code point, or -1 with `set` filled for a class escape.
  Expected<int64_t> escape(bool in_class, std::vector<CodepointRange>& set) {
    ++i_;
    if (i_ >= p_.size()) return fail("pattern ends with '\\'");
    const char c = p_[i_];
    const size_t at = i_;
    ++i_;
    switch (c) {
      case 'd': set = kDigit; return -1;
      case 'D': set = complement(kDigit); return -1;
      case 'w': set = kWord; return -1;
      case 'W': set = complement(kWord); return -1;
      case 's': set = kSpace; return -1;
      case 'S': set = complement(kSpace); return -1;
      case 't': return '\t';
      case 'n': return '\n';
      case 'r': return '\r';
      case 'v': return '\v';
      case 'f': return '\f';
      case 'b':
        if (in_class) return '\b';
        i_ = at;
        return fail("word boundary \\b is not supported");
      case 'B': i_ = at; return fail("word boundary \\B is not supported");
      case '0':
        if (i_ < p_.size() && p_[i_] >= '0' && p_[i_] <= '9') {
          i_ = at;
          return fail("octal escapes are not supported");
        }
        return 0;
      case 'c':
        if (i_ < p_.size() && std::isalpha(uint8_t(p_[i_]))) return p_[i_++] % 32;
        i_ = at;
        return fail("\\c must be followed by a letter");
      case 'x': return hex_digits(2);
      case 'u': return unicode_escape();
      case 'k': i_ = at; return fail("backreferences are not supported");
      case 'p':
      case 'P': i_ = at; return fail("Unicode property escapes are not supported");
      default: break;
    }
    if (c >= '1' && c <= '9') { i_ = at; return fail("backreferences are not supported"); }
    if (std::isalnum(uint8_t(c))) { i_ = at; return fail(std::string("unknown escape \\") + c); }
    --i_;
    auto cp = next_codepoint();  // identity escape: \. \/ \- ...
    if (!cp) return cp.error();
    return int64_t(*cp);
  }

  Expected<int64_t> unicode_escape() {
    if (peek('{')) {
      const size_t close = p_.find('}', i_);
      if (close == std::string_view::npos || close == i_ + 1 || close > i_ + 7) return fail("bad \\u{...} escape");
      ++i_;
      auto v = hex_digits(close - i_);
      if (!v) return v;
      ++i_;
      if (*v > kMaxCodepoint || (*v >= 0xD800 && *v <= 0xDFFF)) return fail("\\u{...} is not a character");
      return v;
    }
    auto v = hex_digits(4);
    if (!v) return v;
    if (*v >= 0xD800 && *v <= 0xDBFF && p_.substr(i_).starts_with("\\u")) {
      const size_t at = i_;
      i_ += 2;
      auto low = hex_digits(4);
      if (low && *low >= 0xDC00 && *low <= 0xDFFF) return 0x10000 + ((*v - 0xD800) << 10) + (*low - 0xDC00);
      i_ = at;
    }
    if (*v >= 0xD800 && *v <= 0xDFFF) return fail("a lone surrogate \\u escape is not a character");
    return v;
  }

  std::string_view p_;
  size_t i_ = 0;
  int depth_ = 0;  // groups open
};

}  // namespace

Expected<Expr> regex_expr(std::string_view pattern, RegexOptions::Anchoring anchoring) {
  auto branches = RegexParser(pattern).parse();
  if (!branches) return branches.error();
  const bool search = anchoring == RegexOptions::Anchoring::search;
  // In search mode the text around a match is anything, line breaks included.
  const Expr any_text = Expr::repeated(Expr::chars_of({}, true), 0, -1);
  std::vector<Expr> alts;
  for (auto& br : *branches) {
    std::vector<Expr> seq;
    if (search && !br.starts_anchored) seq.push_back(any_text);
    seq.push_back(std::move(br.expr));
    if (search && !br.ends_anchored) seq.push_back(any_text);
    alts.push_back(Expr::sequence(std::move(seq)));
  }
  return Expr::alternatives(std::move(alts));
}

Expected<Element> add_regex(GrammarBuilder& b, std::string_view pattern, const RegexOptions& options) {
  auto expr = regex_expr(pattern, options.anchoring);
  if (!expr) return expr.error();
  ExprLowering lowering(b, options.form);
  auto element = lowering.lower_element(*expr, "regex");
  if (!element) return make_error(Errc::invalid_argument, "regex: " + element.error().message);
  return element;
}

Expected<Grammar> grammar_from_regex(std::string_view pattern) {
  GrammarBuilder b;
  const int32_t root = b.add_rule("root");
  auto element = add_regex(b, pattern);
  if (!element) return element.error();
  b.add_alternative(root, {*element});
  return std::move(b).build(root);
}

}  // namespace conveyor::grammar
