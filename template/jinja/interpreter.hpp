// Runs a parsed template: statements write to an output that keeps data
// ranges, expressions evaluate to Values.
//
// Scopes follow Jinja: a for loop's body gets a fresh scope on every
// iteration (a `set` inside it is gone at the next one: namespace() is how
// templates carry state), a macro call gets a scope whose parent is where
// the macro was defined, `if` gets none. Names not found in any scope come
// from the render context, then the globals (range, namespace, dict,
// raise_exception, strftime_now).
//
// One Interpreter renders once, on one thread.
#pragma once

#include <chrono>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include <boost/json/object.hpp>

#include "template/jinja/ast.hpp"
#include "template/jinja/operators.hpp"

namespace conveyor::jinja {

class Interpreter {
 public:
  explicit Interpreter(const RenderOptions& options);
  ~Interpreter();

  // Throws RenderError; line() then says where.
  Rendered render(const Program& program, const boost::json::object& data_context,
                  const boost::json::object& template_context);
  int line() const { return line_; }

  // For builtins: call a function value, charge work, read the clock.
  Value call(const Value& callee, CallArgs args);
  Budget& budget() { return budget_; }
  std::chrono::system_clock::time_point now() const;

 private:
  struct Scope;
  class ScopeGuard;
  std::shared_ptr<Scope> child_scope() const;
  enum class Flow : uint8_t { normal, break_, continue_ };

  Flow exec(const Body& body);
  Flow exec(const Stmt& s);
  Flow exec_for(const ForStmt& s);
  void exec_set(const Target& target, Value value);
  void exec_call_block(const CallBlockStmt& s);
  Str capture(const Body& body);  // the output of body
  Value apply_filters(const std::vector<std::unique_ptr<FilterExpr>>& filters, Value v);

  Value eval(const Expr& e);
  Value eval_binary(const BinaryExpr& e);
  Value eval_call(const CallExpr& e, const Value* caller);
  CallArgs eval_args(const Arguments& args);
  Value lookup(const std::string& name) const;

  Value make_macro(const MacroStmt& m);
  Value call_macro(const MacroStmt& m, const std::weak_ptr<Scope>& defined_in, CallArgs args);
  Value make_loop(size_t index, const std::vector<Value>& items);
  void write(const Str& s);

  Value global_range(CallArgs args);
  Value global_namespace(CallArgs args);
  Value global_dict(CallArgs args);
  Value global_strftime_now(CallArgs args);

  const RenderOptions& options_;
  Budget budget_;
  std::shared_ptr<Scope> scope_;
  std::unordered_map<std::string, Value> context_;
  std::unordered_map<std::string, Value> globals_;
  StrBuilder* out_ = nullptr;
  int line_ = 1;
  int call_depth_ = 0;
  // Every namespace made, so render() can break reference cycles among them.
  std::vector<std::shared_ptr<NamespaceValue>> namespaces_;
};

}  // namespace conveyor::jinja
