#include "template/jinja/operators.hpp"

#include <cmath>
#include <limits>

#include "template/jinja/builtins.hpp"
#include "template/jinja/pystr.hpp"

namespace conveyor::jinja {

void Budget::check_size(size_t n) const {
  if (n > limits_.max_output_bytes) fail("a value is larger than the output limit");
}

void Budget::exhausted() const {
  fail("the template did more work than the limit of " + std::to_string(limits_.max_steps) + " steps");
}

void undefined_error(const Value& u) {
  const std::string* hint = u.undefined_hint();
  fail(hint ? *hint : "undefined value");
}

namespace {

const char* op_symbol(BinaryOp op) {
  switch (op) {
    case BinaryOp::add: return "+";
    case BinaryOp::sub: return "-";
    case BinaryOp::mul: return "*";
    case BinaryOp::div: return "/";
    case BinaryOp::floordiv: return "//";
    case BinaryOp::mod: return "%";
    case BinaryOp::pow: return "** or pow()";
    default: return "?";
  }
}

[[noreturn]] void unsupported(BinaryOp op, const Value& a, const Value& b) {
  fail(std::string("unsupported operand type(s) for ") + op_symbol(op) + ": '" + a.type_name() + "' and '" +
       b.type_name() + "'");
}

bool is_float(const Value& v) { return v.is(Value::Kind::floating); }
bool is_intlike(const Value& v) { return v.is(Value::Kind::integer) || v.is(Value::Kind::boolean); }

void check_overflow(bool overflow) {
  if (overflow) fail("integer overflow (conveyor's integers are 64-bit)");
}

Value int_pow(int64_t base, int64_t exp) {
  int64_t result = 1;
  while (exp > 0) {
    if (exp & 1) check_overflow(__builtin_mul_overflow(result, base, &result));
    exp >>= 1;
    if (exp) check_overflow(__builtin_mul_overflow(base, base, &base));
  }
  return Value::integer(result);
}

double py_float_mod(double a, double b) {
  double mod = std::fmod(a, b);
  if (mod != 0.0) {
    if ((b < 0) != (mod < 0)) mod += b;
  } else {
    mod = std::copysign(0.0, b);
  }
  return mod;
}

double py_float_floordiv(double a, double b) {
  double mod = std::fmod(a, b);
  double div = (a - mod) / b;
  if (mod != 0.0 && ((b < 0) != (mod < 0))) div -= 1.0;
  if (div == 0.0) return std::copysign(0.0, a / b);
  double floordiv = std::floor(div);
  if (div - floordiv > 0.5) floordiv += 1.0;
  return floordiv;
}

Value arithmetic(BinaryOp op, const Value& a, const Value& b) {
  if (!is_float(a) && !is_float(b)) {
    const int64_t x = a.as_int();
    const int64_t y = b.as_int();
    int64_t r = 0;
    switch (op) {
      case BinaryOp::add: check_overflow(__builtin_add_overflow(x, y, &r)); return Value::integer(r);
      case BinaryOp::sub: check_overflow(__builtin_sub_overflow(x, y, &r)); return Value::integer(r);
      case BinaryOp::mul: check_overflow(__builtin_mul_overflow(x, y, &r)); return Value::integer(r);
      case BinaryOp::div:
        if (y == 0) fail("division by zero");
        return Value::floating(static_cast<double>(x) / static_cast<double>(y));
      case BinaryOp::floordiv:
      case BinaryOp::mod: {
        if (y == 0) fail("integer division or modulo by zero");
        if (x == std::numeric_limits<int64_t>::min() && y == -1) fail("integer overflow");
        int64_t q = x / y;
        int64_t m = x % y;
        if (m != 0 && ((m < 0) != (y < 0))) {
          --q;
          m += y;
        }
        return Value::integer(op == BinaryOp::mod ? m : q);
      }
      case BinaryOp::pow:
        if (y >= 0) return int_pow(x, y);
        if (x == 0) fail("0.0 cannot be raised to a negative power");
        return Value::floating(std::pow(static_cast<double>(x), static_cast<double>(y)));
      default: break;
    }
  }
  const double x = a.as_double();
  const double y = b.as_double();
  switch (op) {
    case BinaryOp::add: return Value::floating(x + y);
    case BinaryOp::sub: return Value::floating(x - y);
    case BinaryOp::mul: return Value::floating(x * y);
    case BinaryOp::div:
      if (y == 0) fail("float division by zero");
      return Value::floating(x / y);
    case BinaryOp::floordiv:
      if (y == 0) fail("float floor division by zero");
      return Value::floating(py_float_floordiv(x, y));
    case BinaryOp::mod:
      if (y == 0) fail("float modulo");
      return Value::floating(py_float_mod(x, y));
    case BinaryOp::pow:
      if (x == 0 && y < 0) fail("0.0 cannot be raised to a negative power");
      if (x < 0 && y != std::floor(y)) fail("a negative number to a fractional power is complex");
      return Value::floating(std::pow(x, y));
    default: break;
  }
  unsupported(op, a, b);
}

Value repeat(const Value& seq, int64_t times, Budget& budget) {
  if (times < 0) times = 0;
  if (seq.is_string()) {
    const Str& s = seq.str();
    if (!s.text.empty() && static_cast<uint64_t>(times) > budget.limits().max_output_bytes / s.text.size()) {
      budget.check_size(SIZE_MAX);
    }
    budget.charge(s.text.size() * times);
    StrBuilder out;
    for (int64_t i = 0; i < times; ++i) out.append(s);
    return Value::string(out.take());
  }
  const auto& items = seq.items();
  if (!items.empty() && static_cast<uint64_t>(times) > budget.limits().max_output_bytes / items.size()) {
    budget.check_size(SIZE_MAX);
  }
  budget.charge(items.size() * times);
  std::vector<Value> out;
  for (int64_t i = 0; i < times; ++i) out.insert(out.end(), items.begin(), items.end());
  return Value::list(std::move(out), seq.flavor());
}

bool is_sequence(const Value& v) { return v.is_string() || (v.is_list() && v.flavor() != ListFlavor::iterator); }

}  // namespace

Value binary_op(BinaryOp op, const Value& a, const Value& b, Budget& budget) {
  if (a.is_undefined()) undefined_error(a);
  if (b.is_undefined()) undefined_error(b);
  if (a.is_number() && b.is_number()) return arithmetic(op, a, b);
  if (op == BinaryOp::add) {
    if (a.is_string() && b.is_string()) {
      budget.check_size(a.text().size() + b.text().size());
      budget.charge(a.text().size() + b.text().size());
      StrBuilder out;
      out.append(a.str());
      out.append(b.str());
      return Value::string(out.take());
    }
    if (a.is_list() && b.is_list() && a.flavor() == b.flavor() && a.flavor() != ListFlavor::iterator) {
      budget.check_size(a.items().size() + b.items().size());
      budget.charge(a.items().size() + b.items().size());
      std::vector<Value> items = a.items();
      items.insert(items.end(), b.items().begin(), b.items().end());
      return Value::list(std::move(items), a.flavor());
    }
    if (a.is_string() || a.is_list()) {
      fail(std::string("can only concatenate ") + a.type_name() + " (not \"" + b.type_name() + "\") to " +
           a.type_name());
    }
  }
  if (op == BinaryOp::mul) {
    if (is_sequence(a) && is_intlike(b)) return repeat(a, b.as_int(), budget);
    if (is_intlike(a) && is_sequence(b)) return repeat(b, a.as_int(), budget);
  }
  if (op == BinaryOp::mod && a.is_string()) return Value::string(percent_format(a.str(), b));
  unsupported(op, a, b);
}

Value negate(const Value& v, bool minus) {
  if (v.is_undefined()) undefined_error(v);
  if (is_float(v)) return Value::floating(minus ? -v.as_double() : v.as_double());
  if (is_intlike(v)) {
    if (minus && v.as_int() == std::numeric_limits<int64_t>::min()) fail("integer overflow");
    return Value::integer(minus ? -v.as_int() : v.as_int());
  }
  fail(std::string("bad operand type for unary ") + (minus ? "-" : "+") + ": '" + v.type_name() + "'");
}

bool compare(CompareOp op, const Value& a, const Value& b) {
  switch (op) {
    case CompareOp::eq: return py_equal(a, b);
    case CompareOp::ne: return !py_equal(a, b);
    case CompareOp::lt: return py_less(a, b);
    case CompareOp::gt: return py_less(b, a);
    case CompareOp::le: return py_less(a, b) || py_equal(a, b);
    case CompareOp::ge: return py_less(b, a) || py_equal(a, b);
    case CompareOp::in: return contains(b, a);
    case CompareOp::not_in: return !contains(b, a);
  }
  return false;
}

bool contains(const Value& container, const Value& item) {
  switch (container.kind()) {
    case Value::Kind::undefined: return false;
    case Value::Kind::string:
      if (!item.is_string()) {
        fail(std::string("'in <string>' requires string as left operand, not ") + item.type_name());
      }
      return container.text().find(item.text()) != std::string::npos;
    case Value::Kind::list:
      for (const Value& v : container.items()) {
        if (py_equal(v, item)) return true;
      }
      return false;
    case Value::Kind::dict: return container.dict().find(item) != nullptr;
    default: fail(std::string("argument of type '") + container.type_name() + "' is not iterable");
  }
}

namespace {

Value no_attribute(const Value& obj, std::string_view name) {
  return Value::undefined(std::string("'") + obj.type_name() + " object' has no attribute '" + std::string(name) + "'");
}

}  // namespace

Value get_attr(const Value& obj, std::string_view name) {
  if (obj.is_undefined()) undefined_error(obj);
  if (obj.is(Value::Kind::ns)) {
    const Value* v = obj.ns().find(name);
    return v ? *v : no_attribute(obj, name);
  }
  if (std::optional<Value> m = bound_method(obj, name)) return *m;
  if (obj.is_dict()) {
    if (const Value* v = obj.dict().find(name)) return *v;
  }
  return no_attribute(obj, name);
}

Value get_item(const Value& obj, const Value& key) {
  if (obj.is_undefined()) undefined_error(obj);
  if (obj.is_dict()) {
    if (const Value* v = obj.dict().find(key)) return *v;
  } else if ((is_sequence(obj)) && is_intlike(key)) {
    const int64_t n = static_cast<int64_t>(py_len(obj));
    int64_t i = key.as_int();
    if (i < 0) i += n;
    if (i >= 0 && i < n) {
      if (obj.is_list()) return obj.items()[i];
      const std::vector<size_t> starts = pystr::char_starts(obj.text());
      StrBuilder out;
      out.append(obj.str(), starts[i], starts[i + 1]);
      return Value::string(out.take());
    }
    return Value::undefined(std::string(obj.type_name()) + " object has no element " + std::to_string(key.as_int()));
  }
  if (key.is_string()) {
    if (obj.is(Value::Kind::ns)) return get_attr(obj, key.text());
    if (std::optional<Value> m = bound_method(obj, key.text())) return *m;
  }
  return Value::undefined(std::string(obj.type_name()) + " object has no element " + py_repr(key));
}

Value slice(const Value& obj, const std::optional<Value>& start, const std::optional<Value>& stop,
            const std::optional<Value>& step, Budget& budget) {
  if (obj.is_undefined()) undefined_error(obj);
  auto index = [](const std::optional<Value>& v, bool* ok) -> std::optional<int64_t> {
    if (!v || v->is_none()) return std::nullopt;
    if (!is_intlike(*v)) *ok = false;
    return *ok ? std::optional<int64_t>(v->as_int()) : std::nullopt;
  };
  bool ok = true;
  const auto a = index(start, &ok);
  const auto b = index(stop, &ok);
  const auto c = index(step, &ok);
  if (!ok || !is_sequence(obj)) return Value::undefined("the value cannot be sliced");
  const int64_t s = c.value_or(1);
  if (s == 0) fail("slice step cannot be zero");

  const std::vector<size_t> starts = obj.is_string() ? pystr::char_starts(obj.text()) : std::vector<size_t>{};
  const int64_t n = obj.is_string() ? static_cast<int64_t>(starts.size()) - 1 : static_cast<int64_t>(obj.items().size());
  auto adjust = [n, s](std::optional<int64_t> v, bool is_start) {
    if (!v) return is_start ? (s < 0 ? n - 1 : 0) : (s < 0 ? -1 : n);
    int64_t i = *v;
    if (i < 0) {
      i += n;
      if (i < 0) i = s < 0 ? -1 : 0;
    } else if (i >= n) {
      i = s < 0 ? n - 1 : n;
    }
    return i;
  };
  const int64_t from = adjust(a, true);
  const int64_t to = adjust(b, false);
  budget.charge(static_cast<size_t>(n));

  if (obj.is_string()) {
    StrBuilder out;
    if (s == 1) {
      if (from < to) out.append(obj.str(), starts[from], starts[to]);
    } else {
      for (int64_t i = from; s > 0 ? i < to : i > to; i += s) out.append(obj.str(), starts[i], starts[i + 1]);
    }
    return Value::string(out.take());
  }
  std::vector<Value> items;
  for (int64_t i = from; s > 0 ? i < to : i > to; i += s) items.push_back(obj.items()[i]);
  return Value::list(std::move(items), obj.flavor());
}

std::vector<Value> iterate(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::undefined: return {};
    case Value::Kind::string: {
      std::vector<Value> chars;
      const std::vector<size_t> starts = pystr::char_starts(v.text());
      for (size_t i = 0; i + 1 < starts.size(); ++i) {
        StrBuilder out;
        out.append(v.str(), starts[i], starts[i + 1]);
        chars.push_back(Value::string(out.take()));
      }
      return chars;
    }
    case Value::Kind::list: return v.items();
    case Value::Kind::dict: {
      std::vector<Value> keys;
      for (const auto& [k, x] : v.dict().entries) keys.push_back(k);
      return keys;
    }
    default: fail(std::string("'") + v.type_name() + "' object is not iterable");
  }
}

size_t py_len(const Value& v) {
  switch (v.kind()) {
    case Value::Kind::undefined: return 0;
    case Value::Kind::string: return pystr::char_count(v.text());
    case Value::Kind::list:
      if (v.flavor() == ListFlavor::iterator) break;
      return v.items().size();
    case Value::Kind::dict: return v.dict().entries.size();
    default: break;
  }
  fail(std::string("object of type '") + v.type_name() + "' has no len()");
}

}  // namespace conveyor::jinja
