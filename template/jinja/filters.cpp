// Jinja's filters (jinja2/filters.py), with Hugging Face's tojson. Filters
// that return generators in Python (map, select, reverse, ...) return
// iterator-flavoured lists: always true, no len(), printable only as
// <generator object>.
#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "template/jinja/builtins.hpp"
#include "template/jinja/interpreter.hpp"
#include "template/jinja/json.hpp"
#include "template/jinja/pystr.hpp"

namespace conveyor::jinja {
namespace {

using Args = std::vector<std::optional<Value>>;
using FilterFn = Value (*)(Interpreter&, const Value&, CallArgs);

bool flag(const std::optional<Value>& v) { return v && v->truthy(); }

int64_t int_arg(const std::optional<Value>& v, int64_t fallback, const char* who) {
  if (!v) return fallback;
  if (!v->is(Value::Kind::integer) && !v->is(Value::Kind::boolean)) {
    fail(std::string(who) + ": '" + v->type_name() + "' object cannot be interpreted as an integer");
  }
  return v->as_int();
}

Value rewritten(const Value& from, std::string text) { return Value::string(std::move(text), has_data(from)); }

Value iterator(std::vector<Value> items) { return Value::list(std::move(items), ListFlavor::iterator); }

// make_attrgetter: "a.b.0" looked up part by part with [] semantics.
Value lookup_path(const Value& item, const Value& attribute) {
  if (!attribute.is_string()) return get_item(item, attribute);
  Value v = item;
  const std::string& path = attribute.text();
  size_t start = 0;
  while (true) {
    const size_t dot = path.find('.', start);
    const std::string part = path.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    const bool digits = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) { return c >= '0' && c <= '9'; });
    v = get_item(v, digits ? Value::integer(std::stoll(part)) : Value::string(part));
    if (dot == std::string::npos) return v;
    start = dot + 1;
  }
}

Value lower_if_string(const Value& v) { return v.is_string() ? Value::string(pystr::lower(v.text())) : v; }

// The sort key of an item: its attribute(s), lowered unless case sensitive.
Value sort_key(const Value& item, const std::optional<Value>& attribute, bool case_sensitive, bool multi) {
  auto post = [&](const Value& v) { return case_sensitive ? v : lower_if_string(v); };
  if (!attribute || attribute->is_none()) return post(item);
  if (!multi || !attribute->is_string()) return post(lookup_path(item, *attribute));
  std::vector<Value> keys;
  static const std::string comma = ",";
  for (const pystr::Span& sp : pystr::split(attribute->text(), &comma, -1)) {
    keys.push_back(post(lookup_path(item, Value::string(attribute->text().substr(sp.begin, sp.end - sp.begin)))));
  }
  return Value::list(std::move(keys));
}

// Python's sorted(items, key=..., reverse=...): stable in both directions.
std::vector<Value> sorted(std::vector<Value> items, const std::vector<Value>& keys, bool reverse) {
  std::vector<size_t> order(items.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  if (reverse) std::reverse(order.begin(), order.end());
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return py_less(keys[a], keys[b]); });
  if (reverse) std::reverse(order.begin(), order.end());
  std::vector<Value> out;
  out.reserve(items.size());
  for (size_t i : order) out.push_back(std::move(items[i]));
  return out;
}

// --- the filters ---------------------------------------------------------------

Value f_abs(Interpreter&, const Value& v, CallArgs args) {
  bind_args(std::move(args), {}, "abs");
  if (v.is(Value::Kind::floating)) return Value::floating(std::fabs(v.as_double()));
  if (v.is_number()) return negate(v, v.as_int() < 0);
  if (v.is_undefined()) undefined_error(v);
  fail(std::string("bad operand type for abs(): '") + v.type_name() + "'");
}

Value f_attr(Interpreter&, const Value& v, CallArgs args) {
  Args a = bind_args(std::move(args), {"name"}, "attr");
  if (!a[0] || !a[0]->is_string()) fail("attr(): attribute name must be a string");
  const std::string& name = a[0]->text();
  if (v.is(Value::Kind::ns)) {
    const Value* x = v.ns().find(name);
    if (x) return *x;
  } else if (std::optional<Value> m = bound_method(v, name)) {
    return *m;
  }
  return Value::undefined(std::string("'") + v.type_name() + " object' has no attribute '" + name + "'");
}

Value f_batch(Interpreter&, const Value& v, CallArgs args) {
  Args a = bind_args(std::move(args), {"linecount", "fill_with"}, "batch");
  const int64_t n = int_arg(a[0], 0, "batch");
  if (n <= 0) fail("batch(): linecount must be positive");
  std::vector<Value> out;
  std::vector<Value> row;
  for (const Value& item : iterate(v)) {
    if (static_cast<int64_t>(row.size()) == n) out.push_back(Value::list(std::exchange(row, {})));
    row.push_back(item);
  }
  if (!row.empty()) {
    if (a[1] && !a[1]->is_none()) while (static_cast<int64_t>(row.size()) < n) row.push_back(*a[1]);
    out.push_back(Value::list(std::move(row)));
  }
  return iterator(std::move(out));
}

Value f_capitalize(Interpreter&, const Value& v, CallArgs args) {
  bind_args(std::move(args), {}, "capitalize");
  return rewritten(v, pystr::capitalize(py_str(v).text));
}

Value f_center(Interpreter& in, const Value& v, CallArgs args) {
  Args a = bind_args(std::move(args), {"width"}, "center");
  CallArgs call;
  call.positional.push_back(Value::integer(int_arg(a[0], 80, "center")));
  return in.call(*bound_method(Value::string(py_str(v)), "center"), std::move(call));
}

Value f_length(Interpreter&, const Value& v, CallArgs args) {
  bind_args(std::move(args), {}, "length");
  return Value::integer(static_cast<int64_t>(py_len(v)));
}

Value f_default(Interpreter&, const Value& v, CallArgs args) {
  Args a = bind_args(std::move(args), {"default_value", "boolean"}, "default");
  if (v.is_undefined() || (flag(a[1]) && !v.truthy())) return a[0] ? *a[0] : Value::string("");
  return v;
}

Value f_dictsort(Interpreter&, const Value& v, CallArgs args) {
  Args a = bind_args(std::move(args), {"case_sensitive", "by", "reverse"}, "dictsort");
  if (!v.is_dict()) fail("dictsort(): the value must be a mapping");
  int pos = 0;
  if (a[1]) {
    if (a[1]->is_string() && a[1]->text() == "value") pos = 1;
    else if (!a[1]->is_string() || a[1]->text() != "key") fail("You can only sort by either \"key\" or \"value\"");
  }
  std::vector<Value> items;
  std::vector<Value> keys;
  for (const auto& [k, x] : v.dict().entries) {
    items.push_back(Value::list({k, x}, ListFlavor::tuple));
    keys.push_back(flag(a[0]) ? (pos ? x : k) : lower_if_string(pos ? x : k));
  }
  return Value::list(sorted(std::move(items), keys, flag(a[2])));
}

Value f_escape(Interpreter&, const Value& v, CallArgs args) {
  bind_args(std::move(args), {}, "escape");
  std::string out;
  for (char c : py_str(v).text) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&#34;"; break;
      case '\'': out += "&#39;"; break;
      default: out += c;
    }
  }
  return rewritten(v, std::move(out));
}

Value f_first(Interpreter&, const Value& v, CallArgs args) {
  bind_args(std::move(args), {}, "first");
  const std::vector<Value> items = iterate(v);
  return items.empty() ? Value::undefined("No first item, sequence was empty.") : items.front();
}

Value f_last(Interpreter&, const Value& v, CallArgs args) {
  bind_args(std::move(args), {}, "last");
  if (v.is_list() && v.flavor() == ListFlavor::iterator) fail("'generator' object is not reversible");
  const std::vector<Value> items = iterate(v);
  return items.empty() ? Value::undefined("No last item, sequence was empty.") : items.back();
}

// Python's float(str): surrounding whitespace, inf/nan, underscores between digits.
std::optional<double> parse_float(const std::string& text) {
  const pystr::Span sp = pystr::strip(text, nullptr, true, true);
  std::string s;
  const std::string_view t = std::string_view(text).substr(sp.begin, sp.end - sp.begin);
  for (size_t i = 0; i < t.size(); ++i) {
    const bool digit_before = i > 0 && t[i - 1] >= '0' && t[i - 1] <= '9';
    const bool digit_after = i + 1 < t.size() && t[i + 1] >= '0' && t[i + 1] <= '9';
    if (t[i] == '_' && digit_before && digit_after) continue;
    if (t[i] == '_' || t[i] == 'x' || t[i] == 'X' || t[i] == 'p' || t[i] == 'P') return std::nullopt;
    s += t[i];
  }
  if (s.empty()) return std::nullopt;
  const std::string lowered = pystr::lower(s);
  const std::string unsigned_part = lowered[0] == '+' || lowered[0] == '-' ? lowered.substr(1) : lowered;
  if (unsigned_part == "infinity" || unsigned_part == "inf" || unsigned_part == "nan") {
    const double x = unsigned_part == "nan" ? NAN : INFINITY;
    return lowered[0] == '-' ? -x : x;
  }
  if (unsigned_part.find_first_of("in") != std::string::npos) return std::nullopt;
  char* end = nullptr;
  const double d = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size()) return std::nullopt;
  return d;
}

// Python's int(str, base).
std::optional<int64_t> parse_int(const std::string& text, int64_t base) {
  const pystr::Span sp = pystr::strip(text, nullptr, true, true);
  std::string_view t = std::string_view(text).substr(sp.begin, sp.end - sp.begin);
  bool negative = false;
  if (!t.empty() && (t[0] == '+' || t[0] == '-')) {
    negative = t[0] == '-';
    t.remove_prefix(1);
  }
  if (t.size() > 2 && t[0] == '0') {
    const char p = static_cast<char>(t[1] | 0x20);
    const int64_t prefix_base = p == 'x' ? 16 : p == 'o' ? 8 : p == 'b' ? 2 : 0;
    if (prefix_base && (base == prefix_base || base == 0)) {
      base = prefix_base;
      t.remove_prefix(2);
      if (!t.empty() && t[0] == '_') t.remove_prefix(1);
    }
  }
  if (base == 0) base = 10;
  if (base < 2 || base > 36 || t.empty()) return std::nullopt;
  int64_t v = 0;
  for (size_t i = 0; i < t.size(); ++i) {
    if (t[i] == '_' && i > 0 && i + 1 < t.size() && t[i - 1] != '_') continue;
    const char c = static_cast<char>(t[i] | 0x20);
    const int64_t d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'z' ? c - 'a' + 10 : 99;
    if (d >= base) return std::nullopt;
    if (__builtin_mul_overflow(v, base, &v) || __builtin_add_overflow(v, d, &v)) fail("integer overflow");
  }
  return negative ? -v : v;
}

Value f_int(Interpreter&, const Value& v, CallArgs args) {
  Args a = bind_args(std::move(args), {"default", "base"}, "int");
  const Value fallback = a[0] ? *a[0] : Value::integer(0);
  if (v.is(Value::Kind::integer) || v.is(Value::Kind::boolean)) return Value::integer(v.as_int());
  double d = 0;
  if (v.is(Value::Kind::floating)) {
    d = v.as_double();
  } else if (v.is_string()) {
    if (auto i = parse_int(v.text(), int_arg(a[1], 10, "int"))) return Value::integer(*i);
    const auto f = parse_float(v.text());
    if (!f) return fallback;
    d = *f;
  } else {
    return fallback;
  }
  if (std::isnan(d)) return fallback;
  if (std::isinf(d) || std::fabs(d) >= 9.2e18) fail("cannot convert float to integer");
  return Value::integer(static_cast<int64_t>(std::trunc(d)));
}

Value f_float(Interpreter&, const Value& v, CallArgs args) {
  Args a = bind_args(std::move(args), {"default"}, "float");
  const Value fallback = a[0] ? *a[0] : Value::floating(0.0);
  if (v.is_number()) return Value::floating(v.as_double());
  if (v.is_string()) {
    if (auto f = parse_float(v.text())) return Value::floating(*f);
  }
  return fallback;
}

Value f_format(Interpreter&, const Value& v, CallArgs args) {
  if (!args.positional.empty() && !args.named.empty()) {
    fail("can't handle positional and keyword arguments at the same time");
  }
  Value params;
  if (!args.named.empty()) {
    std::vector<std::pair<Value, Value>> entries;
    for (auto& [k, x] : args.named) entries.emplace_back(Value::string(k), std::move(x));
    params = Value::dict(std::move(entries));
  } else {
    params = Value::list(std::move(args.positional), ListFlavor::tuple);
  }
  return Value::string(percent_format(py_str(v), params));
}

Value f_indent(Interpreter&, const Value& v, CallArgs args) {
  Args a = bind_args(std::move(args), {"width", "first", "blank"}, "indent");
  Str indention;
  if (a[0] && a[0]->is_string()) indention = a[0]->str();
  else indention.text.assign(static_cast<size_t>(std::max<int64_t>(0, int_arg(a[0], 4, "indent"))), ' ');
  const Str s = py_str(v);
  std::vector<pystr::Span> lines = pystr::splitlines(s.text + "\n");
  StrBuilder out;
  for (size_t i = 0; i < lines.size(); ++i) {
    const bool empty = lines[i].begin == lines[i].end;
    if (i > 0) out.append("\n");
    if ((i > 0 || flag(a[1])) && (!empty || flag(a[2]))) out.append(indention);
    out.append(s, lines[i].begin, std::min(lines[i].end, s.text.size()));
  }
  if (lines.empty() && flag(a[1])) out.append(indention);
  return Value::string(out.take());
}

Value f_join(Interpreter&, const Value& v, CallArgs args) {
  Args a = bind_args(std::move(args), {"d", "attribute"}, "join");
  const Str sep = a[0] ? py_str(*a[0]) : Str{};
  StrBuilder out;
  bool first = true;
  for (const Value& item : iterate(v)) {
    if (!first) out.append(sep);
    first = false;
    out.append(py_str(a[1] && !a[1]->is_none() ? lookup_path(item, *a[1]) : item));
  }
  return Value::string(out.take());
}

Value f_list(Interpreter&, const Value& v, CallArgs args) {
  bind_args(std::move(args), {}, "list");
  return Value::list(iterate(v));
}

Value f_lower(Interpreter&, const Value& v, CallArgs args) {
  bind_args(std::move(args), {}, "lower");
  return rewritten(v, pystr::lower(py_str(v).text));
}

Value f_upper(Interpreter&, const Value& v, CallArgs args) {
  bind_args(std::move(args), {}, "upper");
  return rewritten(v, pystr::upper(py_str(v).text));
}

Value f_title(Interpreter&, const Value& v, CallArgs args) {
  bind_args(std::move(args), {}, "title");
  return rewritten(v, pystr::jinja_title(py_str(v).text));
}

Value f_items(Interpreter&, const Value& v, CallArgs args) {
  bind_args(std::move(args), {}, "items");
  if (v.is_undefined()) return iterator({});
  if (!v.is_dict()) fail("Can only get item pairs from a mapping.");
  std::vector<Value> out;
  for (const auto& [k, x] : v.dict().entries) out.push_back(Value::list({k, x}, ListFlavor::tuple));
  return iterator(std::move(out));
}

Value f_map(Interpreter& in, const Value& v, CallArgs args) {
  if (!v.truthy()) return iterator({});
  std::vector<Value> out;
  if (args.positional.empty()) {
    std::optional<Value> attribute;
    std::optional<Value> fallback;
    for (auto& [k, x] : args.named) {
      if (k == "attribute") attribute = x;
      else if (k == "default") fallback = x;
      else fail("Unexpected keyword argument '" + k + "'");
    }
    if (!attribute) fail("map requires a filter argument");
    for (const Value& item : iterate(v)) {
      Value x = lookup_path(item, *attribute);
      if (x.is_undefined() && fallback && !fallback->is_none()) x = *fallback;
      out.push_back(std::move(x));
    }
    return iterator(std::move(out));
  }
  const Value name = args.positional.front();
  if (!name.is_string()) fail("map(): the filter name must be a string");
  args.positional.erase(args.positional.begin());
  for (const Value& item : iterate(v)) out.push_back(apply_filter(in, name.text(), item, args));
  return iterator(std::move(out));
}

Value min_or_max(const Value& v, CallArgs args, bool max) {
  Args a = bind_args(std::move(args), {"case_sensitive", "attribute"}, max ? "max" : "min");
  const std::vector<Value> items = iterate(v);
  if (items.empty()) return Value::undefined("No aggregated item, sequence was empty.");
  size_t best = 0;
  Value best_key = sort_key(items[0], a[1], flag(a[0]), false);
  for (size_t i = 1; i < items.size(); ++i) {
    Value key = sort_key(items[i], a[1], flag(a[0]), false);
    if (max ? py_less(best_key, key) : py_less(key, best_key)) {
      best = i;
      best_key = std::move(key);
    }
  }
  return items[best];
}

Value f_min(Interpreter&, const Value& v, CallArgs args) { return min_or_max(v, std::move(args), false); }
Value f_max(Interpreter&, const Value& v, CallArgs args) { return min_or_max(v, std::move(args), true); }

// select / reject / selectattr / rejectattr.
Value select_or_reject(Interpreter& in, const Value& v, CallArgs args, bool keep_if, bool by_attr) {
  if (!v.truthy()) return iterator({});
  std::optional<Value> attribute;
  if (by_attr) {
    if (args.positional.empty()) fail("Missing parameter for attribute name");
    attribute = args.positional.front();
    args.positional.erase(args.positional.begin());
  }
  std::optional<std::string> test;
  if (!args.positional.empty()) {
    if (!args.positional.front().is_string()) fail("the test name must be a string");
    test = args.positional.front().text();
    args.positional.erase(args.positional.begin());
  }
  std::vector<Value> out;
  for (const Value& item : iterate(v)) {
    const Value x = attribute ? lookup_path(item, *attribute) : item;
    const bool passed = test ? apply_test(in, *test, x, args) : x.truthy();
    if (passed == keep_if) out.push_back(item);
  }
  return iterator(std::move(out));
}

Value f_select(Interpreter& in, const Value& v, CallArgs a) { return select_or_reject(in, v, std::move(a), true, false); }
Value f_reject(Interpreter& in, const Value& v, CallArgs a) { return select_or_reject(in, v, std::move(a), false, false); }
Value f_selectattr(Interpreter& in, const Value& v, CallArgs a) { return select_or_reject(in, v, std::move(a), true, true); }
Value f_rejectattr(Interpreter& in, const Value& v, CallArgs a) { return select_or_reject(in, v, std::move(a), false, true); }

Value f_replace(Interpreter& in, const Value& v, CallArgs args) {
  Args a = bind_args(std::move(args), {"old", "new", "count"}, "replace");
  if (!a[0] || !a[1]) fail("replace() is missing a required argument");
  CallArgs call;
  call.positional = {Value::string(py_str(*a[0])), Value::string(py_str(*a[1]))};
  if (a[2] && !a[2]->is_none()) call.positional.push_back(*a[2]);
  return in.call(*bound_method(Value::string(py_str(v)), "replace"), std::move(call));
}

Value f_reverse(Interpreter& in, const Value& v, CallArgs args) {
  bind_args(std::move(args), {}, "reverse");
  if (v.is_string()) return slice(v, std::nullopt, std::nullopt, Value::integer(-1), in.budget());
  std::vector<Value> items = iterate(v);
  std::reverse(items.begin(), items.end());
  if (v.is_list() && v.flavor() == ListFlavor::iterator) return Value::list(std::move(items));
  return iterator(std::move(items));
}

// Python's round(x, ndigits) on a float: the nearest decimal, ties to even
// on the exact binary value (what printf's rounding does).
double round_float(double x, int64_t ndigits) {
  if (!std::isfinite(x)) return x;
  if (ndigits >= 0) {
    if (ndigits > 300) return x;
    char buf[512];
    std::snprintf(buf, sizeof buf, "%.*f", static_cast<int>(ndigits), x);
    return std::strtod(buf, nullptr);
  }
  const double scale = std::pow(10.0, static_cast<double>(-ndigits));
  return std::nearbyint(x / scale) * scale;
}

Value f_round(Interpreter&, const Value& v, CallArgs args) {
  Args a = bind_args(std::move(args), {"precision", "method"}, "round");
  const int64_t precision = int_arg(a[0], 0, "round");
  std::string method = "common";
  if (a[1]) method = a[1]->is_string() ? a[1]->text() : "";
  if (method != "common" && method != "ceil" && method != "floor") fail("method must be common, ceil or floor");
  if (!v.is_number()) {
    if (v.is_undefined()) undefined_error(v);
    fail(std::string("type ") + v.type_name() + " doesn't define __round__ method");
  }
  if (method == "common") {
    if (!v.is(Value::Kind::floating)) {
      if (precision >= 0) return Value::integer(v.as_int());
      return Value::integer(static_cast<int64_t>(round_float(static_cast<double>(v.as_int()), precision)));
    }
    return Value::floating(round_float(v.as_double(), precision));
  }
  const double scale = std::pow(10.0, static_cast<double>(precision));
  const double r = method == "ceil" ? std::ceil(v.as_double() * scale) : std::floor(v.as_double() * scale);
  return Value::floating(r / scale);
}

Value f_safe(Interpreter&, const Value& v, CallArgs args) {
  bind_args(std::move(args), {}, "safe");
  return Value::string(py_str(v));
}

Value f_sort(Interpreter&, const Value& v, CallArgs args) {
  Args a = bind_args(std::move(args), {"reverse", "case_sensitive", "attribute"}, "sort");
  std::vector<Value> items = iterate(v);
  std::vector<Value> keys;
  for (const Value& item : items) keys.push_back(sort_key(item, a[2], flag(a[1]), true));
  return Value::list(sorted(std::move(items), keys, flag(a[0])));
}

Value f_string(Interpreter&, const Value& v, CallArgs args) {
  bind_args(std::move(args), {}, "string");
  return Value::string(py_str(v));
}

Value f_sum(Interpreter& in, const Value& v, CallArgs args) {
  Args a = bind_args(std::move(args), {"attribute", "start"}, "sum");
  Value total = a[1] ? *a[1] : Value::integer(0);
  for (const Value& item : iterate(v)) {
    total = binary_op(BinaryOp::add, total, a[0] && !a[0]->is_none() ? lookup_path(item, *a[0]) : item, in.budget());
  }
  return total;
}

Value f_tojson(Interpreter&, const Value& v, CallArgs args) {
  Args a = bind_args(std::move(args), {"ensure_ascii", "indent", "separators", "sort_keys"}, "tojson");
  JsonFormat format;
  format.ensure_ascii = flag(a[0]);
  if (a[1] && !a[1]->is_none()) {
    if (a[1]->is_string()) format.indent = a[1]->text();
    else format.indent = std::string(static_cast<size_t>(std::clamp<int64_t>(int_arg(a[1], 0, "tojson"), 0, 4096)), ' ');
    format.item_separator = ",";
  }
  if (a[2] && !a[2]->is_none()) {
    const std::vector<Value> seps = iterate(*a[2]);
    if (seps.size() != 2 || !seps[0].is_string() || !seps[1].is_string()) fail("tojson(): separators must be two strings");
    format.item_separator = seps[0].text();
    format.key_separator = seps[1].text();
  }
  format.sort_keys = flag(a[3]);
  return Value::string(to_json(v, format));
}

Value f_trim(Interpreter&, const Value& v, CallArgs args) {
  Args a = bind_args(std::move(args), {"chars"}, "trim");
  const Str s = py_str(v);
  std::string chars;
  if (a[0] && !a[0]->is_none()) {
    if (!a[0]->is_string()) fail("strip arg must be None or str");
    chars = a[0]->text();
  }
  const pystr::Span sp = pystr::strip(s.text, a[0] && !a[0]->is_none() ? &chars : nullptr, true, true);
  StrBuilder out;
  out.append(s, sp.begin, sp.end);
  return Value::string(out.take());
}

Value f_unique(Interpreter&, const Value& v, CallArgs args) {
  Args a = bind_args(std::move(args), {"case_sensitive", "attribute"}, "unique");
  std::vector<Value> seen;
  std::vector<Value> out;
  for (const Value& item : iterate(v)) {
    Value key = sort_key(item, a[1], flag(a[0]), false);
    if (key.is_list() || key.is_dict()) fail(std::string("unhashable type: '") + key.type_name() + "'");
    if (std::none_of(seen.begin(), seen.end(), [&](const Value& s) { return py_equal(s, key); })) {
      seen.push_back(std::move(key));
      out.push_back(item);
    }
  }
  return iterator(std::move(out));
}

Value f_wordcount(Interpreter&, const Value& v, CallArgs args) {
  bind_args(std::move(args), {}, "wordcount");
  const std::string s = py_str(v).text;
  int64_t words = 0;
  bool in_word = false;
  for (size_t i = 0; i < s.size(); i += pystr::char_len(s, i)) {
    const char32_t c = pystr::decode_at(s, i);
    const bool word_char = (c >= '0' && c <= '9') || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
                           (c >= 0x80 && !pystr::is_space(c));
    if (word_char && !in_word) ++words;
    in_word = word_char;
  }
  return Value::integer(words);
}

struct Filter {
  std::string_view name;
  FilterFn fn;
};

constexpr Filter kFilters[] = {
    {"abs", f_abs},           {"attr", f_attr},         {"batch", f_batch},       {"capitalize", f_capitalize},
    {"center", f_center},     {"count", f_length},      {"d", f_default},         {"default", f_default},
    {"dictsort", f_dictsort}, {"e", f_escape},          {"escape", f_escape},     {"first", f_first},
    {"float", f_float},       {"format", f_format},     {"indent", f_indent},     {"int", f_int},
    {"items", f_items},       {"join", f_join},         {"last", f_last},         {"length", f_length},
    {"list", f_list},         {"lower", f_lower},       {"map", f_map},           {"max", f_max},
    {"min", f_min},           {"reject", f_reject},     {"rejectattr", f_rejectattr}, {"replace", f_replace},
    {"reverse", f_reverse},   {"round", f_round},       {"safe", f_safe},         {"select", f_select},
    {"selectattr", f_selectattr}, {"sort", f_sort},     {"string", f_string},     {"sum", f_sum},
    {"title", f_title},       {"tojson", f_tojson},     {"trim", f_trim},         {"unique", f_unique},
    {"upper", f_upper},       {"wordcount", f_wordcount},
};

const Filter* find_filter(std::string_view name) {
  for (const Filter& f : kFilters) {
    if (f.name == name) return &f;
  }
  return nullptr;
}

}  // namespace

bool is_filter(std::string_view name) { return find_filter(name) != nullptr; }

Value apply_filter(Interpreter& in, std::string_view name, const Value& operand, CallArgs args) {
  const Filter* f = find_filter(name);
  if (!f) fail("No filter named '" + std::string(name) + "'.");
  in.budget().step();
  return f->fn(in, operand, std::move(args));
}

}  // namespace conveyor::jinja
