// The methods of str, dict and list a template may call, with Python's
// semantics. Results that are pieces of the receiver keep its data ranges.
#include <algorithm>
#include <cmath>
#include <cstdio>

#include "template/jinja/builtins.hpp"
#include "template/jinja/operators.hpp"
#include "template/jinja/pystr.hpp"

namespace conveyor::jinja {

std::vector<std::optional<Value>> bind_args(CallArgs args, std::initializer_list<std::string_view> params,
                                            std::string_view who) {
  std::vector<std::optional<Value>> bound(params.size());
  if (args.positional.size() > params.size()) {
    fail(std::string(who) + "() takes at most " + std::to_string(params.size()) + " arguments (" +
         std::to_string(args.positional.size()) + " given)");
  }
  for (size_t i = 0; i < args.positional.size(); ++i) bound[i] = std::move(args.positional[i]);
  for (auto& [name, value] : args.named) {
    size_t i = 0;
    for (std::string_view p : params) {
      if (p == name) break;
      ++i;
    }
    if (i == params.size()) fail(std::string(who) + "() got an unexpected keyword argument '" + name + "'");
    if (bound[i]) fail(std::string(who) + "() got multiple values for argument '" + name + "'");
    bound[i] = std::move(value);
  }
  return bound;
}

namespace {

using Args = std::vector<std::optional<Value>>;

const Value& need(const std::optional<Value>& v, std::string_view who) {
  if (!v) fail(std::string(who) + "() is missing a required argument");
  return *v;
}

const std::string& need_str(const std::optional<Value>& v, std::string_view who) {
  const Value& x = need(v, who);
  if (!x.is_string()) fail(std::string(who) + "() argument must be str, not " + x.type_name());
  return x.text();
}

// An optional str argument: nullopt or None means "not given".
const std::string* opt_str(const std::optional<Value>& v, std::string_view who) {
  if (!v || v->is_none()) return nullptr;
  return &need_str(v, who);
}

int64_t opt_int(const std::optional<Value>& v, int64_t fallback, std::string_view who) {
  if (!v || v->is_none()) return fallback;
  if (!v->is(Value::Kind::integer) && !v->is(Value::Kind::boolean)) {
    fail(std::string(who) + "(): '" + v->type_name() + "' object cannot be interpreted as an integer");
  }
  return v->as_int();
}

Value piece(const Str& s, size_t begin, size_t end) {
  StrBuilder out;
  out.append(s, begin, end);
  return Value::string(out.take());
}

// A rewritten string: data as a whole when any input byte was data.
Value rewritten(std::string text, bool any_data) { return Value::string(std::move(text), any_data); }

Value spans_to_list(const Str& s, const std::vector<pystr::Span>& spans) {
  std::vector<Value> out;
  out.reserve(spans.size());
  for (const pystr::Span& sp : spans) out.push_back(piece(s, sp.begin, sp.end));
  return Value::list(std::move(out));
}

// Byte offset of code point index `i` (clamped as Python clamps slice bounds).
size_t byte_at(const std::vector<size_t>& starts, int64_t i) {
  const int64_t n = static_cast<int64_t>(starts.size()) - 1;
  if (i < 0) i = std::max<int64_t>(0, i + n);
  return starts[std::min(i, n)];
}

int64_t char_index(const std::vector<size_t>& starts, size_t byte) {
  return std::lower_bound(starts.begin(), starts.end(), byte) - starts.begin();
}

// The [start, end) byte window of find/count/startswith's optional bounds.
std::pair<size_t, size_t> window(const std::string& s, const Args& a, size_t first, std::string_view who) {
  const std::vector<size_t> starts = pystr::char_starts(s);
  const int64_t n = static_cast<int64_t>(starts.size()) - 1;
  return {byte_at(starts, opt_int(a[first], 0, who)), byte_at(starts, opt_int(a[first + 1], n, who))};
}

Value replace(const Str& s, const Str& old, const Str& with, int64_t count) {
  StrBuilder out;
  size_t at = 0;
  int64_t done = 0;
  if (old.text.empty()) {
    const std::vector<size_t> starts = pystr::char_starts(s.text);
    for (size_t i = 0; i + 1 < starts.size(); ++i) {
      if (count < 0 || done < count) {
        out.append(with);
        ++done;
      }
      out.append(s, starts[i], starts[i + 1]);
    }
    if (count < 0 || done < count) out.append(with);
    return Value::string(out.take());
  }
  while (count < 0 || done < count) {
    const size_t hit = s.text.find(old.text, at);
    if (hit == std::string::npos) break;
    out.append(s, at, hit);
    out.append(with);
    at = hit + old.text.size();
    ++done;
  }
  out.append(s, at, s.text.size());
  return Value::string(out.take());
}

Value pad(const Str& s, int64_t width, char fill, int side /* -1 left-justify, 0 center, 1 right */) {
  const int64_t n = static_cast<int64_t>(pystr::char_count(s.text));
  if (width <= n) return Value::string(s);
  if (width > (int64_t{1} << 24)) fail("width too large");
  const int64_t total = width - n;
  // Python's center puts the odd space on the right unless both lengths are odd.
  int64_t left = side < 0 ? 0 : side > 0 ? total : total / 2 + (total & width & 1);
  StrBuilder out;
  out.append(std::string(left, fill));
  out.append(s);
  out.append(std::string(total - left, fill));
  return Value::string(out.take());
}

Value str_format(const Str& fmt, CallArgs args);

Value string_method(const Value& self, std::string_view name, CallArgs call) {
  const Str& s = self.str();
  const std::string& t = s.text;
  const bool data = !s.data.empty();
  const std::string who(name);

  if (name == "strip" || name == "lstrip" || name == "rstrip") {
    Args a = bind_args(std::move(call), {"chars"}, who);
    const pystr::Span sp = pystr::strip(t, opt_str(a[0], who), name != "rstrip", name != "lstrip");
    return piece(s, sp.begin, sp.end);
  }
  if (name == "split" || name == "rsplit") {
    Args a = bind_args(std::move(call), {"sep", "maxsplit"}, who);
    const std::string* sep = opt_str(a[0], who);
    if (sep && sep->empty()) fail("empty separator");
    const long maxsplit = static_cast<long>(opt_int(a[1], -1, who));
    return spans_to_list(s, name == "split" ? pystr::split(t, sep, maxsplit) : pystr::rsplit(t, sep, maxsplit));
  }
  if (name == "splitlines") {
    bind_args(std::move(call), {}, who);
    return spans_to_list(s, pystr::splitlines(t));
  }
  if (name == "startswith" || name == "endswith") {
    Args a = bind_args(std::move(call), {"prefix", "start", "end"}, who);
    const auto [b, e] = window(t, a, 1, who);
    const std::string_view w = b <= e ? std::string_view(t).substr(b, e - b) : std::string_view();
    std::vector<Value> options;
    const Value& p = need(a[0], who);
    if (p.is_list() && p.flavor() == ListFlavor::tuple) options = p.items();
    else options.push_back(p);
    for (const Value& o : options) {
      if (!o.is_string()) fail(who + " first arg must be str or a tuple of str, not " + o.type_name());
      if (b > e) continue;
      if (name == "startswith" ? pystr::starts_with(w, o.text()) : pystr::ends_with(w, o.text())) {
        return Value::boolean(true);
      }
    }
    return Value::boolean(false);
  }
  if (name == "upper") return (bind_args(std::move(call), {}, who), rewritten(pystr::upper(t), data));
  if (name == "lower") return (bind_args(std::move(call), {}, who), rewritten(pystr::lower(t), data));
  if (name == "title") return (bind_args(std::move(call), {}, who), rewritten(pystr::title(t), data));
  if (name == "capitalize") return (bind_args(std::move(call), {}, who), rewritten(pystr::capitalize(t), data));
  if (name == "swapcase") return (bind_args(std::move(call), {}, who), rewritten(pystr::swapcase(t), data));
  if (name == "casefold") return (bind_args(std::move(call), {}, who), rewritten(pystr::lower(t), data));
  if (name == "replace") {
    Args a = bind_args(std::move(call), {"old", "new", "count"}, who);
    need_str(a[0], who);
    need_str(a[1], who);
    return replace(s, a[0]->str(), a[1]->str(), opt_int(a[2], -1, who));
  }
  if (name == "find" || name == "rfind" || name == "index" || name == "rindex" || name == "count") {
    Args a = bind_args(std::move(call), {"sub", "start", "end"}, who);
    const std::string& sub = need_str(a[0], who);
    const auto [b, e] = window(t, a, 1, who);
    const std::vector<size_t> starts = pystr::char_starts(t);
    if (name == "count") {
      if (b > e) return Value::integer(0);
      if (sub.empty()) return Value::integer(char_index(starts, e) - char_index(starts, b) + 1);
      int64_t n = 0;
      for (size_t at = t.find(sub, b); at != std::string::npos && at + sub.size() <= e; at = t.find(sub, at + sub.size())) ++n;
      return Value::integer(n);
    }
    size_t hit = std::string::npos;
    if (b <= e && sub.size() <= e - b) {
      hit = name[0] == 'r' ? t.rfind(sub, e - sub.size()) : t.find(sub, b);
      if (hit != std::string::npos && (hit < b || hit + sub.size() > e)) hit = std::string::npos;
    }
    if (hit == std::string::npos) {
      if (name == "index" || name == "rindex") fail("substring not found");
      return Value::integer(-1);
    }
    return Value::integer(char_index(starts, hit));
  }
  if (name == "join") {
    Args a = bind_args(std::move(call), {"iterable"}, who);
    StrBuilder out;
    const std::vector<Value> items = iterate(need(a[0], who));
    for (size_t i = 0; i < items.size(); ++i) {
      if (!items[i].is_string()) {
        fail("sequence item " + std::to_string(i) + ": expected str instance, " + items[i].type_name() + " found");
      }
      if (i) out.append(s);
      out.append(items[i].str());
    }
    return Value::string(out.take());
  }
  if (name == "format") return str_format(s, std::move(call));
  if (name == "center" || name == "ljust" || name == "rjust") {
    Args a = bind_args(std::move(call), {"width", "fillchar"}, who);
    const std::string* fill = opt_str(a[1], who);
    if (fill && fill->size() != 1) fail("the fill character must be exactly one ASCII character here");
    return pad(s, opt_int(a[0], 0, who), fill ? (*fill)[0] : ' ', name == "center" ? 0 : name == "ljust" ? -1 : 1);
  }
  if (name == "zfill") {
    Args a = bind_args(std::move(call), {"width"}, who);
    const int64_t width = opt_int(a[0], 0, who);
    const int64_t n = static_cast<int64_t>(pystr::char_count(t));
    if (width <= n) return self;
    const size_t sign = !t.empty() && (t[0] == '+' || t[0] == '-') ? 1 : 0;
    StrBuilder out;
    out.append(s, 0, sign);
    out.append(std::string(width - n, '0'));
    out.append(s, sign, t.size());
    return Value::string(out.take());
  }
  if (name == "removeprefix" || name == "removesuffix") {
    Args a = bind_args(std::move(call), {"affix"}, who);
    const std::string& affix = need_str(a[0], who);
    if (name == "removeprefix" && pystr::starts_with(t, affix)) return piece(s, affix.size(), t.size());
    if (name == "removesuffix" && !affix.empty() && pystr::ends_with(t, affix)) return piece(s, 0, t.size() - affix.size());
    return self;
  }
  if (name == "partition" || name == "rpartition") {
    Args a = bind_args(std::move(call), {"sep"}, who);
    const std::string& sep = need_str(a[0], who);
    if (sep.empty()) fail("empty separator");
    const size_t hit = name == "partition" ? t.find(sep) : t.rfind(sep);
    if (hit == std::string::npos) {
      return name == "partition" ? Value::list({self, Value::string(""), Value::string("")}, ListFlavor::tuple)
                                 : Value::list({Value::string(""), Value::string(""), self}, ListFlavor::tuple);
    }
    return Value::list({piece(s, 0, hit), piece(s, hit, hit + sep.size()), piece(s, hit + sep.size(), t.size())},
                       ListFlavor::tuple);
  }
  // The is...() predicates, on ASCII classes (other letters count as alphabetic).
  auto all_chars = [&](auto pred) {
    if (t.empty()) return Value::boolean(false);
    for (size_t i = 0; i < t.size(); i += pystr::char_len(t, i)) {
      if (!pred(pystr::decode_at(t, i))) return Value::boolean(false);
    }
    return Value::boolean(true);
  };
  auto is_digit = [](char32_t c) { return c >= '0' && c <= '9'; };
  auto is_alpha = [](char32_t c) { return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= 0x80 && !pystr::is_space(c)); };
  if (name == "isdigit" || name == "isnumeric" || name == "isdecimal") return (bind_args(std::move(call), {}, who), all_chars(is_digit));
  if (name == "isalpha") return (bind_args(std::move(call), {}, who), all_chars(is_alpha));
  if (name == "isalnum") return (bind_args(std::move(call), {}, who), all_chars([&](char32_t c) { return is_digit(c) || is_alpha(c); }));
  if (name == "isspace") return (bind_args(std::move(call), {}, who), all_chars(pystr::is_space));
  if (name == "islower" || name == "isupper") {
    bind_args(std::move(call), {}, who);
    bool cased = false;
    for (char c : t) {
      if (c >= 'a' && c <= 'z') {
        if (name == "isupper") return Value::boolean(false);
        cased = true;
      } else if (c >= 'A' && c <= 'Z') {
        if (name == "islower") return Value::boolean(false);
        cased = true;
      }
    }
    return Value::boolean(cased);
  }
  fail("str." + who + " is not supported");
}

constexpr std::string_view kStringMethods[] = {
    "strip", "lstrip", "rstrip", "split", "rsplit", "splitlines", "startswith", "endswith", "upper", "lower",
    "title", "capitalize", "swapcase", "casefold", "replace", "find", "rfind", "index", "rindex", "count", "join", "format", "center",
    "ljust", "rjust", "zfill", "removeprefix", "removesuffix", "partition", "rpartition", "isdigit",
    "isnumeric", "isdecimal", "isalpha", "isalnum", "isspace", "islower", "isupper"};

// Methods that would change a value: the immutable sandbox refuses them.
constexpr std::string_view kListMutators[] = {"append", "extend", "insert", "pop", "remove", "clear", "sort", "reverse"};
constexpr std::string_view kDictMutators[] = {"pop", "popitem", "setdefault", "update", "clear"};

template <size_t N>
bool one_of(const std::string_view (&names)[N], std::string_view name) {
  return std::find(std::begin(names), std::end(names), name) != std::end(names);
}

Value dict_method(const Value& self, std::string_view name, CallArgs call) {
  const std::string who(name);
  if (name == "items" || name == "keys" || name == "values") {
    bind_args(std::move(call), {}, who);
    std::vector<Value> out;
    for (const auto& [k, v] : self.dict().entries) {
      if (name == "items") out.push_back(Value::list({k, v}, ListFlavor::tuple));
      else out.push_back(name == "keys" ? k : v);
    }
    return Value::list(std::move(out));
  }
  if (name == "get") {
    Args a = bind_args(std::move(call), {"key", "default"}, who);
    const Value* v = self.dict().find(need(a[0], who));
    if (v) return *v;
    return a[1] ? *a[1] : Value::none();
  }
  if (name == "copy") return (bind_args(std::move(call), {}, who), self);
  fail("dict." + who + " is not supported");
}

Value list_method(const Value& self, std::string_view name, CallArgs call) {
  const std::string who(name);
  Args a = bind_args(std::move(call), {"value"}, who);
  const Value& x = need(a[0], who);
  const auto& items = self.items();
  if (name == "count") return Value::integer(std::count_if(items.begin(), items.end(), [&](const Value& v) { return py_equal(v, x); }));
  for (size_t i = 0; i < items.size(); ++i) {
    if (py_equal(items[i], x)) return Value::integer(static_cast<int64_t>(i));
  }
  fail(py_repr(x) + " is not in list");
}

Value bind(const Value& self, std::string_view name, Value (*method)(const Value&, std::string_view, CallArgs)) {
  return Value::function(std::string(name), [self, name = std::string(name), method](Interpreter&, CallArgs args) {
    return method(self, name, std::move(args));
  });
}

}  // namespace

std::optional<Value> bound_method(const Value& obj, std::string_view name) {
  const bool is_list = obj.is_list() && obj.flavor() != ListFlavor::iterator;
  if ((is_list && one_of(kListMutators, name)) || (obj.is_dict() && one_of(kDictMutators, name))) {
    return Value::function(std::string(name), [name = std::string(name), type = obj.type_name()](Interpreter&, CallArgs) -> Value {
      fail("access to attribute '" + name + "' of '" + type + "' object is unsafe.");
    });
  }
  if (obj.is_string() && one_of(kStringMethods, name)) return bind(obj, name, string_method);
  if (obj.is_dict() && (name == "items" || name == "keys" || name == "values" || name == "get" || name == "copy")) {
    return bind(obj, name, dict_method);
  }
  if (is_list && (name == "count" || name == "index")) return bind(obj, name, list_method);
  return std::nullopt;
}

// --- formatting --------------------------------------------------------------

namespace {

std::string format_number(char conv, const std::string& flags, int width, int precision, const Value& v) {
  if (!v.is_number()) fail(std::string("%") + conv + " format: a real number is required, not " + v.type_name());
  std::string spec = "%" + flags;
  if (width >= 0) spec += std::to_string(width);
  if (precision >= 0) spec += "." + std::to_string(precision);
  char buf[512];
  if (conv == 'd' || conv == 'i' || conv == 'x' || conv == 'X' || conv == 'o') {
    const double d = v.as_double();
    const long long i = v.is(Value::Kind::floating) ? static_cast<long long>(std::trunc(d)) : v.as_int();
    if (conv == 'd' || conv == 'i') spec += "lld";
    else spec += std::string("ll") + conv;
    std::snprintf(buf, sizeof buf, spec.c_str(), i);
  } else {
    spec += conv;
    std::snprintf(buf, sizeof buf, spec.c_str(), v.as_double());
  }
  return buf;
}

}  // namespace

Str percent_format(const Str& fmt, const Value& args) {
  const std::string& f = fmt.text;
  std::vector<Value> positional;
  const bool mapping = args.is_dict();
  if (args.is_list() && args.flavor() == ListFlavor::tuple) positional = args.items();
  else if (!mapping) positional.push_back(args);
  size_t next = 0;
  StrBuilder out;
  size_t i = 0;
  while (i < f.size()) {
    const size_t pct = f.find('%', i);
    if (pct == std::string::npos) {
      out.append(fmt, i, f.size());
      break;
    }
    out.append(fmt, i, pct);
    size_t j = pct + 1;
    Value arg;
    bool have_arg = false;
    if (j < f.size() && f[j] == '(') {
      const size_t close = f.find(')', j);
      if (close == std::string::npos || !mapping) fail("format requires a mapping");
      const Value* v = args.dict().find(std::string_view(f).substr(j + 1, close - j - 1));
      if (!v) fail("KeyError: '" + f.substr(j + 1, close - j - 1) + "'");
      arg = *v;
      have_arg = true;
      j = close + 1;
    }
    std::string flags;
    while (j < f.size() && std::string_view("-+ #0").find(f[j]) != std::string_view::npos) flags += f[j++];
    int width = -1;
    int precision = -1;
    while (j < f.size() && f[j] >= '0' && f[j] <= '9') width = std::max(width, 0) * 10 + (f[j++] - '0');
    if (j < f.size() && f[j] == '.') {
      precision = 0;
      ++j;
      while (j < f.size() && f[j] >= '0' && f[j] <= '9') precision = precision * 10 + (f[j++] - '0');
    }
    if (j >= f.size()) fail("incomplete format");
    const char conv = f[j++];
    if (width > 4096 || precision > 4096) fail("format width too large");
    if (conv == '%') {
      out.append("%");
      i = j;
      continue;
    }
    if (!have_arg) {
      if (mapping) fail("format requires a mapping");
      if (next >= positional.size()) fail("not enough arguments for format string");
      arg = positional[next++];
    }
    if (conv == 's' || conv == 'r') {
      Str text = conv == 's' ? py_str(arg) : Str{py_repr(arg), {}};
      if (conv == 'r' && has_data(arg) && !text.text.empty()) text.data.push_back({0, text.text.size()});
      if (precision >= 0) {
        const std::vector<size_t> starts = pystr::char_starts(text.text);
        StrBuilder cut;
        cut.append(text, 0, starts[std::min<size_t>(precision, starts.size() - 1)]);
        text = cut.take();
      }
      const int64_t n = static_cast<int64_t>(pystr::char_count(text.text));
      const std::string padding(width > n ? width - n : 0, ' ');
      if (flags.find('-') == std::string::npos) out.append(padding);
      out.append(text);
      if (flags.find('-') != std::string::npos) out.append(padding);
    } else if (std::string_view("diouxXeEfFgG").find(conv) != std::string_view::npos) {
      out.append(format_number(conv, flags, width, precision, arg));
    } else {
      fail(std::string("unsupported format character '") + conv + "'");
    }
    i = j;
  }
  if (!mapping && next < positional.size()) fail("not all arguments converted during string formatting");
  return out.take();
}

namespace {

Value str_format(const Str& fmt, CallArgs args) {
  const std::string& f = fmt.text;
  StrBuilder out;
  size_t auto_index = 0;
  bool manual = false;
  bool automatic = false;
  size_t i = 0;
  size_t literal = 0;  // start of pending literal text
  while (i < f.size()) {
    const char c = f[i];
    if ((c == '{' || c == '}') && i + 1 < f.size() && f[i + 1] == c) {  // {{ or }}
      out.append(fmt, literal, i + 1);
      i += 2;
      literal = i;
      continue;
    }
    if (c == '}') fail("Single '}' encountered in format string");
    if (c != '{') {
      ++i;
      continue;
    }
    out.append(fmt, literal, i);
    const size_t close = f.find('}', i);
    if (close == std::string::npos) fail("Single '{' encountered in format string");
    std::string field = f.substr(i + 1, close - i - 1);
    char conversion = 0;
    if (const size_t bang = field.find('!'); bang != std::string::npos) {
      if (bang + 2 != field.size()) fail("format: only !r and !s conversions are supported");
      conversion = field[bang + 1];
      field.resize(bang);
    }
    if (field.find(':') != std::string::npos || field.find('.') != std::string::npos || field.find('[') != std::string::npos) {
      fail("format: format specs, attributes and indexes in fields are not supported");
    }
    Value arg;
    if (field.empty()) {
      if (manual) fail("cannot switch from manual field specification to automatic field numbering");
      automatic = true;
      if (auto_index >= args.positional.size()) fail("Replacement index " + std::to_string(auto_index) + " out of range for positional args tuple");
      arg = args.positional[auto_index++];
    } else if (std::all_of(field.begin(), field.end(), [](char d) { return d >= '0' && d <= '9'; })) {
      if (automatic) fail("cannot switch from automatic field numbering to manual field specification");
      manual = true;
      const size_t n = std::stoul(field);
      if (n >= args.positional.size()) fail("Replacement index " + field + " out of range for positional args tuple");
      arg = args.positional[n];
    } else {
      auto it = std::find_if(args.named.begin(), args.named.end(), [&](const auto& kv) { return kv.first == field; });
      if (it == args.named.end()) fail("KeyError: '" + field + "'");
      arg = it->second;
    }
    if (conversion == 'r') {
      out.append(py_repr(arg), has_data(arg));
    } else if (conversion == 's' || conversion == 0) {
      out.append(py_str(arg));
    } else {
      fail(std::string("Unknown conversion specifier ") + conversion);
    }
    i = close + 1;
    literal = i;
  }
  out.append(fmt, literal, f.size());
  return Value::string(out.take());
}

}  // namespace

}  // namespace conveyor::jinja
