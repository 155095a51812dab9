#include "template/jinja/value.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>

#include "template/jinja/pystr.hpp"

namespace conveyor::jinja {

void fail(std::string message) { throw RenderError{std::move(message)}; }

// --- Str ---------------------------------------------------------------------

void StrBuilder::mark(size_t begin, size_t end) {
  if (begin == end) return;
  if (!out_.data.empty() && out_.data.back().end == begin) {
    out_.data.back().end = end;
  } else {
    out_.data.push_back({begin, end});
  }
}

void StrBuilder::append(std::string_view text, bool is_data) {
  if (out_.text.size() + text.size() > max_bytes_) fail("the output is larger than the limit");
  const size_t at = out_.text.size();
  out_.text.append(text);
  if (is_data) mark(at, out_.text.size());
}

void StrBuilder::append(const Str& s, size_t begin, size_t end) {
  if (out_.text.size() + (end - begin) > max_bytes_) fail("the output is larger than the limit");
  const size_t shift = out_.text.size();
  out_.text.append(s.text, begin, end - begin);
  for (const TextRange& r : s.data) {
    const size_t b = std::max(r.begin, begin);
    const size_t e = std::min(r.end, end);
    if (b < e) mark(b - begin + shift, e - begin + shift);
  }
}

// --- Value -------------------------------------------------------------------

Value Value::undefined(std::string hint) {
  return Value(Payload(std::in_place_index<0>, Undefined{std::make_shared<const std::string>(std::move(hint))}));
}

Value Value::string(Str s) {
  return Value(Payload(std::in_place_index<5>, std::make_shared<const Str>(std::move(s))));
}

Value Value::string(std::string text, bool is_data) {
  Str s{std::move(text), {}};
  if (is_data && !s.text.empty()) s.data.push_back({0, s.text.size()});
  return string(std::move(s));
}

Value Value::list(std::vector<Value> items, ListFlavor flavor) {
  int depth = 0;
  for (const Value& v : items) depth = std::max(depth, v.depth());
  if (depth + 1 > kMaxDepth) fail("lists and dicts nest deeper than " + std::to_string(kMaxDepth));
  auto l = std::make_shared<ListValue>();
  l->items = std::move(items);
  l->flavor = flavor;
  l->depth = depth + 1;
  return Value(Payload(std::in_place_index<6>, std::move(l)));
}

Value Value::dict(std::vector<std::pair<Value, Value>> entries) {
  int depth = 0;
  for (const auto& [k, v] : entries) depth = std::max({depth, k.depth(), v.depth()});
  if (depth + 1 > kMaxDepth) fail("lists and dicts nest deeper than " + std::to_string(kMaxDepth));
  auto d = std::make_shared<DictValue>();
  d->entries = std::move(entries);
  d->depth = depth + 1;
  return Value(Payload(std::in_place_index<7>, std::move(d)));
}

Value Value::function(std::string name, std::function<Value(Interpreter&, CallArgs)> call) {
  return Value(Payload(std::in_place_index<8>,
                       std::make_shared<const FunctionValue>(FunctionValue{std::move(name), std::move(call)})));
}

Value Value::ns(std::shared_ptr<NamespaceValue> ns) {
  return Value(Payload(std::in_place_index<9>, std::move(ns)));
}

int64_t Value::as_int() const { return is(Kind::boolean) ? (as_bool() ? 1 : 0) : std::get<3>(v_); }

double Value::as_double() const {
  return is(Kind::floating) ? std::get<4>(v_) : static_cast<double>(as_int());
}

const std::vector<Value>& Value::items() const { return list().items; }
ListFlavor Value::flavor() const { return list().flavor; }

const std::string* Value::undefined_hint() const {
  const auto& hint = std::get<0>(v_).hint;
  return hint ? hint.get() : nullptr;
}

bool Value::truthy() const {
  switch (kind()) {
    case Kind::undefined:
    case Kind::none: return false;
    case Kind::boolean: return as_bool();
    case Kind::integer: return as_int() != 0;
    case Kind::floating: return as_double() != 0.0;
    case Kind::string: return !text().empty();
    case Kind::list: return flavor() == ListFlavor::iterator || !items().empty();
    case Kind::dict: return !dict().entries.empty();
    case Kind::function:
    case Kind::ns: return true;
  }
  return false;
}

const char* Value::type_name() const {
  switch (kind()) {
    case Kind::undefined: return "Undefined";
    case Kind::none: return "NoneType";
    case Kind::boolean: return "bool";
    case Kind::integer: return "int";
    case Kind::floating: return "float";
    case Kind::string: return "str";
    case Kind::list:
      return flavor() == ListFlavor::list ? "list" : flavor() == ListFlavor::tuple ? "tuple" : "generator";
    case Kind::dict: return "dict";
    case Kind::function: return "function";
    case Kind::ns: return ns().is_loop ? "LoopContext" : "Namespace";
  }
  return "object";
}

int Value::depth() const {
  if (is(Kind::list)) return list().depth;
  if (is(Kind::dict)) return dict().depth;
  return 0;
}

const void* Value::identity() const {
  switch (kind()) {
    case Kind::string: return std::get<5>(v_).get();
    case Kind::list: return std::get<6>(v_).get();
    case Kind::dict: return std::get<7>(v_).get();
    case Kind::function: return std::get<8>(v_).get();
    case Kind::ns: return std::get<9>(v_).get();
    default: return nullptr;
  }
}

const Value* DictValue::find(const Value& key) const {
  for (const auto& [k, v] : entries) {
    if (py_equal(k, key)) return &v;
  }
  return nullptr;
}

const Value* DictValue::find(std::string_view key) const {
  for (const auto& [k, v] : entries) {
    if (k.is_string() && k.text() == key) return &v;
  }
  return nullptr;
}

const Value* NamespaceValue::find(std::string_view name) const {
  for (const auto& [k, v] : attrs) {
    if (k == name) return &v;
  }
  return nullptr;
}

void NamespaceValue::set(const std::string& name, Value v) {
  for (auto& [k, old] : attrs) {
    if (k == name) {
      old = std::move(v);
      return;
    }
  }
  attrs.emplace_back(name, std::move(v));
}

// --- Python semantics --------------------------------------------------------

namespace {

bool numbers_equal(const Value& a, const Value& b) {
  if (a.is(Value::Kind::floating) || b.is(Value::Kind::floating)) return a.as_double() == b.as_double();
  return a.as_int() == b.as_int();
}

[[noreturn]] void unorderable(const Value& a, const Value& b) {
  fail(std::string("'<' not supported between instances of '") + a.type_name() + "' and '" +
       b.type_name() + "'");
}

}  // namespace

bool py_equal(const Value& a, const Value& b) {
  using K = Value::Kind;
  if (a.is_number() && b.is_number()) return numbers_equal(a, b);
  if (a.kind() != b.kind()) return false;
  switch (a.kind()) {
    case K::undefined:
    case K::none: return true;
    case K::string: return a.text() == b.text();
    case K::list: {
      if (a.flavor() != b.flavor()) return false;
      if (a.flavor() == ListFlavor::iterator) return a.identity() == b.identity();
      const auto& x = a.items();
      const auto& y = b.items();
      if (x.size() != y.size()) return false;
      for (size_t i = 0; i < x.size(); ++i) {
        if (!py_equal(x[i], y[i])) return false;
      }
      return true;
    }
    case K::dict: {
      const auto& x = a.dict().entries;
      if (x.size() != b.dict().entries.size()) return false;
      for (const auto& [k, v] : x) {
        const Value* other = b.dict().find(k);
        if (!other || !py_equal(v, *other)) return false;
      }
      return true;
    }
    default: return a.identity() == b.identity();
  }
}

bool py_less(const Value& a, const Value& b) {
  if (a.is_undefined() || b.is_undefined()) {
    const Value& u = a.is_undefined() ? a : b;
    fail(u.undefined_hint() ? *u.undefined_hint() : "undefined value");
  }
  if (a.is_number() && b.is_number()) {
    if (a.is(Value::Kind::floating) || b.is(Value::Kind::floating)) return a.as_double() < b.as_double();
    return a.as_int() < b.as_int();
  }
  if (a.is_string() && b.is_string()) return a.text() < b.text();
  if (a.is_list() && b.is_list() && a.flavor() == b.flavor() && a.flavor() != ListFlavor::iterator) {
    const auto& x = a.items();
    const auto& y = b.items();
    for (size_t i = 0; i < x.size() && i < y.size(); ++i) {
      if (!py_equal(x[i], y[i])) return py_less(x[i], y[i]);
    }
    return x.size() < y.size();
  }
  unorderable(a, b);
}

std::string float_repr(double d) {
  if (std::isnan(d)) return "nan";
  if (std::isinf(d)) return d < 0 ? "-inf" : "inf";
  char buf[64];
  const auto res = std::to_chars(buf, buf + sizeof buf, d, std::chars_format::scientific);
  const std::string sci(buf, res.ptr);  // "-1.2345e+17"
  const size_t e_at = sci.find('e');
  std::string sign;
  std::string digits;
  for (size_t i = 0; i < e_at; ++i) {
    if (sci[i] == '-') sign = "-";
    else if (sci[i] != '.') digits += sci[i];
  }
  const int exponent = std::stoi(sci.substr(e_at + 1));
  const int decpt = exponent + 1;  // digits x 10^(decpt - len)
  const int n = static_cast<int>(digits.size());
  if (decpt > -4 && decpt <= 16) {
    if (decpt <= 0) return sign + "0." + std::string(-decpt, '0') + digits;
    if (decpt >= n) return sign + digits + std::string(decpt - n, '0') + ".0";
    return sign + digits.substr(0, decpt) + "." + digits.substr(decpt);
  }
  std::string out = sign + digits.substr(0, 1);
  if (n > 1) out += "." + digits.substr(1);
  char exp[16];
  std::snprintf(exp, sizeof exp, "e%c%02d", exponent < 0 ? '-' : '+', std::abs(exponent));
  return out + exp;
}

namespace {

bool printable(char32_t c) {
  // Python's str.isprintable(): not Cc, Cf, Cs, Co, Zl, Zp, Zs (but ' ').
  if (c < 0x20 || (c >= 0x7F && c <= 0xA0)) return false;
  if (c == 0xAD || c == 0x1680 || (c >= 0x2000 && c <= 0x200F) || (c >= 0x2028 && c <= 0x202F)) return false;
  if ((c >= 0x205F && c <= 0x206F) || c == 0x3000 || c == 0xFEFF) return false;
  if ((c >= 0x600 && c <= 0x605) || c == 0x61C || c == 0x6DD || c == 0x70F || c == 0x180E) return false;
  if ((c >= 0xD800 && c <= 0xF8FF) || (c >= 0xFFF9 && c <= 0xFFFB)) return false;
  if (c >= 0xF0000) return false;
  return true;
}

void repr_string(std::string& out, std::string_view s) {
  const bool has_single = s.find('\'') != std::string_view::npos;
  const bool has_double = s.find('"') != std::string_view::npos;
  const char quote = has_single && !has_double ? '"' : '\'';
  out += quote;
  for (size_t i = 0; i < s.size();) {
    const size_t n = pystr::char_len(s, i);
    const char32_t c = pystr::decode_at(s, i);
    if (c == static_cast<char32_t>(quote) || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c == '\r') {
      out += "\\r";
    } else if (c == '\t') {
      out += "\\t";
    } else if (printable(c)) {
      out.append(s.substr(i, n));
    } else {
      char buf[16];
      if (c < 0x100) std::snprintf(buf, sizeof buf, "\\x%02x", static_cast<unsigned>(c));
      else if (c < 0x10000) std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(c));
      else std::snprintf(buf, sizeof buf, "\\U%08x", static_cast<unsigned>(c));
      out += buf;
    }
    i += n;
  }
  out += quote;
}

void repr_into(std::string& out, const Value& v, int depth);

void str_into(std::string& out, const Value& v, int depth) {
  using K = Value::Kind;
  switch (v.kind()) {
    case K::undefined: return;
    case K::none: out += "None"; return;
    case K::boolean: out += v.as_bool() ? "True" : "False"; return;
    case K::integer: out += std::to_string(v.as_int()); return;
    case K::floating: out += float_repr(v.as_double()); return;
    case K::string: out += v.text(); return;
    default: repr_into(out, v, depth);
  }
}

void repr_into(std::string& out, const Value& v, int depth) {
  using K = Value::Kind;
  if (depth > 2 * kMaxDepth) fail("maximum recursion depth exceeded while printing a value");
  switch (v.kind()) {
    case K::undefined: out += "Undefined"; return;
    case K::string: repr_string(out, v.text()); return;
    case K::list: {
      if (v.flavor() == ListFlavor::iterator) {
        out += "<generator object>";
        return;
      }
      const bool tuple = v.flavor() == ListFlavor::tuple;
      out += tuple ? '(' : '[';
      for (size_t i = 0; i < v.items().size(); ++i) {
        if (i) out += ", ";
        repr_into(out, v.items()[i], depth + 1);
      }
      if (tuple && v.items().size() == 1) out += ',';
      out += tuple ? ')' : ']';
      return;
    }
    case K::dict: {
      out += '{';
      bool first = true;
      for (const auto& [k, x] : v.dict().entries) {
        if (!first) out += ", ";
        first = false;
        repr_into(out, k, depth + 1);
        out += ": ";
        repr_into(out, x, depth + 1);
      }
      out += '}';
      return;
    }
    case K::function: out += "<function " + v.function().name + ">"; return;
    case K::ns: {
      const NamespaceValue& ns = v.ns();
      if (ns.is_loop) {
        const Value* index = ns.find("index");
        const Value* length = ns.find("length");
        out += "<LoopContext " + std::to_string(index ? index->as_int() : 0) + "/" +
               std::to_string(length ? length->as_int() : 0) + ">";
        return;
      }
      out += "<Namespace {";
      for (size_t i = 0; i < ns.attrs.size(); ++i) {
        if (i) out += ", ";
        repr_string(out, ns.attrs[i].first);
        out += ": ";
        repr_into(out, ns.attrs[i].second, depth + 1);
      }
      out += "}>";
      return;
    }
    default: str_into(out, v, depth);
  }
}

bool has_data_at(const Value& v, int depth) {
  if (depth > 2 * kMaxDepth) return true;
  switch (v.kind()) {
    case Value::Kind::string: return !v.str().data.empty();
    case Value::Kind::list:
      return std::any_of(v.items().begin(), v.items().end(),
                         [&](const Value& x) { return has_data_at(x, depth + 1); });
    case Value::Kind::dict:
      for (const auto& [k, x] : v.dict().entries) {
        if (has_data_at(k, depth + 1) || has_data_at(x, depth + 1)) return true;
      }
      return false;
    case Value::Kind::ns:
      for (const auto& [k, x] : v.ns().attrs) {
        if (has_data_at(x, depth + 1)) return true;
      }
      return false;
    default: return false;
  }
}

}  // namespace

bool has_data(const Value& v) { return has_data_at(v, 0); }

Str py_str(const Value& v) {
  if (v.is_string()) return v.str();
  std::string text;
  str_into(text, v, 0);
  Str out{std::move(text), {}};
  if (!out.text.empty() && has_data(v)) out.data.push_back({0, out.text.size()});
  return out;
}

std::string py_repr(const Value& v) {
  std::string out;
  repr_into(out, v, 0);
  return out;
}

}  // namespace conveyor::jinja
