// Jinja's tests (`x is defined`, `n is divisibleby 3`), jinja2/tests.py.
#include "template/jinja/builtins.hpp"
#include "template/jinja/interpreter.hpp"

namespace conveyor::jinja {
namespace {

using TestFn = bool (*)(Interpreter&, const Value&, CallArgs);

const Value& one_arg(CallArgs& args, const char* who) {
  auto a = bind_args(std::move(args), {"other"}, who);
  if (!a[0]) fail(std::string(who) + "() is missing a required argument");
  args.positional = {*a[0]};
  return args.positional[0];
}

void no_args(CallArgs args, const char* who) { bind_args(std::move(args), {}, who); }

bool t_defined(Interpreter&, const Value& v, CallArgs a) { return no_args(std::move(a), "defined"), !v.is_undefined(); }
bool t_undefined(Interpreter&, const Value& v, CallArgs a) { return no_args(std::move(a), "undefined"), v.is_undefined(); }
bool t_none(Interpreter&, const Value& v, CallArgs a) { return no_args(std::move(a), "none"), v.is_none(); }
bool t_boolean(Interpreter&, const Value& v, CallArgs a) { return no_args(std::move(a), "boolean"), v.is(Value::Kind::boolean); }
bool t_true(Interpreter&, const Value& v, CallArgs a) { return no_args(std::move(a), "true"), v.is(Value::Kind::boolean) && v.as_bool(); }
bool t_false(Interpreter&, const Value& v, CallArgs a) { return no_args(std::move(a), "false"), v.is(Value::Kind::boolean) && !v.as_bool(); }
bool t_integer(Interpreter&, const Value& v, CallArgs a) { return no_args(std::move(a), "integer"), v.is(Value::Kind::integer); }
bool t_float(Interpreter&, const Value& v, CallArgs a) { return no_args(std::move(a), "float"), v.is(Value::Kind::floating); }
bool t_number(Interpreter&, const Value& v, CallArgs a) { return no_args(std::move(a), "number"), v.is_number(); }
bool t_string(Interpreter&, const Value& v, CallArgs a) { return no_args(std::move(a), "string"), v.is_string(); }
bool t_mapping(Interpreter&, const Value& v, CallArgs a) { return no_args(std::move(a), "mapping"), v.is_dict(); }

// len() and [] both work: str, list, tuple, dict, and Undefined (which has both).
bool t_sequence(Interpreter&, const Value& v, CallArgs a) {
  no_args(std::move(a), "sequence");
  return v.is_string() || v.is_dict() || v.is_undefined() || (v.is_list() && v.flavor() != ListFlavor::iterator);
}

bool t_iterable(Interpreter&, const Value& v, CallArgs a) {
  no_args(std::move(a), "iterable");
  return v.is_string() || v.is_dict() || v.is_list() || v.is_undefined();
}

bool t_callable(Interpreter&, const Value& v, CallArgs a) {
  no_args(std::move(a), "callable");
  return v.is(Value::Kind::function) || v.is_undefined();
}

bool parity(Interpreter& in, const Value& v, CallArgs a, const char* who, int64_t want) {
  no_args(std::move(a), who);
  return binary_op(BinaryOp::mod, v, Value::integer(2), in.budget()).as_double() == static_cast<double>(want);
}

bool t_odd(Interpreter& in, const Value& v, CallArgs a) { return parity(in, v, std::move(a), "odd", 1); }
bool t_even(Interpreter& in, const Value& v, CallArgs a) { return parity(in, v, std::move(a), "even", 0); }

bool t_divisibleby(Interpreter& in, const Value& v, CallArgs a) {
  const Value by = one_arg(a, "divisibleby");
  return binary_op(BinaryOp::mod, v, by, in.budget()).as_double() == 0.0;
}

template <CompareOp Op>
bool t_compare(Interpreter&, const Value& v, CallArgs a) {
  const Value other = one_arg(a, "compare");
  return compare(Op, v, other);
}

bool t_in(Interpreter&, const Value& v, CallArgs a) {
  const Value seq = one_arg(a, "in");
  return contains(seq, v);
}

bool t_lower(Interpreter&, const Value& v, CallArgs a) {
  no_args(std::move(a), "lower");
  bool cased = false;
  for (char c : py_str(v).text) {
    if (c >= 'A' && c <= 'Z') return false;
    cased |= c >= 'a' && c <= 'z';
  }
  return cased;
}

bool t_upper(Interpreter&, const Value& v, CallArgs a) {
  no_args(std::move(a), "upper");
  bool cased = false;
  for (char c : py_str(v).text) {
    if (c >= 'a' && c <= 'z') return false;
    cased |= c >= 'A' && c <= 'Z';
  }
  return cased;
}

// Python's `is`: singletons and small ints by value, containers by identity.
bool t_sameas(Interpreter&, const Value& v, CallArgs a) {
  const Value other = one_arg(a, "sameas");
  if (v.kind() != other.kind()) return false;
  switch (v.kind()) {
    case Value::Kind::none:
    case Value::Kind::undefined: return v.is_none();
    case Value::Kind::boolean: return v.as_bool() == other.as_bool();
    case Value::Kind::integer: return v.as_int() == other.as_int() && v.as_int() >= -5 && v.as_int() <= 256;
    case Value::Kind::floating: return false;
    default: return v.identity() == other.identity();
  }
}

bool t_escaped(Interpreter&, const Value&, CallArgs a) { return no_args(std::move(a), "escaped"), false; }

bool t_filter(Interpreter&, const Value& v, CallArgs a) { return no_args(std::move(a), "filter"), v.is_string() && is_filter(v.text()); }
bool t_test(Interpreter&, const Value& v, CallArgs a) { return no_args(std::move(a), "test"), v.is_string() && is_test(v.text()); }

struct Test {
  std::string_view name;
  TestFn fn;
};

constexpr Test kTests[] = {
    {"defined", t_defined},   {"undefined", t_undefined}, {"none", t_none},          {"boolean", t_boolean},
    {"true", t_true},         {"false", t_false},         {"integer", t_integer},    {"float", t_float},
    {"number", t_number},     {"string", t_string},       {"mapping", t_mapping},    {"sequence", t_sequence},
    {"iterable", t_iterable}, {"callable", t_callable},   {"odd", t_odd},            {"even", t_even},
    {"divisibleby", t_divisibleby},
    {"eq", t_compare<CompareOp::eq>},  {"equalto", t_compare<CompareOp::eq>}, {"==", t_compare<CompareOp::eq>},
    {"ne", t_compare<CompareOp::ne>},  {"!=", t_compare<CompareOp::ne>},
    {"lt", t_compare<CompareOp::lt>},  {"lessthan", t_compare<CompareOp::lt>}, {"<", t_compare<CompareOp::lt>},
    {"le", t_compare<CompareOp::le>},  {"<=", t_compare<CompareOp::le>},
    {"gt", t_compare<CompareOp::gt>},  {"greaterthan", t_compare<CompareOp::gt>}, {">", t_compare<CompareOp::gt>},
    {"ge", t_compare<CompareOp::ge>},  {">=", t_compare<CompareOp::ge>},
    {"in", t_in},             {"lower", t_lower},         {"upper", t_upper},        {"sameas", t_sameas},
    {"escaped", t_escaped},   {"filter", t_filter},       {"test", t_test},
};

const Test* find_test(std::string_view name) {
  for (const Test& t : kTests) {
    if (t.name == name) return &t;
  }
  return nullptr;
}

}  // namespace

bool is_test(std::string_view name) { return find_test(name) != nullptr; }

bool apply_test(Interpreter& in, std::string_view name, const Value& operand, CallArgs args) {
  const Test* t = find_test(name);
  if (!t) fail("No test named '" + std::string(name) + "'.");
  return t->fn(in, operand, std::move(args));
}

}  // namespace conveyor::jinja
