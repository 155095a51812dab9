// Expressions and assignment targets: jinja2/parser.py's precedence, from
// conditional expressions down to primaries, postfix lookups, calls, filters
// and tests.
#include "template/jinja/parser_impl.hpp"

namespace conveyor::jinja {

bool Parser::is_tuple_end(std::initializer_list<std::string_view> extra_end) const {
  if (cur().kind == TokenKind::variable_end || cur().kind == TokenKind::block_end || is_op(")")) return true;
  if (cur().kind == TokenKind::eof) return true;
  for (std::string_view name : extra_end) {
    if (is_name(name)) return true;
  }
  return false;
}

bool Parser::is_constant_name(std::string_view n) {
  return n == "true" || n == "false" || n == "True" || n == "False" || n == "none" || n == "None";
}

Target Parser::parse_target(bool with_namespace, std::initializer_list<std::string_view> extra_end) {
  std::vector<Target> items;
  bool is_tuple = false;
  while (true) {
    if (!items.empty()) expect_op(",");
    if (is_tuple_end(extra_end)) break;
    items.push_back(parse_target_primary(with_namespace));
    if (!is_op(",")) break;
    is_tuple = true;
  }
  if (items.empty()) error("Expected an expression, got '" + describe(cur()) + "'");
  if (!is_tuple) return std::move(items[0]);
  Target t;
  t.kind = Target::Kind::tuple;
  t.items = std::move(items);
  return t;
}

Target Parser::parse_target_primary(bool with_namespace) {
  if (cur().kind == TokenKind::name) {
    Target t;
    t.name = cur().value;
    if (is_constant_name(t.name)) error("can't assign to 'const'");
    advance();
    if (with_namespace && skip_op(".")) {
      t.kind = Target::Kind::ns_attr;
      t.attr = expect_name();
    }
    return t;
  }
  if (is_op("(")) {
    advance();
    ExprPtr e = parse_tuple(true, true, {});
    expect_op(")");
    return to_target(*e);
  }
  ExprPtr e = parse_primary();
  return to_target(*e);
}

Target Parser::to_target(const Expr& e) const {
  if (e.kind == Expr::Kind::name) {
    Target t;
    t.name = static_cast<const NameExpr&>(e).name;
    return t;
  }
  if (e.kind == Expr::Kind::list && static_cast<const ListExpr&>(e).tuple) {
    Target t;
    t.kind = Target::Kind::tuple;
    for (const ExprPtr& item : static_cast<const ListExpr&>(e).items) t.items.push_back(to_target(*item));
    return t;
  }
  throw SyntaxError{e.line, e.kind == Expr::Kind::literal ? "can't assign to 'const'" : "can't assign to this expression"};
}

// Expressions separated by commas make a tuple.
ExprPtr Parser::parse_tuple(bool explicit_parentheses, bool with_condexpr,
                    std::initializer_list<std::string_view> extra_end) {
  const int line = cur().line;
  std::vector<ExprPtr> items;
  bool is_tuple = false;
  while (true) {
    if (!items.empty()) expect_op(",");
    if (is_tuple_end(extra_end)) break;
    items.push_back(parse_expression(with_condexpr));
    if (!is_op(",")) break;
    is_tuple = true;
  }
  if (!is_tuple) {
    if (!items.empty()) return std::move(items[0]);
    if (!explicit_parentheses) error("Expected an expression, got '" + describe(cur()) + "'");
  }
  auto t = std::make_unique<ListExpr>(line, true);
  t->items = std::move(items);
  return t;
}

ExprPtr Parser::parse_expression(bool with_condexpr) {
  Nesting nesting(*this);
  return with_condexpr ? parse_condexpr() : parse_or();
}

ExprPtr Parser::parse_condexpr() {
  ExprPtr expr = parse_or();
  while (is_name("if")) {
    auto c = std::make_unique<CondExpr>(cur().line);
    advance();
    c->test = parse_or();
    if (skip_name("else")) c->otherwise = parse_condexpr();
    c->then = std::move(expr);
    expr = std::move(c);
  }
  return expr;
}

ExprPtr Parser::parse_or() {
  ExprPtr left = parse_and();
  while (is_name("or")) {
    const int line = cur().line;
    advance();
    left = std::make_unique<BinaryExpr>(line, BinaryOp::or_, std::move(left), parse_and());
  }
  return left;
}

ExprPtr Parser::parse_and() {
  ExprPtr left = parse_not();
  while (is_name("and")) {
    const int line = cur().line;
    advance();
    left = std::make_unique<BinaryExpr>(line, BinaryOp::and_, std::move(left), parse_not());
  }
  return left;
}

ExprPtr Parser::parse_not() {
  if (is_name("not")) {
    Nesting nesting(*this);
    const int line = cur().line;
    advance();
    return std::make_unique<UnaryExpr>(line, '!', parse_not());
  }
  return parse_compare();
}

ExprPtr Parser::parse_compare() {
  const int line = cur().line;
  ExprPtr first = parse_math1();
  std::unique_ptr<CompareExpr> cmp;
  while (true) {
    CompareOp op;
    if (is_op("==")) op = CompareOp::eq;
    else if (is_op("!=")) op = CompareOp::ne;
    else if (is_op("<")) op = CompareOp::lt;
    else if (is_op("<=")) op = CompareOp::le;
    else if (is_op(">")) op = CompareOp::gt;
    else if (is_op(">=")) op = CompareOp::ge;
    else if (is_name("in")) op = CompareOp::in;
    else if (is_name("not") && peek().kind == TokenKind::name && peek().value == "in") {
      advance();
      op = CompareOp::not_in;
    } else {
      break;
    }
    advance();
    if (!cmp) cmp = std::make_unique<CompareExpr>(line, std::move(first));
    cmp->rest.emplace_back(op, parse_math1());
  }
  if (cmp) return cmp;
  return first;
}

ExprPtr Parser::parse_math1() {
  ExprPtr left = parse_concat();
  while (is_op("+") || is_op("-")) {
    const BinaryOp op = is_op("+") ? BinaryOp::add : BinaryOp::sub;
    const int line = cur().line;
    advance();
    left = std::make_unique<BinaryExpr>(line, op, std::move(left), parse_concat());
  }
  return left;
}

ExprPtr Parser::parse_concat() {
  ExprPtr left = parse_math2();
  while (is_op("~")) {
    const int line = cur().line;
    advance();
    left = std::make_unique<BinaryExpr>(line, BinaryOp::concat, std::move(left), parse_math2());
  }
  return left;
}

ExprPtr Parser::parse_math2() {
  ExprPtr left = parse_pow();
  while (true) {
    BinaryOp op;
    if (is_op("*")) op = BinaryOp::mul;
    else if (is_op("/")) op = BinaryOp::div;
    else if (is_op("//")) op = BinaryOp::floordiv;
    else if (is_op("%")) op = BinaryOp::mod;
    else break;
    const int line = cur().line;
    advance();
    left = std::make_unique<BinaryExpr>(line, op, std::move(left), parse_pow());
  }
  return left;
}

ExprPtr Parser::parse_pow() {
  ExprPtr left = parse_unary(true);
  while (is_op("**")) {
    const int line = cur().line;
    advance();
    left = std::make_unique<BinaryExpr>(line, BinaryOp::pow, std::move(left), parse_unary(true));
  }
  return left;
}

ExprPtr Parser::parse_unary(bool with_filter) {
  Nesting nesting(*this);
  const int line = cur().line;
  ExprPtr node;
  if (is_op("-") || is_op("+")) {
    const char op = cur().value[0];
    advance();
    node = std::make_unique<UnaryExpr>(line, op, parse_unary(false));
  } else {
    node = parse_primary();
  }
  node = parse_postfix(std::move(node));
  if (with_filter) node = parse_filter_expr(std::move(node));
  return node;
}

ExprPtr Parser::parse_primary() {
  Nesting nesting(*this);
  const Token& t = cur();
  const int line = t.line;
  switch (t.kind) {
    case TokenKind::name: {
      std::string name = t.value;
      advance();
      if (name == "true" || name == "True") return std::make_unique<LiteralExpr>(line, Value::boolean(true));
      if (name == "false" || name == "False") return std::make_unique<LiteralExpr>(line, Value::boolean(false));
      if (name == "none" || name == "None") return std::make_unique<LiteralExpr>(line, Value::none());
      for (MacroStmt* m : macros_) {  // every enclosing macro sees the name
        m->uses_varargs |= name == "varargs";
        m->uses_kwargs |= name == "kwargs";
        m->uses_caller |= name == "caller";
      }
      return std::make_unique<NameExpr>(line, std::move(name));
    }
    case TokenKind::string: {
      std::string text;
      while (cur().kind == TokenKind::string) {  // "a" "b" is "ab"
        text += cur().value;
        advance();
      }
      return std::make_unique<LiteralExpr>(line, Value::string(std::move(text)));
    }
    case TokenKind::integer: {
      const int64_t v = t.int_value;
      advance();
      return std::make_unique<LiteralExpr>(line, Value::integer(v));
    }
    case TokenKind::floating: {
      const double v = t.float_value;
      advance();
      return std::make_unique<LiteralExpr>(line, Value::floating(v));
    }
    case TokenKind::op:
      if (t.value == "(") {
        advance();
        ExprPtr e = parse_tuple(true, true, {});
        expect_op(")");
        return e;
      }
      if (t.value == "[") return parse_list();
      if (t.value == "{") return parse_dict();
      break;
    default: break;
  }
  error("unexpected '" + describe(t) + "'");
}

ExprPtr Parser::parse_list() {
  auto l = std::make_unique<ListExpr>(cur().line, false);
  expect_op("[");
  while (!is_op("]")) {
    if (!l->items.empty()) expect_op(",");
    if (is_op("]")) break;
    l->items.push_back(parse_expression(true));
  }
  expect_op("]");
  return l;
}

ExprPtr Parser::parse_dict() {
  auto d = std::make_unique<DictExpr>(cur().line);
  expect_op("{");
  while (!is_op("}")) {
    if (!d->items.empty()) expect_op(",");
    if (is_op("}")) break;
    ExprPtr key = parse_expression(true);
    expect_op(":");
    d->items.emplace_back(std::move(key), parse_expression(true));
  }
  expect_op("}");
  return d;
}

ExprPtr Parser::parse_postfix(ExprPtr node) {
  while (true) {
    if (is_op(".") || is_op("[")) node = parse_subscript(std::move(node));
    else if (is_op("(")) node = parse_call(std::move(node));
    else return node;
  }
}

ExprPtr Parser::parse_filter_expr(ExprPtr node) {
  while (true) {
    if (is_op("|")) {
      advance();
      node = parse_filter_call(std::move(node));
    } else if (is_name("is")) {
      node = parse_test(std::move(node));
    } else if (is_op("(")) {
      node = parse_call(std::move(node));
    } else {
      return node;
    }
  }
}

ExprPtr Parser::parse_subscript(ExprPtr node) {
  const int line = cur().line;
  if (skip_op(".")) {
    if (cur().kind == TokenKind::name) {
      std::string name = cur().value;
      advance();
      return std::make_unique<AttrExpr>(line, std::move(node), std::move(name));
    }
    if (cur().kind != TokenKind::integer) error("expected name or number");
    auto index = std::make_unique<LiteralExpr>(line, Value::integer(cur().int_value));
    advance();
    return std::make_unique<ItemExpr>(line, std::move(node), std::move(index));
  }
  expect_op("[");
  std::vector<ExprPtr> args;
  while (!is_op("]")) {
    if (!args.empty()) expect_op(",");
    args.push_back(parse_subscribed());
  }
  expect_op("]");
  if (args.size() == 1) return std::make_unique<ItemExpr>(line, std::move(node), std::move(args[0]));
  auto tuple = std::make_unique<ListExpr>(line, true);
  tuple->items = std::move(args);
  return std::make_unique<ItemExpr>(line, std::move(node), std::move(tuple));
}

// An index, or a slice a:b:c with any part left out.
ExprPtr Parser::parse_subscribed() {
  const int line = cur().line;
  ExprPtr start;
  if (!is_op(":")) {
    start = parse_expression(true);
    if (!is_op(":")) return start;
  }
  advance();  // the first ':'
  auto s = std::make_unique<SliceExpr>(line);
  s->start = std::move(start);
  if (!is_op(":") && !is_op("]") && !is_op(",")) s->stop = parse_expression(true);
  if (skip_op(":")) {
    if (!is_op("]") && !is_op(",")) s->step = parse_expression(true);
  }
  return s;
}

Arguments Parser::parse_call_args() {
  Arguments args;
  expect_op("(");
  bool need_comma = false;
  while (!is_op(")")) {
    if (need_comma) {
      expect_op(",");
      if (is_op(")")) break;
    }
    if (is_op("*") || is_op("**")) error("*args and **kwargs in calls are not supported");
    if (cur().kind == TokenKind::name && peek().kind == TokenKind::op && peek().value == "=") {
      std::string key = cur().value;
      advance();
      advance();
      args.named.emplace_back(std::move(key), parse_expression(true));
    } else {
      if (!args.named.empty()) error("invalid syntax for function call expression");
      args.positional.push_back(parse_expression(true));
    }
    need_comma = true;
  }
  expect_op(")");
  return args;
}

ExprPtr Parser::parse_call(ExprPtr callee) {
  auto c = std::make_unique<CallExpr>(cur().line, std::move(callee));
  c->args = parse_call_args();
  return c;
}

std::string Parser::parse_dotted_name() {
  std::string name = expect_name();
  while (skip_op(".")) name += "." + expect_name();
  return name;
}

std::unique_ptr<FilterExpr> Parser::parse_filter_call(ExprPtr operand) {
  const int line = cur().line;
  auto f = std::make_unique<FilterExpr>(line, std::move(operand), parse_dotted_name());
  if (is_op("(")) f->args = parse_call_args();
  return f;
}

ExprPtr Parser::parse_test(ExprPtr operand) {
  const int line = cur().line;
  advance();  // is
  const bool negated = skip_name("not");
  auto t = std::make_unique<TestExpr>(line, std::move(operand), parse_dotted_name());
  t->negated = negated;
  const TokenKind k = cur().kind;
  if (is_op("(")) {
    t->args = parse_call_args();
  } else if ((k == TokenKind::name || k == TokenKind::string || k == TokenKind::integer ||
              k == TokenKind::floating || is_op("[") || is_op("{")) &&
             !is_name("else") && !is_name("or") && !is_name("and")) {
    if (is_name("is")) error("You cannot chain multiple tests with is");
    t->args.positional.push_back(parse_postfix(parse_primary()));
  }
  return t;
}
}  // namespace conveyor::jinja
