// Python's operators on Values, as the sandbox applies them: arithmetic,
// comparison, `in`, attribute and item lookup (methods first for `.`, items
// first for `[]`; a missing one is undefined), slicing and iteration.
// Type errors are RenderErrors with Python's message.
#pragma once

#include <optional>
#include <string_view>
#include <vector>

#include "template/jinja/ast.hpp"
#include "template/jinja/value.hpp"

namespace conveyor::jinja {

// Bounds sizes and counts work for the values operators build.
class Budget {
 public:
  explicit Budget(const RenderLimits& limits) : limits_(limits) {}
  // `n` steps of evaluation (one a statement or expression), or `units`
  // bytes/elements built (at 1/16 the cost).
  void step(uint64_t n = 1) {
    steps_ += n;
    if (steps_ > limits_.max_steps) exhausted();
  }
  void charge(size_t units) {
    steps_ += units / 16;
    if (steps_ > limits_.max_steps) exhausted();
  }
  // A string of `bytes` or a list of `n` elements is about to be built.
  void check_size(size_t n) const;
  const RenderLimits& limits() const { return limits_; }

 private:
  [[noreturn]] void exhausted() const;
  const RenderLimits& limits_;
  uint64_t steps_ = 0;
};

// + - * / // % ** (and/or/~ are the interpreter's).
Value binary_op(BinaryOp op, const Value& a, const Value& b, Budget& budget);
Value negate(const Value& v, bool minus);
bool compare(CompareOp op, const Value& a, const Value& b);
bool contains(const Value& container, const Value& item);

Value get_attr(const Value& obj, std::string_view name);
Value get_item(const Value& obj, const Value& key);
// obj[start:stop:step]; an unset part is nullopt.
Value slice(const Value& obj, const std::optional<Value>& start, const std::optional<Value>& stop,
            const std::optional<Value>& step, Budget& budget);

// What `for x in v` sees: characters of a string, keys of a dict, nothing
// for undefined; an error for what Python cannot iterate.
std::vector<Value> iterate(const Value& v);
// Python len(); an error for what has none.
size_t py_len(const Value& v);

// The error an undefined value raises when used.
[[noreturn]] void undefined_error(const Value& u);

}  // namespace conveyor::jinja
