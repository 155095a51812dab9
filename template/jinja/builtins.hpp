// What a template can call by name: the methods of str, dict and list that
// the immutable sandbox allows (methods.cpp), Jinja's filters and tests
// (filters.cpp, tests.cpp), and the globals (interpreter.cpp).
#pragma once

#include <initializer_list>
#include <optional>
#include <string_view>
#include <vector>

#include "template/jinja/value.hpp"

namespace conveyor::jinja {

class Interpreter;

// Binds Python-style arguments to parameter names in order; a parameter not
// passed is nullopt. Too many arguments or an unknown keyword is an error
// naming `who`.
std::vector<std::optional<Value>> bind_args(CallArgs args, std::initializer_list<std::string_view> params,
                                            std::string_view who);

// obj.name as a bound method (str.strip, dict.items, list.count, ...).
std::optional<Value> bound_method(const Value& obj, std::string_view name);

// Python's printf-style `fmt % args`.
Str percent_format(const Str& fmt, const Value& args);

// `operand | name(args)`; an unknown filter is an error.
Value apply_filter(Interpreter& in, std::string_view name, const Value& operand, CallArgs args);
bool is_filter(std::string_view name);

// `operand is name(args)`; an unknown test is an error.
bool apply_test(Interpreter& in, std::string_view name, const Value& operand, CallArgs args);
bool is_test(std::string_view name);

}  // namespace conveyor::jinja
