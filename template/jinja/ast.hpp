// The parsed template: expression and statement nodes, as jinja2/nodes.py
// has them for the part of the language chat templates use. Built by the
// parser, read by the interpreter; immutable once built.
#pragma once

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "template/jinja/render_types.hpp"
#include "template/jinja/value.hpp"

namespace conveyor::jinja {

// --- expressions -------------------------------------------------------------

struct Expr {
  enum class Kind : uint8_t {
    literal, name, list, dict, attr, item, slice, unary, binary, compare, cond, call, filter, test,
  };
  explicit Expr(Kind k, int l) : kind(k), line(l) {}
  virtual ~Expr() = default;
  Kind kind;
  int line;
};
using ExprPtr = std::unique_ptr<Expr>;

struct Arguments {
  std::vector<ExprPtr> positional;
  std::vector<std::pair<std::string, ExprPtr>> named;
};

struct LiteralExpr : Expr {
  LiteralExpr(int l, Value v) : Expr(Kind::literal, l), value(std::move(v)) {}
  Value value;
};

struct NameExpr : Expr {
  NameExpr(int l, std::string n) : Expr(Kind::name, l), name(std::move(n)) {}
  std::string name;
};

struct ListExpr : Expr {  // [a, b] or (a, b)
  ListExpr(int l, bool t) : Expr(Kind::list, l), tuple(t) {}
  bool tuple;
  std::vector<ExprPtr> items;
};

struct DictExpr : Expr {
  explicit DictExpr(int l) : Expr(Kind::dict, l) {}
  std::vector<std::pair<ExprPtr, ExprPtr>> items;
};

struct AttrExpr : Expr {  // object.name
  AttrExpr(int l, ExprPtr o, std::string n) : Expr(Kind::attr, l), object(std::move(o)), name(std::move(n)) {}
  ExprPtr object;
  std::string name;
};

struct ItemExpr : Expr {  // object[index]
  ItemExpr(int l, ExprPtr o, ExprPtr i) : Expr(Kind::item, l), object(std::move(o)), index(std::move(i)) {}
  ExprPtr object;
  ExprPtr index;  // a SliceExpr for object[a:b:c]
};

struct SliceExpr : Expr {  // only as an ItemExpr's index; null parts are omitted
  explicit SliceExpr(int l) : Expr(Kind::slice, l) {}
  ExprPtr start, stop, step;
};

struct UnaryExpr : Expr {
  UnaryExpr(int l, char o, ExprPtr x) : Expr(Kind::unary, l), op(o), operand(std::move(x)) {}
  char op;  // '-', '+', '!' (not)
  ExprPtr operand;
};

enum class BinaryOp : uint8_t { add, sub, mul, div, floordiv, mod, pow, concat, and_, or_ };

struct BinaryExpr : Expr {
  BinaryExpr(int l, BinaryOp o, ExprPtr a, ExprPtr b)
      : Expr(Kind::binary, l), op(o), left(std::move(a)), right(std::move(b)) {}
  BinaryOp op;
  ExprPtr left, right;
};

enum class CompareOp : uint8_t { eq, ne, lt, le, gt, ge, in, not_in };

struct CompareExpr : Expr {  // a < b <= c chains as in Python
  CompareExpr(int l, ExprPtr f) : Expr(Kind::compare, l), first(std::move(f)) {}
  ExprPtr first;
  std::vector<std::pair<CompareOp, ExprPtr>> rest;
};

struct CondExpr : Expr {  // then if test else otherwise
  explicit CondExpr(int l) : Expr(Kind::cond, l) {}
  ExprPtr test, then, otherwise;  // otherwise may be null: undefined
};

struct CallExpr : Expr {
  CallExpr(int l, ExprPtr c) : Expr(Kind::call, l), callee(std::move(c)) {}
  ExprPtr callee;
  Arguments args;
};

struct FilterExpr : Expr {  // operand | name(args)
  FilterExpr(int l, ExprPtr o, std::string n) : Expr(Kind::filter, l), operand(std::move(o)), name(std::move(n)) {}
  ExprPtr operand;  // null in a filter chain of {% filter %} / {% set x | f %}
  std::string name;
  Arguments args;
};

struct TestExpr : Expr {  // operand is [not] name(args)
  TestExpr(int l, ExprPtr o, std::string n) : Expr(Kind::test, l), operand(std::move(o)), name(std::move(n)) {}
  ExprPtr operand;
  std::string name;
  Arguments args;
  bool negated = false;
};

// --- statements --------------------------------------------------------------

// Where `set` and `for` store: a name, ns.attr, or a tuple of targets.
struct Target {
  enum class Kind : uint8_t { name, ns_attr, tuple } kind = Kind::name;
  std::string name;
  std::string attr;
  std::vector<Target> items;
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct Stmt {
  enum class Kind : uint8_t {
    text, print, if_, for_, set, set_block, macro, call_block, filter_block, with, break_, continue_, scope,
  };
  explicit Stmt(Kind k, int l) : kind(k), line(l) {}
  virtual ~Stmt() = default;
  Kind kind;
  int line;
};

struct TextStmt : Stmt {
  TextStmt(int l, std::string t) : Stmt(Kind::text, l), text(std::move(t)) {}
  std::string text;
};

struct PrintStmt : Stmt {  // {{ expr }}
  PrintStmt(int l, ExprPtr e) : Stmt(Kind::print, l), expr(std::move(e)) {}
  ExprPtr expr;
};

struct IfStmt : Stmt {
  explicit IfStmt(int l) : Stmt(Kind::if_, l) {}
  std::vector<std::pair<ExprPtr, Body>> branches;  // if, elif...
  Body otherwise;
};

struct ForStmt : Stmt {
  explicit ForStmt(int l) : Stmt(Kind::for_, l) {}
  Target target;
  ExprPtr iterable;
  ExprPtr filter;  // `for x in xs if cond`, or null
  Body body;
  Body otherwise;  // runs when no item passed the filter
};

struct SetStmt : Stmt {
  explicit SetStmt(int l) : Stmt(Kind::set, l) {}
  Target target;
  ExprPtr value;
};

struct SetBlockStmt : Stmt {  // {% set x | filters %}body{% endset %}
  explicit SetBlockStmt(int l) : Stmt(Kind::set_block, l) {}
  Target target;
  std::vector<std::unique_ptr<FilterExpr>> filters;
  Body body;
};

struct MacroStmt : Stmt {
  explicit MacroStmt(int l) : Stmt(Kind::macro, l) {}
  std::string name;
  std::vector<std::pair<std::string, ExprPtr>> params;  // default may be null
  Body body;
  // Whether the body reads these names: Jinja accepts extra positional
  // arguments, extra keywords and a `caller` only then.
  bool uses_varargs = false;
  bool uses_kwargs = false;
  bool uses_caller = false;
};

struct CallBlockStmt : Stmt {  // {% call(params) macro(args) %}body{% endcall %}
  explicit CallBlockStmt(int l) : Stmt(Kind::call_block, l) {}
  std::unique_ptr<MacroStmt> caller;  // the body, as the macro `caller`
  ExprPtr call;
};

struct FilterBlockStmt : Stmt {
  explicit FilterBlockStmt(int l) : Stmt(Kind::filter_block, l) {}
  std::vector<std::unique_ptr<FilterExpr>> filters;
  Body body;
};

struct WithStmt : Stmt {
  explicit WithStmt(int l) : Stmt(Kind::with, l) {}
  std::vector<std::pair<Target, ExprPtr>> assignments;
  Body body;
};

struct LoopControlStmt : Stmt {  // {% break %}, {% continue %}
  LoopControlStmt(int l, Kind k) : Stmt(k, l) {}
};

struct ScopeStmt : Stmt {  // transformers' {% generation %}...{% endgeneration %}: just its body
  explicit ScopeStmt(int l) : Stmt(Kind::scope, l) {}
  Body body;
};

struct Program {
  Body body;
};

}  // namespace conveyor::jinja
