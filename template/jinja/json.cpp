#include "template/jinja/json.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

#include "template/jinja/pystr.hpp"

namespace conveyor::jinja {
namespace {

Value from_json_at(const boost::json::value& v, bool is_data, int depth) {
  if (depth > kMaxDepth) fail("the context nests deeper than " + std::to_string(kMaxDepth));
  switch (v.kind()) {
    case boost::json::kind::null: return Value::none();
    case boost::json::kind::bool_: return Value::boolean(v.get_bool());
    case boost::json::kind::int64: return Value::integer(v.get_int64());
    case boost::json::kind::uint64: {
      const uint64_t u = v.get_uint64();
      if (u > static_cast<uint64_t>(INT64_MAX)) fail("an integer in the context does not fit 64 bits");
      return Value::integer(static_cast<int64_t>(u));
    }
    case boost::json::kind::double_: return Value::floating(v.get_double());
    case boost::json::kind::string: return Value::string(std::string(v.get_string()), is_data);
    case boost::json::kind::array: {
      std::vector<Value> items;
      items.reserve(v.get_array().size());
      for (const boost::json::value& x : v.get_array()) items.push_back(from_json_at(x, is_data, depth + 1));
      return Value::list(std::move(items));
    }
    case boost::json::kind::object: {
      std::vector<std::pair<Value, Value>> entries;
      entries.reserve(v.get_object().size());
      for (const auto& kv : v.get_object()) {
        entries.emplace_back(Value::string(std::string(kv.key()), is_data), from_json_at(kv.value(), is_data, depth + 1));
      }
      return Value::dict(std::move(entries));
    }
  }
  return Value::none();
}

void append_string(std::string& out, std::string_view s, bool ensure_ascii) {
  out += '"';
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    char buf[16];
    switch (c) {
      case '"': out += "\\\""; ++i; continue;
      case '\\': out += "\\\\"; ++i; continue;
      case '\n': out += "\\n"; ++i; continue;
      case '\r': out += "\\r"; ++i; continue;
      case '\t': out += "\\t"; ++i; continue;
      case '\b': out += "\\b"; ++i; continue;
      case '\f': out += "\\f"; ++i; continue;
      default: break;
    }
    if (c < 0x20 || (ensure_ascii && c == 0x7F)) {
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
      ++i;
      continue;
    }
    const size_t n = pystr::char_len(s, i);
    if (ensure_ascii && c >= 0x80) {
      char32_t cp = pystr::decode_at(s, i);
      if (cp >= 0x10000) {  // a surrogate pair, as Python writes it
        cp -= 0x10000;
        std::snprintf(buf, sizeof buf, "\\u%04x\\u%04x", 0xD800 + static_cast<unsigned>(cp >> 10),
                      0xDC00 + static_cast<unsigned>(cp & 0x3FF));
      } else {
        std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned>(cp));
      }
      out += buf;
    } else {
      out.append(s.substr(i, n));
    }
    i += n;
  }
  out += '"';
}

std::string float_json(double d) {
  if (std::isnan(d)) return "NaN";
  if (std::isinf(d)) return d < 0 ? "-Infinity" : "Infinity";
  return float_repr(d);
}

std::string key_text(const Value& k) {
  switch (k.kind()) {
    case Value::Kind::string: return k.text();
    case Value::Kind::integer: return std::to_string(k.as_int());
    case Value::Kind::floating: return float_json(k.as_double());
    case Value::Kind::boolean: return k.as_bool() ? "true" : "false";
    case Value::Kind::none: return "null";
    default: fail(std::string("keys must be str, int, float, bool or None, not ") + k.type_name());
  }
}

class Writer {
 public:
  explicit Writer(const JsonFormat& f) : f_(f) {}

  void write(const Value& v, int level) {
    switch (v.kind()) {
      case Value::Kind::none: out_ += "null"; return;
      case Value::Kind::boolean: out_ += v.as_bool() ? "true" : "false"; return;
      case Value::Kind::integer: out_ += std::to_string(v.as_int()); return;
      case Value::Kind::floating: out_ += float_json(v.as_double()); return;
      case Value::Kind::string: append_string(out_, v.text(), f_.ensure_ascii); return;
      case Value::Kind::list:
        if (v.flavor() != ListFlavor::iterator) return write_list(v.items(), level);
        break;
      case Value::Kind::dict: return write_dict(v.dict(), level);
      default: break;
    }
    fail(std::string("Object of type ") + v.type_name() + " is not JSON serializable");
  }

  std::string take() { return std::move(out_); }

 private:
  void newline(int level) {
    if (!f_.indent) return;
    out_ += '\n';
    for (int i = 0; i < level; ++i) out_ += *f_.indent;
  }

  void write_list(const std::vector<Value>& items, int level) {
    if (items.empty()) {
      out_ += "[]";
      return;
    }
    out_ += '[';
    for (size_t i = 0; i < items.size(); ++i) {
      if (i) out_ += f_.item_separator;
      newline(level + 1);
      write(items[i], level + 1);
    }
    newline(level);
    out_ += ']';
  }

  void write_dict(const DictValue& d, int level) {
    if (d.entries.empty()) {
      out_ += "{}";
      return;
    }
    std::vector<const std::pair<Value, Value>*> entries;
    for (const auto& e : d.entries) entries.push_back(&e);
    if (f_.sort_keys) {
      std::stable_sort(entries.begin(), entries.end(), [](auto* a, auto* b) { return py_less(a->first, b->first); });
    }
    out_ += '{';
    for (size_t i = 0; i < entries.size(); ++i) {
      if (i) out_ += f_.item_separator;
      newline(level + 1);
      append_string(out_, key_text(entries[i]->first), f_.ensure_ascii);
      out_ += f_.key_separator;
      write(entries[i]->second, level + 1);
    }
    newline(level);
    out_ += '}';
  }

  const JsonFormat& f_;
  std::string out_;
};

}  // namespace

Value from_json(const boost::json::value& v, bool is_data) { return from_json_at(v, is_data, 0); }

Str to_json(const Value& v, const JsonFormat& format) {
  Writer w(format);
  w.write(v, 0);
  Str out{w.take(), {}};
  if (!out.text.empty() && has_data(v)) out.data.push_back({0, out.text.size()});
  return out;
}

}  // namespace conveyor::jinja
