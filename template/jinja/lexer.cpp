#include "template/jinja/lexer.hpp"

#include <cerrno>
#include <cstdlib>
#include <limits>
#include <optional>

#include "template/jinja/pystr.hpp"

namespace conveyor::jinja {
namespace {

std::string normalize_newlines(std::string_view source) {
  std::string out;
  out.reserve(source.size());
  for (size_t i = 0; i < source.size(); ++i) {
    if (source[i] == '\r') {
      out += '\n';
      if (i + 1 < source.size() && source[i + 1] == '\n') ++i;
    } else {
      out += source[i];
    }
  }
  if (!out.empty() && out.back() == '\n') out.pop_back();  // keep_trailing_newline=False
  return out;
}

bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_start(char c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_'; }
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }

// Operators, longest first (jinja2.lexer.operator_re).
constexpr std::string_view kOperators[] = {"//", "**", "==", "!=", ">=", "<=", "+", "-", "/", "*", "%",
                                           "~",  "[",  "]",  "(",  ")",  "{",  "}", ">", "<", "=", ".",
                                           ":",  "|",  ",",  ";"};

class Lexer {
 public:
  explicit Lexer(std::string_view source) : src_(normalize_newlines(source)) {}

  std::vector<Token> run() {
    while (pos_ < src_.size()) {
      const size_t tag = find_tag_start(pos_);
      if (tag == std::string::npos) {
        emit_text(src_.substr(pos_), pos_);
        pos_ = src_.size();
        break;
      }
      lex_tag(tag);
    }
    push(TokenKind::eof, "", src_.size());
    return std::move(tokens_);
  }

 private:
  int line_at(size_t offset) {
    // Lines are counted incrementally: offsets only move forward.
    for (; line_pos_ < offset && line_pos_ < src_.size(); ++line_pos_) {
      if (src_[line_pos_] == '\n') ++line_;
    }
    return line_;
  }

  [[noreturn]] void error(size_t offset, std::string message) {
    throw SyntaxError{line_at(offset), std::move(message)};
  }

  Token& push(TokenKind kind, std::string value, size_t offset) {
    Token t;
    t.kind = kind;
    t.value = std::move(value);
    t.line = line_at(offset);
    tokens_.push_back(std::move(t));
    return tokens_.back();
  }

  void emit_text(std::string_view text, size_t offset) {
    if (!text.empty()) push(TokenKind::text, std::string(text), offset);
  }

  size_t find_tag_start(size_t from) const {
    for (size_t i = src_.find('{', from); i != std::string::npos; i = src_.find('{', i + 1)) {
      if (i + 1 < src_.size() && (src_[i + 1] == '{' || src_[i + 1] == '%' || src_[i + 1] == '#')) return i;
    }
    return std::string::npos;
  }

  // The text before a tag, less what `-` or lstrip_blocks removes.
  std::string_view strip_before(std::string_view text, char sign, bool is_variable) const {
    if (sign == '-') {
      size_t end = text.size();
      while (size_t n = pystr::space_before(text, end)) end -= n;
      return text.substr(0, end);
    }
    if (sign == '+' || is_variable) return text;
    const size_t line_start = text.rfind('\n') == std::string_view::npos ? 0 : text.rfind('\n') + 1;
    if (line_start == 0 && !line_starting_) return text;
    const std::string_view rest = text.substr(line_start);
    if (rest.empty()) return text;
    for (size_t i = 0; i < rest.size();) {
      const size_t n = pystr::space_at(rest, i);
      if (n == 0) return text;
      i += n;
    }
    return text.substr(0, line_start);
  }

  // Skips whitespace after `-%}` etc.; returns the new position.
  size_t skip_space(size_t at) const {
    while (size_t n = pystr::space_at(src_, at)) at += n;
    return at;
  }

  void lex_tag(size_t tag) {
    const char type = src_[tag + 1];
    size_t body = tag + 2;
    const char sign = body < src_.size() && (src_[body] == '-' || src_[body] == '+') ? src_[body] : 0;
    if (sign) ++body;
    const std::string_view text = std::string_view(src_).substr(pos_, tag - pos_);

    if (type == '%' && lex_raw(tag, body, sign, text)) return;
    emit_text(strip_before(text, sign, type == '{'), pos_);
    if (type == '#') {
      lex_comment(body);
    } else {
      push(type == '{' ? TokenKind::variable_begin : TokenKind::block_begin, "", tag);
      lex_expression(body, type == '{');
    }
  }

  void lex_comment(size_t body) {
    for (size_t i = body; i + 1 < src_.size(); ++i) {
      if (src_[i] == '+' && src_.compare(i + 1, 2, "#}") == 0) return finish_tag(i + 3);
      if (src_[i] == '-' && src_.compare(i + 1, 2, "#}") == 0) return finish_tag(skip_space(i + 3));
      if (src_.compare(i, 2, "#}") == 0) return finish_tag(trim_newline(i + 2));
    }
    error(body, "Missing end of comment tag");
  }

  size_t trim_newline(size_t at) const { return at < src_.size() && src_[at] == '\n' ? at + 1 : at; }

  void finish_tag(size_t end) {
    line_starting_ = end > 0 && src_[end - 1] == '\n';
    pos_ = end;
  }

  // `{% raw %}`: everything up to `{% endraw %}` is text.
  bool lex_raw(size_t tag, size_t body, char sign, std::string_view text) {
    const auto tag_end = match_words(body, "raw", /*trim=*/false);
    if (!tag_end) return false;
    emit_text(strip_before(text, sign, false), pos_);
    finish_tag(*tag_end);
    for (size_t i = src_.find("{%", pos_); i != std::string::npos; i = src_.find("{%", i + 1)) {
      size_t at = i + 2;
      const char end_sign = at < src_.size() && (src_[at] == '-' || src_[at] == '+') ? src_[at] : 0;
      if (end_sign) ++at;
      if (const auto end = match_words(at, "endraw", /*trim=*/true)) {
        emit_text(strip_before(std::string_view(src_).substr(pos_, i - pos_), end_sign, false), pos_);
        finish_tag(*end);
        return true;
      }
    }
    error(tag, "Missing end of raw directive");
  }

  // `\s*word\s*` then a block end; the position after it. The end of
  // `{% raw %}` itself neither trims a newline nor takes `+`.
  std::optional<size_t> match_words(size_t at, std::string_view word, bool trim) const {
    at = skip_space(at);
    if (src_.compare(at, word.size(), word) != 0) return std::nullopt;
    at += word.size();
    if (at < src_.size() && is_name_char(src_[at])) return std::nullopt;
    at = skip_space(at);
    if (trim) return block_end_at(at);
    if (src_.compare(at, 3, "-%}") == 0) return skip_space(at + 3);
    if (src_.compare(at, 2, "%}") == 0) return at + 2;
    return std::nullopt;
  }

  // A block end at `at`: `+%}`, `-%}` plus whitespace, `%}` plus one newline.
  std::optional<size_t> block_end_at(size_t at) const {
    if (src_.compare(at, 3, "+%}") == 0) return at + 3;
    if (src_.compare(at, 3, "-%}") == 0) return skip_space(at + 3);
    if (src_.compare(at, 2, "%}") == 0) return trim_newline(at + 2);
    return std::nullopt;
  }

  std::optional<size_t> variable_end_at(size_t at) const {
    if (src_.compare(at, 3, "-}}") == 0) return skip_space(at + 3);
    if (src_.compare(at, 2, "}}") == 0) return at + 2;
    return std::nullopt;
  }

  void lex_expression(size_t at, bool is_variable) {
    std::vector<char> balance;  // closing brackets expected
    while (at < src_.size()) {
      if (balance.empty()) {
        const auto end = is_variable ? variable_end_at(at) : block_end_at(at);
        if (end) {
          push(is_variable ? TokenKind::variable_end : TokenKind::block_end, "", at);
          finish_tag(*end);
          return;
        }
      }
      if (size_t n = pystr::space_at(src_, at)) {
        at += n;
      } else if (is_digit(src_[at])) {
        at = lex_number(at);
      } else if (is_name_start(src_[at])) {
        size_t end = at;
        while (end < src_.size() && is_name_char(src_[end])) ++end;
        push(TokenKind::name, src_.substr(at, end - at), at);
        at = end;
      } else if (src_[at] == '\'' || src_[at] == '"') {
        at = lex_string(at);
      } else {
        at = lex_operator(at, balance);
      }
    }
    pos_ = at;  // the template ended inside the tag: the parser reports it
  }

  size_t lex_operator(size_t at, std::vector<char>& balance) {
    for (std::string_view op : kOperators) {
      if (src_.compare(at, op.size(), op) != 0) continue;
      const char c = op[0];
      if (op.size() == 1 && (c == '(' || c == '[' || c == '{')) {
        balance.push_back(c == '(' ? ')' : c == '[' ? ']' : '}');
      } else if (op.size() == 1 && (c == ')' || c == ']' || c == '}')) {
        if (balance.empty()) error(at, std::string("unexpected '") + c + "'");
        if (balance.back() != c) error(at, std::string("unexpected '") + c + "', expected '" + balance.back() + "'");
        balance.pop_back();
      }
      push(TokenKind::op, std::string(op), at);
      return at + op.size();
    }
    error(at, std::string("unexpected char '") + src_[at] + "'");
  }

  // Digits with single underscores between them, from `at`; the end.
  size_t digits_end(size_t at, bool (*digit)(char)) const {
    if (at >= src_.size() || !digit(src_[at])) return at;
    size_t end = at + 1;
    while (end < src_.size()) {
      if (digit(src_[end])) ++end;
      else if (src_[end] == '_' && end + 1 < src_.size() && digit(src_[end + 1])) end += 2;
      else break;
    }
    return end;
  }

  static std::string without_underscores(std::string_view s) {
    std::string out;
    for (char c : s) {
      if (c != '_') out += c;
    }
    return out;
  }

  size_t lex_number(size_t at) {
    // A float: digits, then a fraction, an exponent or both.
    size_t end = digits_end(at, is_digit);
    bool is_float = false;
    const bool after_dot = at > 0 && src_[at - 1] == '.';  // foo.1.2 is foo[1][2]
    if (!after_dot && end + 1 < src_.size() && src_[end] == '.' && is_digit(src_[end + 1])) {
      end = digits_end(end + 1, is_digit);
      is_float = true;
    }
    if (!after_dot && end < src_.size() && (src_[end] == 'e' || src_[end] == 'E')) {
      size_t e = end + 1;
      if (e < src_.size() && (src_[e] == '+' || src_[e] == '-')) ++e;
      if (e < src_.size() && is_digit(src_[e])) {
        end = digits_end(e, is_digit);
        is_float = true;
      }
    }
    if (is_float) {
      Token& t = push(TokenKind::floating, "", at);
      t.float_value = std::strtod(without_underscores(src_.substr(at, end - at)).c_str(), nullptr);
      return end;
    }
    // An integer: 0b / 0o / 0x prefixes, a decimal without leading zeros, or zeros.
    int base = 10;
    size_t digits = at;
    if (src_[at] == '0' && at + 1 < src_.size()) {
      const char p = static_cast<char>(src_[at + 1] | 0x20);
      if (p == 'b' || p == 'o' || p == 'x') base = p == 'b' ? 2 : p == 'o' ? 8 : 16;
    }
    if (base != 10) {
      // 0x(_?[0-9a-f])+
      digits = at + 2;
      end = digits;
      auto ok = [base](char c) {
        const int v = is_digit(c) ? c - '0' : (c | 0x20) >= 'a' && (c | 0x20) <= 'f' ? (c | 0x20) - 'a' + 10 : 99;
        return v < base;
      };
      while (end < src_.size()) {
        if (ok(src_[end])) ++end;
        else if (src_[end] == '_' && end + 1 < src_.size() && ok(src_[end + 1])) end += 2;
        else break;
      }
      if (end == digits) base = 10;  // "0x" alone: the integer 0, then a name
    }
    if (base == 10) {
      if (src_[at] == '0') {  // 0(_?0)*
        end = at + 1;
        while (end < src_.size()) {
          if (src_[end] == '0') ++end;
          else if (src_[end] == '_' && end + 1 < src_.size() && src_[end + 1] == '0') end += 2;
          else break;
        }
      } else {
        end = digits_end(at, is_digit);
      }
      digits = at;
    }
    const std::string clean = without_underscores(src_.substr(digits, end - digits));
    errno = 0;
    const unsigned long long v = std::strtoull(clean.c_str(), nullptr, base);
    if (errno == ERANGE || v > static_cast<unsigned long long>(std::numeric_limits<int64_t>::max())) {
      error(at, "integer literal too large");
    }
    Token& t = push(TokenKind::integer, "", at);
    t.int_value = static_cast<int64_t>(v);
    return end;
  }

  size_t lex_string(size_t at) {
    const char quote = src_[at];
    std::string value;
    size_t i = at + 1;
    while (i < src_.size() && src_[i] != quote) {
      if (src_[i] != '\\') {
        value += src_[i++];
        continue;
      }
      if (i + 1 >= src_.size()) break;
      i = unescape(i, value);
    }
    if (i >= src_.size()) error(at, std::string("unexpected char '") + quote + "'");
    push(TokenKind::string, std::move(value), at);
    return i + 1;
  }

  // Python's "unicode-escape" decoding of the escape at src_[i] == '\\'.
  size_t unescape(size_t i, std::string& out) {
    const char c = src_[i + 1];
    switch (c) {
      case '\n': return i + 2;
      case '\\': out += '\\'; return i + 2;
      case '\'': out += '\''; return i + 2;
      case '"': out += '"'; return i + 2;
      case 'a': out += '\a'; return i + 2;
      case 'b': out += '\b'; return i + 2;
      case 'f': out += '\f'; return i + 2;
      case 'n': out += '\n'; return i + 2;
      case 'r': out += '\r'; return i + 2;
      case 't': out += '\t'; return i + 2;
      case 'v': out += '\v'; return i + 2;
      default: break;
    }
    if (c >= '0' && c <= '7') {
      size_t end = i + 1;
      unsigned v = 0;
      while (end < src_.size() && end < i + 4 && src_[end] >= '0' && src_[end] <= '7') v = v * 8 + (src_[end++] - '0');
      pystr::append_utf8(out, v);
      return end;
    }
    if (c == 'N') error(i, "\\N{...} escapes are not supported");
    const int width = c == 'x' ? 2 : c == 'u' ? 4 : c == 'U' ? 8 : 0;
    if (width == 0) {  // unknown escapes stay as they are
      out += '\\';
      return i + 1;
    }
    char32_t v = 0;
    for (int k = 0; k < width; ++k) {
      const size_t at = i + 2 + k;
      const char h = at < src_.size() ? static_cast<char>(src_[at] | 0x20) : 0;
      if (!(is_digit(h) || (h >= 'a' && h <= 'f'))) error(i, "truncated \\" + std::string(1, c) + " escape");
      v = v * 16 + (is_digit(h) ? h - '0' : h - 'a' + 10);
    }
    if (v > 0x10FFFF) error(i, "illegal Unicode character");
    pystr::append_utf8(out, v);
    return i + 2 + width;
  }

  std::string src_;
  size_t pos_ = 0;
  bool line_starting_ = true;
  size_t line_pos_ = 0;
  int line_ = 1;
  std::vector<Token> tokens_;
};

}  // namespace

std::vector<Token> tokenize(std::string_view source) { return Lexer(source).run(); }

}  // namespace conveyor::jinja
