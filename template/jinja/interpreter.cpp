#include "template/jinja/interpreter.hpp"

#include <algorithm>
#include <ctime>

#include "template/jinja/builtins.hpp"
#include "template/jinja/json.hpp"

namespace conveyor::jinja {

struct Interpreter::Scope {
  std::shared_ptr<Scope> parent;
  std::vector<std::pair<std::string, Value>> vars;

  const Value* find(std::string_view name) const {
    for (const auto& [k, v] : vars) {
      if (k == name) return &v;
    }
    return nullptr;
  }
  void set(const std::string& name, Value v) {
    for (auto& [k, old] : vars) {
      if (k == name) {
        old = std::move(v);
        return;
      }
    }
    vars.emplace_back(name, std::move(v));
  }
};

// Makes `scope` current for its lifetime, then restores the one before.
class Interpreter::ScopeGuard {
 public:
  ScopeGuard(Interpreter& in, std::shared_ptr<Scope> scope) : in_(in), saved_(std::move(scope)) {
    std::swap(in_.scope_, saved_);
  }
  ~ScopeGuard() { std::swap(in_.scope_, saved_); }
  ScopeGuard(const ScopeGuard&) = delete;
  ScopeGuard& operator=(const ScopeGuard&) = delete;

 private:
  Interpreter& in_;
  std::shared_ptr<Scope> saved_;
};

std::shared_ptr<Interpreter::Scope> Interpreter::child_scope() const {
  auto scope = std::make_shared<Scope>();
  scope->parent = scope_;
  return scope;
}

bool is_global_function(std::string_view name) {
  // The names the constructor below defines.
  static constexpr std::string_view kNames[] = {"range", "namespace", "dict", "strftime_now", "raise_exception"};
  return std::find(std::begin(kNames), std::end(kNames), name) != std::end(kNames);
}

Interpreter::Interpreter(const RenderOptions& options) : options_(options), budget_(options.limits) {
  auto global = [this](const char* name, Value (Interpreter::*fn)(CallArgs)) {
    globals_[name] = Value::function(name, [fn](Interpreter& in, CallArgs args) { return (in.*fn)(std::move(args)); });
  };
  global("range", &Interpreter::global_range);
  global("namespace", &Interpreter::global_namespace);
  global("dict", &Interpreter::global_dict);
  global("strftime_now", &Interpreter::global_strftime_now);
  globals_["raise_exception"] = Value::function("raise_exception", [](Interpreter&, CallArgs args) -> Value {
    auto a = bind_args(std::move(args), {"message"}, "raise_exception");
    fail(a[0] ? py_str(*a[0]).text : std::string());
  });
}

Interpreter::~Interpreter() {
  // Namespaces may hold each other (ns.a = ns): empty them so they free.
  for (const auto& ns : namespaces_) ns->attrs.clear();
}

Rendered Interpreter::render(const Program& program, const boost::json::object& data_context,
                             const boost::json::object& template_context) {
  for (const auto& kv : data_context) context_[std::string(kv.key())] = from_json(kv.value(), true);
  for (const auto& kv : template_context) context_[std::string(kv.key())] = from_json(kv.value(), false);
  scope_ = std::make_shared<Scope>();
  StrBuilder out(options_.limits.max_output_bytes);
  out_ = &out;
  exec(program.body);
  Str s = out.take();
  return Rendered{std::move(s.text), std::move(s.data)};
}

std::chrono::system_clock::time_point Interpreter::now() const {
  return options_.now ? *options_.now : std::chrono::system_clock::now();
}

void Interpreter::write(const Str& s) {
  budget_.charge(s.text.size());
  out_->append(s);
}

Str Interpreter::capture(const Body& body) {
  StrBuilder local(options_.limits.max_output_bytes);
  StrBuilder* saved = out_;
  out_ = &local;
  try {
    exec(body);
  } catch (...) {
    out_ = saved;
    throw;
  }
  out_ = saved;
  return local.take();
}

// --- statements --------------------------------------------------------------

Interpreter::Flow Interpreter::exec(const Body& body) {
  for (const StmtPtr& s : body) {
    const Flow f = exec(*s);
    if (f != Flow::normal) return f;
  }
  return Flow::normal;
}

Interpreter::Flow Interpreter::exec(const Stmt& s) {
  budget_.step();
  line_ = s.line;
  switch (s.kind) {
    case Stmt::Kind::text: write(Str{static_cast<const TextStmt&>(s).text, {}}); break;
    case Stmt::Kind::print: write(py_str(eval(*static_cast<const PrintStmt&>(s).expr))); break;
    case Stmt::Kind::if_: {
      const auto& x = static_cast<const IfStmt&>(s);
      for (const auto& [test, body] : x.branches) {
        if (eval(*test).truthy()) return exec(body);
      }
      return exec(x.otherwise);
    }
    case Stmt::Kind::for_: return exec_for(static_cast<const ForStmt&>(s));
    case Stmt::Kind::set: {
      const auto& x = static_cast<const SetStmt&>(s);
      exec_set(x.target, eval(*x.value));
      break;
    }
    case Stmt::Kind::set_block: {
      const auto& x = static_cast<const SetBlockStmt&>(s);
      exec_set(x.target, apply_filters(x.filters, Value::string(capture(x.body))));
      break;
    }
    case Stmt::Kind::macro: {
      const auto& m = static_cast<const MacroStmt&>(s);
      scope_->set(m.name, make_macro(m));
      break;
    }
    case Stmt::Kind::call_block: exec_call_block(static_cast<const CallBlockStmt&>(s)); break;
    case Stmt::Kind::filter_block: {
      const auto& x = static_cast<const FilterBlockStmt&>(s);
      write(py_str(apply_filters(x.filters, Value::string(capture(x.body)))));
      break;
    }
    case Stmt::Kind::with: {
      const auto& x = static_cast<const WithStmt&>(s);
      std::vector<Value> values;  // evaluated in the enclosing scope
      for (const auto& [target, expr] : x.assignments) values.push_back(eval(*expr));
      ScopeGuard inner(*this, child_scope());
      for (size_t i = 0; i < values.size(); ++i) exec_set(x.assignments[i].first, values[i]);
      return exec(x.body);
    }
    case Stmt::Kind::break_: return Flow::break_;
    case Stmt::Kind::continue_: return Flow::continue_;
    case Stmt::Kind::scope: {  // transformers runs it as a call block: a scope of its own
      ScopeGuard inner(*this, child_scope());
      exec(static_cast<const ScopeStmt&>(s).body);
      break;
    }
  }
  return Flow::normal;
}

void Interpreter::exec_set(const Target& target, Value value) {
  switch (target.kind) {
    case Target::Kind::name: scope_->set(target.name, std::move(value)); return;
    case Target::Kind::ns_attr: {
      const Value ns = lookup(target.name);
      if (!ns.is(Value::Kind::ns) || ns.ns().is_loop) fail("cannot assign attribute on non-namespace object");
      ns.ns().set(target.attr, std::move(value));
      return;
    }
    case Target::Kind::tuple: {
      const std::vector<Value> items = iterate(value);
      const size_t want = target.items.size();
      if (items.size() < want) {
        fail("not enough values to unpack (expected " + std::to_string(want) + ", got " + std::to_string(items.size()) + ")");
      }
      if (items.size() > want) fail("too many values to unpack (expected " + std::to_string(want) + ")");
      for (size_t i = 0; i < want; ++i) exec_set(target.items[i], items[i]);
      return;
    }
  }
}

Interpreter::Flow Interpreter::exec_for(const ForStmt& s) {
  std::vector<Value> items = iterate(eval(*s.iterable));
  budget_.charge(items.size());
  const std::shared_ptr<Scope> outer = scope_;
  ScopeGuard restore(*this, outer);
  auto iteration_scope = [&](const Value& item) {  // every iteration starts afresh
    scope_ = std::make_shared<Scope>();
    scope_->parent = outer;
    exec_set(s.target, item);
  };
  // An iteration's scope (and loop object) costs as much as several
  // statements: an empty body still spends the budget.
  constexpr uint64_t kIterationSteps = 8;
  if (s.filter) {
    std::vector<Value> kept;
    for (Value& item : items) {
      budget_.step(kIterationSteps);
      iteration_scope(item);
      if (eval(*s.filter).truthy()) kept.push_back(std::move(item));
    }
    items = std::move(kept);
  }
  if (items.empty()) {
    scope_ = outer;
    return exec(s.otherwise);
  }
  for (size_t i = 0; i < items.size(); ++i) {
    budget_.step(kIterationSteps);
    iteration_scope(items[i]);
    scope_->set("loop", make_loop(i, items));
    if (exec(s.body) == Flow::break_) break;
  }
  return Flow::normal;
}

Value Interpreter::make_loop(size_t index, const std::vector<Value>& items) {
  auto loop = std::make_shared<NamespaceValue>();
  loop->is_loop = true;
  const auto i = static_cast<int64_t>(index);
  const auto n = static_cast<int64_t>(items.size());
  loop->attrs.reserve(12);
  loop->attrs = {
      {"index", Value::integer(i + 1)},      {"index0", Value::integer(i)},
      {"revindex", Value::integer(n - i)},   {"revindex0", Value::integer(n - i - 1)},
      {"first", Value::boolean(i == 0)},     {"last", Value::boolean(i == n - 1)},
      {"length", Value::integer(n)},         {"depth", Value::integer(1)},
      {"depth0", Value::integer(0)},
  };
  if (i > 0) loop->attrs.emplace_back("previtem", items[index - 1]);
  if (i + 1 < n) loop->attrs.emplace_back("nextitem", items[index + 1]);
  loop->attrs.emplace_back("cycle", Value::function("cycle", [i](Interpreter&, CallArgs args) {
    if (args.positional.empty()) fail("no items for cycling given");
    return args.positional[static_cast<size_t>(i) % args.positional.size()];
  }));
  return Value::ns(std::move(loop));
}

Value Interpreter::apply_filters(const std::vector<std::unique_ptr<FilterExpr>>& filters, Value v) {
  for (const auto& f : filters) {
    line_ = f->line;
    v = apply_filter(*this, f->name, v, eval_args(f->args));
  }
  return v;
}

void Interpreter::exec_call_block(const CallBlockStmt& s) {
  const Value caller = make_macro(*s.caller);
  write(py_str(eval_call(static_cast<const CallExpr&>(*s.call), &caller)));
}

// --- macros ------------------------------------------------------------------

Value Interpreter::make_macro(const MacroStmt& m) {
  std::weak_ptr<Scope> defined_in = scope_;
  return Value::function(m.name, [&m, defined_in](Interpreter& in, CallArgs args) {
    return in.call_macro(m, defined_in, std::move(args));
  });
}

Value Interpreter::call_macro(const MacroStmt& m, const std::weak_ptr<Scope>& defined_in, CallArgs args) {
  auto scope = std::make_shared<Scope>();
  scope->parent = defined_in.lock();
  if (!scope->parent) fail("macro '" + m.name + "' called outside the scope that defined it");
  if (call_depth_ >= options_.limits.max_call_depth) {
    fail("macro calls nest deeper than " + std::to_string(options_.limits.max_call_depth));
  }

  if (args.positional.size() > m.params.size() && !m.uses_varargs) {
    fail("macro '" + m.name + "' takes not more than " + std::to_string(m.params.size()) + " argument(s)");
  }
  std::vector<bool> given(m.params.size(), false);
  for (size_t i = 0; i < args.positional.size() && i < m.params.size(); ++i) {
    scope->set(m.params[i].first, args.positional[i]);
    given[i] = true;
  }
  std::vector<Value> varargs;
  for (size_t i = m.params.size(); i < args.positional.size(); ++i) varargs.push_back(args.positional[i]);
  std::vector<std::pair<Value, Value>> kwargs;
  for (auto& [name, value] : args.named) {
    size_t i = 0;
    while (i < m.params.size() && m.params[i].first != name) ++i;
    if (i < m.params.size()) {
      if (given[i]) fail("macro '" + m.name + "' got multiple values for argument '" + name + "'");
      scope->set(name, std::move(value));
      given[i] = true;
    } else if (name == "caller" && m.uses_caller) {
      scope->set("caller", std::move(value));
    } else if (m.uses_kwargs) {
      kwargs.emplace_back(Value::string(name), std::move(value));
    } else {
      fail("macro '" + m.name + "' takes no keyword argument '" + name + "'");
    }
  }
  scope->set("varargs", Value::list(std::move(varargs), ListFlavor::tuple));
  scope->set("kwargs", Value::dict(std::move(kwargs)));

  ++call_depth_;
  struct Depth {
    int& depth;
    ~Depth() { --depth; }
  } depth{call_depth_};
  ScopeGuard in_macro(*this, std::move(scope));
  for (size_t i = 0; i < m.params.size(); ++i) {  // defaults see the parameters before them
    if (given[i]) continue;
    const auto& [name, default_value] = m.params[i];
    scope_->set(name, default_value ? eval(*default_value)
                                    : Value::undefined("parameter '" + name + "' was not provided"));
  }
  return Value::string(capture(m.body));
}

// --- expressions -------------------------------------------------------------

Value Interpreter::lookup(const std::string& name) const {
  for (const Scope* s = scope_.get(); s; s = s->parent.get()) {
    if (const Value* v = s->find(name)) return *v;
  }
  if (auto it = context_.find(name); it != context_.end()) return it->second;
  if (auto it = globals_.find(name); it != globals_.end()) return it->second;
  return Value::undefined("'" + name + "' is undefined");
}

CallArgs Interpreter::eval_args(const Arguments& args) {
  CallArgs out;
  for (const ExprPtr& e : args.positional) out.positional.push_back(eval(*e));
  for (const auto& [name, e] : args.named) out.named.emplace_back(name, eval(*e));
  return out;
}

Value Interpreter::call(const Value& callee, CallArgs args) {
  if (callee.is_undefined()) undefined_error(callee);
  if (!callee.is(Value::Kind::function)) fail(std::string("'") + callee.type_name() + "' object is not callable");
  budget_.step();
  return callee.function().call(*this, std::move(args));
}

Value Interpreter::eval_call(const CallExpr& e, const Value* caller) {
  const Value callee = eval(*e.callee);
  CallArgs args = eval_args(e.args);
  if (caller) args.named.emplace_back("caller", *caller);
  line_ = e.line;
  return call(callee, std::move(args));
}

Value Interpreter::eval(const Expr& e) {
  budget_.step();
  line_ = e.line;
  switch (e.kind) {
    case Expr::Kind::literal: return static_cast<const LiteralExpr&>(e).value;
    case Expr::Kind::name: return lookup(static_cast<const NameExpr&>(e).name);
    case Expr::Kind::list: {
      const auto& x = static_cast<const ListExpr&>(e);
      std::vector<Value> items;
      for (const ExprPtr& item : x.items) items.push_back(eval(*item));
      return Value::list(std::move(items), x.tuple ? ListFlavor::tuple : ListFlavor::list);
    }
    case Expr::Kind::dict: {
      std::vector<std::pair<Value, Value>> entries;
      for (const auto& [k, v] : static_cast<const DictExpr&>(e).items) {
        Value key = eval(*k);
        Value value = eval(*v);
        if (key.is(Value::Kind::list) || key.is_dict()) fail(std::string("unhashable type: '") + key.type_name() + "'");
        auto same = std::find_if(entries.begin(), entries.end(), [&](const auto& kv) { return py_equal(kv.first, key); });
        if (same != entries.end()) same->second = std::move(value);
        else entries.emplace_back(std::move(key), std::move(value));
      }
      return Value::dict(std::move(entries));
    }
    case Expr::Kind::attr: {
      const auto& x = static_cast<const AttrExpr&>(e);
      const Value object = eval(*x.object);
      line_ = e.line;
      return get_attr(object, x.name);
    }
    case Expr::Kind::item: {
      const auto& x = static_cast<const ItemExpr&>(e);
      const Value object = eval(*x.object);
      if (x.index->kind == Expr::Kind::slice) {
        const auto& s = static_cast<const SliceExpr&>(*x.index);
        auto part = [this](const ExprPtr& p) { return p ? std::optional<Value>(eval(*p)) : std::nullopt; };
        const auto start = part(s.start);
        const auto stop = part(s.stop);
        const auto step = part(s.step);
        line_ = e.line;
        return slice(object, start, stop, step, budget_);
      }
      const Value index = eval(*x.index);
      line_ = e.line;
      return get_item(object, index);
    }
    case Expr::Kind::slice: fail("a slice outside of []");
    case Expr::Kind::unary: {
      const auto& x = static_cast<const UnaryExpr&>(e);
      const Value v = eval(*x.operand);
      line_ = e.line;
      if (x.op == '!') return Value::boolean(!v.truthy());
      return negate(v, x.op == '-');
    }
    case Expr::Kind::binary: return eval_binary(static_cast<const BinaryExpr&>(e));
    case Expr::Kind::compare: {
      const auto& x = static_cast<const CompareExpr&>(e);
      Value left = eval(*x.first);
      for (const auto& [op, right_expr] : x.rest) {
        Value right = eval(*right_expr);
        line_ = e.line;
        if (!compare(op, left, right)) return Value::boolean(false);
        left = std::move(right);
      }
      return Value::boolean(true);
    }
    case Expr::Kind::cond: {
      const auto& x = static_cast<const CondExpr&>(e);
      if (eval(*x.test).truthy()) return eval(*x.then);
      if (x.otherwise) return eval(*x.otherwise);
      return Value::undefined("the inline if-expression on line " + std::to_string(e.line) +
                              " evaluated to false and no else section was defined.");
    }
    case Expr::Kind::call: return eval_call(static_cast<const CallExpr&>(e), nullptr);
    case Expr::Kind::filter: {
      const auto& x = static_cast<const FilterExpr&>(e);
      const Value operand = x.operand ? eval(*x.operand) : Value();
      CallArgs args = eval_args(x.args);
      line_ = e.line;
      return apply_filter(*this, x.name, operand, std::move(args));
    }
    case Expr::Kind::test: {
      const auto& x = static_cast<const TestExpr&>(e);
      const Value operand = eval(*x.operand);
      CallArgs args = eval_args(x.args);
      line_ = e.line;
      return Value::boolean(apply_test(*this, x.name, operand, std::move(args)) != x.negated);
    }
  }
  return Value();
}

Value Interpreter::eval_binary(const BinaryExpr& e) {
  Value left = eval(*e.left);
  if (e.op == BinaryOp::and_) return left.truthy() ? eval(*e.right) : left;
  if (e.op == BinaryOp::or_) return left.truthy() ? left : eval(*e.right);
  const Value right = eval(*e.right);
  line_ = e.line;
  if (e.op == BinaryOp::concat) {
    const Str a = py_str(left);
    const Str b = py_str(right);
    budget_.check_size(a.text.size() + b.text.size());
    budget_.charge(a.text.size() + b.text.size());
    StrBuilder out;
    out.append(a);
    out.append(b);
    return Value::string(out.take());
  }
  return binary_op(e.op, left, right, budget_);
}

// --- globals -----------------------------------------------------------------

Value Interpreter::global_range(CallArgs args) {
  auto a = bind_args(std::move(args), {"start", "stop", "step"}, "range");
  for (const auto& x : a) {
    if (x && !x->is(Value::Kind::integer) && !x->is(Value::Kind::boolean)) {
      fail(std::string("'") + x->type_name() + "' object cannot be interpreted as an integer");
    }
  }
  if (!a[0]) fail("range expected at least 1 argument, got 0");
  int64_t start = 0;
  int64_t stop = a[0]->as_int();
  if (a[1]) {
    start = stop;
    stop = a[1]->as_int();
  }
  const int64_t step = a[2] ? a[2]->as_int() : 1;
  if (step == 0) fail("range() arg 3 must not be zero");
  std::vector<Value> items;
  for (int64_t i = start; step > 0 ? i < stop : i > stop; i += step) {
    if (items.size() >= 100000) {
      fail("Range too big. The sandbox blocks ranges larger than MAX_RANGE (100000).");
    }
    items.push_back(Value::integer(i));
  }
  budget_.charge(items.size());
  return Value::list(std::move(items));
}

namespace {

// dict(mapping or pairs, **kwargs) as key/value pairs.
std::vector<std::pair<Value, Value>> dict_entries(CallArgs args, const char* who) {
  if (args.positional.size() > 1) fail(std::string(who) + " expected at most 1 argument");
  std::vector<std::pair<Value, Value>> entries;
  auto put = [&entries](Value k, Value v) {
    for (auto& [key, old] : entries) {
      if (py_equal(key, k)) {
        old = std::move(v);
        return;
      }
    }
    entries.emplace_back(std::move(k), std::move(v));
  };
  if (!args.positional.empty()) {
    const Value& first = args.positional[0];
    if (first.is_dict()) {
      for (const auto& [k, v] : first.dict().entries) put(k, v);
    } else {
      for (const Value& pair : iterate(first)) {
        const std::vector<Value> kv = iterate(pair);
        if (kv.size() != 2) fail("dictionary update sequence element has length " + std::to_string(kv.size()) + "; 2 is required");
        put(kv[0], kv[1]);
      }
    }
  }
  for (auto& [name, value] : args.named) put(Value::string(name), std::move(value));
  return entries;
}

}  // namespace

Value Interpreter::global_namespace(CallArgs args) {
  auto ns = std::make_shared<NamespaceValue>();
  for (auto& [k, v] : dict_entries(std::move(args), "namespace")) {
    if (!k.is_string()) fail("namespace() keys must be strings");
    ns->set(k.text(), std::move(v));
  }
  namespaces_.push_back(ns);
  return Value::ns(std::move(ns));
}

Value Interpreter::global_dict(CallArgs args) { return Value::dict(dict_entries(std::move(args), "dict")); }

Value Interpreter::global_strftime_now(CallArgs args) {
  auto a = bind_args(std::move(args), {"format"}, "strftime_now");
  if (!a[0] || !a[0]->is_string()) fail("strftime_now() argument must be str");
  const std::time_t t = std::chrono::system_clock::to_time_t(now());
  std::tm local{};
  localtime_r(&t, &local);
  const std::string& format = a[0]->text();
  if (format.empty()) return Value::string("");
  std::string buf(format.size() * 8 + 64, '\0');
  const size_t n = std::strftime(buf.data(), buf.size(), format.c_str(), &local);
  if (n == 0) fail("strftime_now(): the format gives no output or too much");
  buf.resize(n);
  return Value::string(std::move(buf));
}

}  // namespace conveyor::jinja
