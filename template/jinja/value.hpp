// The values a template computes with, modelled on the Python objects Jinja
// hands around: undefined, None, bool, int, float, str, list/tuple (and the
// iterators that filters such as map/select return), dict (insertion
// ordered), callables (filters' bound methods, macros) and namespace().
//
// Values are immutable and cheap to copy (containers are shared), as the
// sandbox forbids mutating them; the one exception is a namespace, whose
// attributes `{% set ns.x = ... %}` changes.
//
// A string carries the byte ranges of its text that came from caller data
// (Str::data). Operations that move bytes (concatenation, slicing, strip,
// split, join, replace) move the ranges with them; operations that rewrite
// bytes (upper, title, repr, tojson) mark the whole result as data when any
// input byte was.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <variant>
#include <vector>

#include "template/jinja/render_types.hpp"

namespace conveyor::jinja {

// A failure while rendering: thrown inside the interpreter, turned into an
// Error with the line at Template::render. (Exceptions keep the evaluator
// readable; none leaves the library.)
struct RenderError {
  std::string message;
};
[[noreturn]] void fail(std::string message);

// Text plus the ranges of it that are caller data.
struct Str {
  std::string text;
  std::vector<TextRange> data;  // sorted, disjoint, merged
};

// Builds a Str piece by piece, keeping the data ranges of what it appends.
class StrBuilder {
 public:
  explicit StrBuilder(size_t max_bytes = SIZE_MAX) : max_bytes_(max_bytes) {}
  void append(std::string_view text, bool is_data = false);
  void append(const Str& s) { append(s, 0, s.text.size()); }
  void append(const Str& s, size_t begin, size_t end);  // the bytes [begin, end) of s
  size_t size() const { return out_.text.size(); }
  Str take() { return std::move(out_); }
  const Str& peek() const { return out_; }

 private:
  void mark(size_t begin, size_t end);
  Str out_;
  size_t max_bytes_;
};

class Value;
class Interpreter;

struct CallArgs {
  std::vector<Value> positional;
  std::vector<std::pair<std::string, Value>> named;
};

enum class ListFlavor : uint8_t {
  list,      // [1, 2]
  tuple,     // (1, 2)
  iterator,  // what map/select/reverse/batch return: iterable once in Python, no len, always true
};

struct ListValue;
struct DictValue;
struct NamespaceValue;
struct FunctionValue;
struct Undefined {
  std::shared_ptr<const std::string> hint;  // what using it says: "'x' is undefined"
};

class Value {
 public:
  enum class Kind : uint8_t { undefined, none, boolean, integer, floating, string, list, dict, function, ns };

  Value() = default;  // undefined
  static Value undefined(std::string hint);
  static Value none() { return Value(Payload(std::in_place_index<1>, nullptr)); }
  static Value boolean(bool b) { return Value(Payload(std::in_place_index<2>, b)); }
  static Value integer(int64_t i) { return Value(Payload(std::in_place_index<3>, i)); }
  static Value floating(double d) { return Value(Payload(std::in_place_index<4>, d)); }
  static Value string(Str s);
  static Value string(std::string text, bool is_data = false);
  static Value list(std::vector<Value> items, ListFlavor flavor = ListFlavor::list);
  static Value dict(std::vector<std::pair<Value, Value>> entries);  // keys must be distinct
  static Value function(std::string name, std::function<Value(Interpreter&, CallArgs)> call);
  static Value ns(std::shared_ptr<NamespaceValue> ns);

  Kind kind() const { return static_cast<Kind>(v_.index()); }
  bool is(Kind k) const { return kind() == k; }
  bool is_undefined() const { return is(Kind::undefined); }
  bool is_none() const { return is(Kind::none); }
  bool is_string() const { return is(Kind::string); }
  bool is_number() const { return is(Kind::boolean) || is(Kind::integer) || is(Kind::floating); }
  bool is_list() const { return is(Kind::list); }  // list, tuple or iterator
  bool is_dict() const { return is(Kind::dict); }

  bool as_bool() const { return std::get<2>(v_); }
  int64_t as_int() const;     // bool or int
  double as_double() const;   // bool, int or float
  const Str& str() const { return *std::get<5>(v_); }
  const std::string& text() const { return str().text; }
  const ListValue& list() const { return *std::get<6>(v_); }
  const std::vector<Value>& items() const;
  ListFlavor flavor() const;
  const DictValue& dict() const { return *std::get<7>(v_); }
  const FunctionValue& function() const { return *std::get<8>(v_); }
  NamespaceValue& ns() const { return *std::get<9>(v_); }
  const std::string* undefined_hint() const;

  // Python's truth value (an iterator is always true, undefined false).
  bool truthy() const;
  // Python's type name, for error messages: 'str', 'NoneType', ...
  const char* type_name() const;
  // Nesting depth of lists and dicts (a scalar is 0), bounded at creation.
  int depth() const;
  // The same container shared: Python's `is` on containers.
  const void* identity() const;

 private:
  using Payload = std::variant<Undefined, std::nullptr_t, bool, int64_t, double,
                               std::shared_ptr<const Str>, std::shared_ptr<const ListValue>,
                               std::shared_ptr<const DictValue>,
                               std::shared_ptr<const FunctionValue>,
                               std::shared_ptr<NamespaceValue>>;
  explicit Value(Payload v) : v_(std::move(v)) {}
  Payload v_;
};

struct ListValue {
  std::vector<Value> items;
  ListFlavor flavor = ListFlavor::list;
  int depth = 1;
};

struct DictValue {
  std::vector<std::pair<Value, Value>> entries;  // in insertion order
  int depth = 1;
  const Value* find(const Value& key) const;
  const Value* find(std::string_view key) const;
};

struct NamespaceValue {
  std::vector<std::pair<std::string, Value>> attrs;
  bool is_loop = false;  // the `loop` of a for: read-only
  const Value* find(std::string_view name) const;
  void set(const std::string& name, Value v);
};

struct FunctionValue {
  std::string name;
  std::function<Value(Interpreter&, CallArgs)> call;
};

// The deepest list/dict nesting a template may build (and read from JSON).
inline constexpr int kMaxDepth = 200;

// Python semantics.
bool py_equal(const Value& a, const Value& b);
// a < b, or an error for types Python will not order.
bool py_less(const Value& a, const Value& b);
// str(v): strings as they are, None/True/False spelled out, containers as repr.
Str py_str(const Value& v);
// repr(v) as Python prints list items: 'a', 1.0, None, {'k': [1, 2]}.
std::string py_repr(const Value& v);
// repr of a float: shortest round-trip digits, "1.0", "1e+16", "inf".
std::string float_repr(double d);
// True when any string inside v (dict keys included) holds caller data.
bool has_data(const Value& v);

}  // namespace conveyor::jinja
