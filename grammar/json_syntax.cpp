#include "grammar/json_syntax.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <map>
#include <memory>

#include "grammar/expr.hpp"

namespace conveyor::grammar {
namespace {

ByteSet byte_range(uint8_t lo, uint8_t hi) {
  ByteSet s;
  s.set_range(lo, hi);
  return s;
}

ByteSet bytes_of(std::string_view chars) {
  ByteSet s;
  for (char c : chars) s.set(uint8_t(c));
  return s;
}

// The JSON text of each character of `name` (as quoted() writes it).
std::vector<std::string> json_units(std::string_view name) {
  std::vector<std::string> units;
  const std::string q = JsonSyntax::quoted(name);
  const std::string_view body = std::string_view(q).substr(1, q.size() - 2);
  for (size_t i = 0; i < body.size();) {
    size_t n = 1;
    const auto c = uint8_t(body[i]);
    if (c == '\\') n = body[i + 1] == 'u' ? 6 : 2;
    else if (c >= 0xF0) n = 4;
    else if (c >= 0xE0) n = 3;
    else if (c >= 0xC0) n = 2;
    n = std::min(n, body.size() - i);
    units.emplace_back(body.substr(i, n));
    i += n;
  }
  return units;
}

}  // namespace

JsonSyntax::JsonSyntax(GrammarBuilder& b, bool strict) : b_(b), strict_(strict), digits_(b) {}

Element JsonSyntax::ws() {
  if (!ws_) {
    const Element indent = b_.repeat({b_.bytes(bytes_of(" \t"))}, 0, 20);
    ws_ = b_.choice({{}, {b_.byte(' ')}, {b_.byte('\n'), indent}}, "ws");
  }
  return *ws_;
}

Alternative JsonSyntax::open(char bracket) {
  if (strict_) return {b_.byte(uint8_t(bracket))};
  return {b_.byte(uint8_t(bracket)), ws()};
}

Alternative JsonSyntax::close(char bracket) {
  if (strict_) return {b_.byte(uint8_t(bracket))};
  return {ws(), b_.byte(uint8_t(bracket))};
}

Alternative JsonSyntax::colon() {
  if (strict_) return {b_.byte(':'), b_.optional({b_.byte(' ')})};
  return {ws(), b_.byte(':'), ws()};
}

Alternative JsonSyntax::comma() {
  if (strict_) return {b_.byte(','), b_.optional({b_.byte(' ')})};
  return {ws(), b_.byte(','), ws()};
}

Alternative JsonSyntax::empty(char open_bracket) {
  const char close_bracket = open_bracket == '{' ? '}' : ']';
  if (strict_) return {b_.byte(uint8_t(open_bracket)), b_.byte(uint8_t(close_bracket))};
  return {b_.byte(uint8_t(open_bracket)), ws(), b_.byte(uint8_t(close_bracket))};
}

Element JsonSyntax::hex() {
  if (!hex_) hex_ = b_.bytes(bytes_of("0123456789abcdefABCDEF"));
  return *hex_;
}

Element JsonSyntax::string_char() {
  if (string_char_) return *string_char_;
  const Element backslash = b_.byte('\\');
  const Element u = b_.byte('u');
  const Element h = hex();
  // \uXXXX: not a surrogate, or a high surrogate then a low one.
  const Alternative not_surrogate_a{backslash, u, b_.bytes(bytes_of("0123456789abcABCeEfF")), h, h, h};
  const Alternative not_surrogate_b{backslash, u, b_.bytes(bytes_of("dD")), b_.bytes(byte_range('0', '7')), h, h};
  const Alternative pair{backslash, u, b_.bytes(bytes_of("dD")), b_.bytes(bytes_of("89abAB")), h, h,
                         backslash, u, b_.bytes(bytes_of("dD")), b_.bytes(bytes_of("cdefCDEF")), h, h};
  string_char_ = b_.choice({{b_.codepoints({{0, 0x1F}, {'"', '"'}, {'\\', '\\'}}, true)},
                            {backslash, b_.bytes(bytes_of("\"\\/bfnrt"))},
                            not_surrogate_a, not_surrogate_b, pair},
                           "char");
  return *string_char_;
}

Element JsonSyntax::string() {
  if (!string_) {
    const Element quote = b_.byte('"');
    string_ = b_.choice({{quote, b_.star({string_char()}), quote}}, "string");
  }
  return *string_;
}

Element JsonSyntax::integer() {
  if (!integer_) {
    Alternative nonzero{b_.bytes(byte_range('1', '9'))};
    digits_.up_to(nonzero, kMaxIntegerDigits - 1);
    const Element magnitude = b_.choice({{b_.byte('0')}, std::move(nonzero)}, "uint");
    integer_ = b_.choice({{magnitude}, {b_.byte('-'), magnitude}}, "integer");
  }
  return *integer_;
}

Element JsonSyntax::number() {
  if (!number_) {
    Alternative fraction_digits{b_.byte('.'), digits_.digit()};
    digits_.up_to(fraction_digits, kMaxFractionDigits - 1);
    const Element fraction = b_.optional(fraction_digits);
    const Element sign = b_.optional({b_.bytes(bytes_of("+-"))});
    Alternative exponent_digits{b_.bytes(bytes_of("eE")), sign, digits_.digit()};
    digits_.up_to(exponent_digits, kMaxExponentDigits - 1);
    const Element exponent = b_.optional(exponent_digits);
    number_ = b_.choice({{integer(), fraction, exponent}}, "number");
  }
  return *number_;
}

Element JsonSyntax::boolean() {
  if (!boolean_) boolean_ = b_.choice({b_.literal("true"), b_.literal("false")}, "boolean");
  return *boolean_;
}

Element JsonSyntax::null() {
  if (!null_) null_ = b_.choice({b_.literal("null")}, "null");
  return *null_;
}

Element JsonSyntax::value() {
  if (value_) return *value_;
  const int32_t rule = b_.add_rule("value");
  value_ = b_.rule_ref(rule);
  // Members and items refer back to `value`: create it before them.
  const int32_t array_rule = b_.add_rule("array");
  Alternative items = open('[');
  items.push_back(*value_);
  Alternative more = comma();
  more.push_back(*value_);
  items.push_back(b_.star(more));
  const Alternative close_bracket = close(']');
  items.insert(items.end(), close_bracket.begin(), close_bracket.end());
  b_.add_alternative(array_rule, empty('['));
  b_.add_alternative(array_rule, std::move(items));
  for (const Element e : {object(), b_.rule_ref(array_rule), string(), number(), boolean(), null()}) {
    b_.add_alternative(rule, {e});
  }
  return *value_;
}

Element JsonSyntax::object() {
  if (object_) return *object_;
  const int32_t rule = b_.add_rule("object");
  object_ = b_.rule_ref(rule);
  Alternative member{string()};
  const Alternative sep = colon();
  member.insert(member.end(), sep.begin(), sep.end());
  member.push_back(value());
  Alternative members = open('{');
  members.insert(members.end(), member.begin(), member.end());
  Alternative more = comma();
  more.insert(more.end(), member.begin(), member.end());
  members.push_back(b_.star(more));
  const Alternative close_brace = close('}');
  members.insert(members.end(), close_brace.begin(), close_brace.end());
  b_.add_alternative(rule, empty('{'));
  b_.add_alternative(rule, std::move(members));
  return *object_;
}

std::string JsonSyntax::quoted(std::string_view name) {
  std::string out = "\"";
  for (char c : name) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\b': out += "\\b"; break;
      case '\f': out += "\\f"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (uint8_t(c) < 0x20) {
          static constexpr char kHex[] = "0123456789abcdef";
          out += "\\u00";
          out += kHex[uint8_t(c) >> 4];
          out += kHex[uint8_t(c) & 15];
        } else {
          out += c;
        }
    }
  }
  return out + "\"";
}

Alternative JsonSyntax::literal(const boost::json::value& v) {
  switch (v.kind()) {
    case boost::json::kind::null: return b_.literal("null");
    case boost::json::kind::bool_: return b_.literal(v.get_bool() ? "true" : "false");
    case boost::json::kind::int64:
    case boost::json::kind::uint64:
    case boost::json::kind::double_: return b_.literal(json_number_text(v));
    case boost::json::kind::string: return b_.literal(quoted(v.get_string()));
    case boost::json::kind::array: {
      const boost::json::array& a = v.get_array();
      if (a.empty()) return empty('[');
      Alternative out = open('[');
      for (size_t i = 0; i < a.size(); ++i) {
        if (i) { const Alternative c = comma(); out.insert(out.end(), c.begin(), c.end()); }
        const Alternative item = literal(a[i]);
        out.insert(out.end(), item.begin(), item.end());
      }
      const Alternative c = close(']');
      out.insert(out.end(), c.begin(), c.end());
      return out;
    }
    case boost::json::kind::object: {
      const boost::json::object& o = v.get_object();
      if (o.empty()) return empty('{');
      Alternative out = open('{');
      bool first = true;
      for (const auto& member : o) {
        if (!first) { const Alternative c = comma(); out.insert(out.end(), c.begin(), c.end()); }
        first = false;
        const Alternative key = b_.literal(quoted(member.key()));
        out.insert(out.end(), key.begin(), key.end());
        const Alternative c = colon();
        out.insert(out.end(), c.begin(), c.end());
        const Alternative item = literal(member.value());
        out.insert(out.end(), item.begin(), item.end());
      }
      const Alternative c = close('}');
      out.insert(out.end(), c.begin(), c.end());
      return out;
    }
  }
  return {};
}

Element JsonSyntax::key_not_in(const std::vector<std::string>& names) {
  // A trie of the names' characters as JSON writes them; a rule per node
  // says how a key that has matched this node's prefix may continue
  // without becoming one of the names.
  struct Node {
    std::map<std::string, std::unique_ptr<Node>> children;
    bool terminal = false;
  };
  Node root;
  for (const std::string& name : names) {
    Node* n = &root;
    for (const std::string& unit : json_units(name)) {
      auto& child = n->children[unit];
      if (!child) child = std::make_unique<Node>();
      n = child.get();
    }
    n->terminal = true;
  }
  const Element quote = b_.byte('"');
  const Alternative any_rest{b_.star({string_char()}), quote};
  const Element backslash = b_.byte('\\');
  const Element non_ascii = b_.codepoints({{0x80, 0x10FFFF}});
  auto node_rule = [&](auto&& self, const Node& n) -> Element {
    const int32_t rule = b_.add_rule("key");
    if (!n.terminal) b_.add_alternative(rule, {quote});
    std::vector<CodepointRange> taken_raw{{0, 0x1F}, {'"', '"'}, {'\\', '\\'}};
    std::string escapes = "\"\\/bfnrt";  // the letters after '\' (but u) not taken by a child
    for (const auto& [unit, child] : n.children) {
      Alternative alt = b_.literal(unit);
      alt.push_back(self(self, *child));
      b_.add_alternative(rule, std::move(alt));
      if (unit[0] != '\\') {
        size_t length = 0;
        const auto cp = uint32_t(decode_utf8(unit, 0, length));  // quoted() wrote valid UTF-8
        taken_raw.emplace_back(cp, cp);
      } else if (const size_t at = escapes.find(unit[1]); at != std::string::npos) {
        escapes.erase(at, 1);
      }
    }
    // A character no child starts. Names are mostly ASCII: then the
    // non-ASCII characters are one element shared by every node.
    const bool ascii_children = std::all_of(taken_raw.begin(), taken_raw.end(),
                                            [](const CodepointRange& r) { return r.second < 0x80; });
    std::vector<Element> others;
    if (ascii_children) {
      taken_raw.emplace_back(0x80, 0x10FFFF);
      others = {b_.codepoints(taken_raw, true), non_ascii};
    } else {
      others = {b_.codepoints(taken_raw, true)};
    }
    for (const Element first : others) {
      Alternative other{first};
      other.insert(other.end(), any_rest.begin(), any_rest.end());
      b_.add_alternative(rule, std::move(other));
    }
    // An escape no child starts; a \u escape always counts as different.
    if (!escapes.empty()) {
      Alternative escaped{backslash, b_.bytes(bytes_of(escapes))};
      escaped.insert(escaped.end(), any_rest.begin(), any_rest.end());
      b_.add_alternative(rule, std::move(escaped));
    }
    const Element h = hex();
    Alternative unicode{backslash, b_.byte('u'), h, h, h, h};
    unicode.insert(unicode.end(), any_rest.begin(), any_rest.end());
    b_.add_alternative(rule, std::move(unicode));
    return b_.rule_ref(rule);
  };
  return b_.choice({{quote, node_rule(node_rule, root)}}, "key");
}

std::string json_number_text(const boost::json::value& v) {
  if (v.is_int64()) return std::to_string(v.get_int64());
  if (v.is_uint64()) return std::to_string(v.get_uint64());
  const double d = v.as_double();
  if (std::floor(d) == d && std::fabs(d) < 1e17) return std::to_string(int64_t(d));
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, d);
  return std::string(buf, r.ptr);
}

}  // namespace conveyor::grammar
