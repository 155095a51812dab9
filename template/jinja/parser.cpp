#include "template/jinja/parser.hpp"

#include <initializer_list>

#include "template/jinja/lexer.hpp"

namespace conveyor::jinja {
namespace {

constexpr int kMaxNesting = 128;  // brackets, unary operators and blocks inside each other

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : toks_(std::move(tokens)) {}

  std::unique_ptr<Template::Program> run() {
    auto program = std::make_unique<Template::Program>();
    program->body = subparse({});
    return program;
  }

 private:
  // --- token helpers ---------------------------------------------------------

  const Token& cur() const { return toks_[i_]; }
  const Token& peek() const { return toks_[i_ + 1 < toks_.size() ? i_ + 1 : i_]; }
  void advance() {
    if (i_ + 1 < toks_.size()) ++i_;
  }
  bool is_op(std::string_view op) const { return cur().kind == TokenKind::op && cur().value == op; }
  bool is_name(std::string_view name) const { return cur().kind == TokenKind::name && cur().value == name; }
  bool skip_op(std::string_view op) {
    if (!is_op(op)) return false;
    advance();
    return true;
  }
  bool skip_name(std::string_view name) {
    if (!is_name(name)) return false;
    advance();
    return true;
  }

  [[noreturn]] void error(std::string message) const { throw SyntaxError{cur().line, std::move(message)}; }

  static std::string describe(const Token& t) {
    switch (t.kind) {
      case TokenKind::text: return "template data";
      case TokenKind::variable_begin: return "begin of print statement";
      case TokenKind::variable_end: return "end of print statement";
      case TokenKind::block_begin: return "begin of statement block";
      case TokenKind::block_end: return "end of statement block";
      case TokenKind::name: return t.value;
      case TokenKind::string: return "string";
      case TokenKind::integer: return "integer";
      case TokenKind::floating: return "float";
      case TokenKind::op: return t.value;
      case TokenKind::eof: return "end of template";
    }
    return "?";
  }

  void expect_op(std::string_view op) {
    if (!skip_op(op)) error("expected token '" + std::string(op) + "', got '" + describe(cur()) + "'");
  }
  void expect(TokenKind kind, const char* what) {
    if (cur().kind != kind) error(std::string("expected token '") + what + "', got '" + describe(cur()) + "'");
    advance();
  }
  std::string expect_name() {
    if (cur().kind != TokenKind::name) error("expected token 'name', got '" + describe(cur()) + "'");
    std::string name = cur().value;
    advance();
    return name;
  }

  struct Nesting {
    explicit Nesting(Parser& p) : p_(p) {
      if (++p_.nesting_ > kMaxNesting) p_.error("the template nests more than " + std::to_string(kMaxNesting) + " deep");
    }
    ~Nesting() { --p_.nesting_; }
    Parser& p_;
  };

  // --- statements ------------------------------------------------------------

  // Statements until a block whose first name is in `end_tags` (left as the
  // current token) or the end of the template.
  Body subparse(std::initializer_list<std::string_view> end_tags) {
    Nesting nesting(*this);
    Body body;
    while (cur().kind != TokenKind::eof) {
      const Token& t = cur();
      if (t.kind == TokenKind::text) {
        body.push_back(std::make_unique<TextStmt>(t.line, t.value));
        advance();
      } else if (t.kind == TokenKind::variable_begin) {
        const int line = t.line;
        advance();
        ExprPtr e = parse_tuple(false, true, {});
        expect(TokenKind::variable_end, "end of print statement");
        body.push_back(std::make_unique<PrintStmt>(line, std::move(e)));
      } else if (t.kind == TokenKind::block_begin) {
        advance();
        if (cur().kind == TokenKind::name) {
          for (std::string_view end : end_tags) {
            if (cur().value == end) return body;
          }
        }
        parse_statement(body);
        expect(TokenKind::block_end, "end of statement block");
      } else {
        error("unexpected '" + describe(t) + "'");
      }
    }
    if (end_tags.size() != 0) {
      std::string wanted;
      for (std::string_view end : end_tags) wanted += (wanted.empty() ? "'" : " or '") + std::string(end) + "'";
      error("Unexpected end of template. Jinja was looking for the following tags: " + wanted + ".");
    }
    return body;
  }

  // `:`? `%}` body, up to one of `end_tags`; drops the end tag's name when asked.
  Body parse_block_body(std::initializer_list<std::string_view> end_tags, bool drop_end_name) {
    skip_op(":");
    expect(TokenKind::block_end, "end of statement block");
    Body body = subparse(end_tags);
    if (drop_end_name) advance();
    return body;
  }

  void parse_statement(Body& out) {
    if (cur().kind != TokenKind::name) error("tag name expected");
    const std::string tag = cur().value;
    const int line = cur().line;
    if (tag == "for") return out.push_back(parse_for());
    if (tag == "if") return out.push_back(parse_if());
    if (tag == "set") return out.push_back(parse_set());
    if (tag == "macro") return out.push_back(parse_macro());
    if (tag == "call") return out.push_back(parse_call_block());
    if (tag == "filter") return out.push_back(parse_filter_block());
    if (tag == "with") return out.push_back(parse_with());
    if (tag == "print") {
      advance();
      for (bool first = true; cur().kind != TokenKind::block_end; first = false) {
        if (!first) expect_op(",");
        out.push_back(std::make_unique<PrintStmt>(line, parse_expression(true)));
      }
      return;
    }
    if (tag == "break" || tag == "continue") {
      if (loop_depth_ == 0) error("'" + tag + "' outside of a loop");
      advance();
      return out.push_back(std::make_unique<LoopControlStmt>(
          line, tag == "break" ? Stmt::Kind::break_ : Stmt::Kind::continue_));
    }
    if (tag == "generation") {
      advance();
      auto s = std::make_unique<ScopeStmt>(line);
      const int saved = loop_depth_;  // like a macro body: no loop to break out of
      loop_depth_ = 0;
      s->body = parse_block_body({"endgeneration"}, true);
      loop_depth_ = saved;
      return out.push_back(std::move(s));
    }
    if (tag == "block" || tag == "extends" || tag == "include" || tag == "import" || tag == "from" ||
        tag == "autoescape") {
      error("the '" + tag + "' tag is not supported");
    }
    error("Encountered unknown tag '" + tag + "'.");
  }

  StmtPtr parse_for() {
    auto s = std::make_unique<ForStmt>(cur().line);
    advance();
    s->target = parse_target(false, {"in"});
    if (!skip_name("in")) error("expected token 'in', got '" + describe(cur()) + "'");
    s->iterable = parse_tuple(false, false, {"recursive"});
    if (skip_name("if")) s->filter = parse_expression(true);
    if (is_name("recursive")) error("recursive for loops are not supported");
    ++loop_depth_;
    s->body = parse_block_body({"endfor", "else"}, false);
    --loop_depth_;
    const bool has_else = is_name("else");
    advance();
    if (has_else) s->otherwise = parse_block_body({"endfor"}, true);
    return s;
  }

  StmtPtr parse_if() {
    auto s = std::make_unique<IfStmt>(cur().line);
    advance();
    while (true) {
      ExprPtr test = parse_tuple(false, false, {});
      Body body = parse_block_body({"elif", "else", "endif"}, false);
      s->branches.emplace_back(std::move(test), std::move(body));
      const std::string end = cur().value;
      advance();
      if (end == "elif") continue;
      if (end == "else") s->otherwise = parse_block_body({"endif"}, true);
      return s;
    }
  }

  StmtPtr parse_set() {
    const int line = cur().line;
    advance();
    Target target = parse_target(true, {});
    if (skip_op("=")) {
      auto s = std::make_unique<SetStmt>(line);
      s->target = std::move(target);
      s->value = parse_tuple(false, true, {});
      return s;
    }
    auto s = std::make_unique<SetBlockStmt>(line);
    s->target = std::move(target);
    while (is_op("|")) {
      advance();
      s->filters.push_back(parse_filter_call(nullptr));
    }
    s->body = parse_block_body({"endset"}, true);
    return s;
  }

  void parse_signature(MacroStmt& m) {
    expect_op("(");
    bool has_default = false;
    while (!is_op(")")) {
      if (!m.params.empty()) expect_op(",");
      std::string name = expect_name();
      ExprPtr default_value;
      if (skip_op("=")) {
        default_value = parse_expression(true);
        has_default = true;
      } else if (has_default) {
        error("non-default argument follows default argument");
      }
      m.params.emplace_back(std::move(name), std::move(default_value));
    }
    expect_op(")");
  }

  // Macro bodies are their own world: no enclosing loop to break out of.
  void parse_macro_body(MacroStmt& m, std::string_view end_tag) {
    const int saved = loop_depth_;
    loop_depth_ = 0;
    macros_.push_back(&m);
    m.body = parse_block_body({end_tag}, true);
    macros_.pop_back();
    loop_depth_ = saved;
  }

  StmtPtr parse_macro() {
    auto s = std::make_unique<MacroStmt>(cur().line);
    advance();
    s->name = expect_name();
    parse_signature(*s);
    parse_macro_body(*s, "endmacro");
    return s;
  }

  StmtPtr parse_call_block() {
    auto s = std::make_unique<CallBlockStmt>(cur().line);
    advance();
    s->caller = std::make_unique<MacroStmt>(s->line);
    s->caller->name = "caller";
    if (is_op("(")) parse_signature(*s->caller);
    s->call = parse_expression(true);
    if (s->call->kind != Expr::Kind::call) error("expected call");
    parse_macro_body(*s->caller, "endcall");
    return s;
  }

  StmtPtr parse_filter_block() {
    auto s = std::make_unique<FilterBlockStmt>(cur().line);
    advance();
    s->filters.push_back(parse_filter_call(nullptr));
    while (skip_op("|")) s->filters.push_back(parse_filter_call(nullptr));
    s->body = parse_block_body({"endfilter"}, true);
    return s;
  }

  StmtPtr parse_with() {
    auto s = std::make_unique<WithStmt>(cur().line);
    advance();
    while (cur().kind != TokenKind::block_end) {
      if (!s->assignments.empty()) expect_op(",");
      Target target = parse_target(false, {});
      expect_op("=");
      s->assignments.emplace_back(std::move(target), parse_expression(true));
    }
    s->body = parse_block_body({"endwith"}, true);
    return s;
  }

  // --- assignment targets ----------------------------------------------------

  bool is_tuple_end(std::initializer_list<std::string_view> extra_end) const {
    if (cur().kind == TokenKind::variable_end || cur().kind == TokenKind::block_end || is_op(")")) return true;
    if (cur().kind == TokenKind::eof) return true;
    for (std::string_view name : extra_end) {
      if (is_name(name)) return true;
    }
    return false;
  }

  static bool is_constant_name(std::string_view n) {
    return n == "true" || n == "false" || n == "True" || n == "False" || n == "none" || n == "None";
  }

  Target parse_target(bool with_namespace, std::initializer_list<std::string_view> extra_end) {
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

  Target parse_target_primary(bool with_namespace) {
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

  Target to_target(const Expr& e) const {
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

  // --- expressions -----------------------------------------------------------

  // Expressions separated by commas make a tuple.
  ExprPtr parse_tuple(bool explicit_parentheses, bool with_condexpr,
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

  ExprPtr parse_expression(bool with_condexpr) {
    Nesting nesting(*this);
    return with_condexpr ? parse_condexpr() : parse_or();
  }

  ExprPtr parse_condexpr() {
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

  ExprPtr parse_or() {
    ExprPtr left = parse_and();
    while (is_name("or")) {
      const int line = cur().line;
      advance();
      left = std::make_unique<BinaryExpr>(line, BinaryOp::or_, std::move(left), parse_and());
    }
    return left;
  }

  ExprPtr parse_and() {
    ExprPtr left = parse_not();
    while (is_name("and")) {
      const int line = cur().line;
      advance();
      left = std::make_unique<BinaryExpr>(line, BinaryOp::and_, std::move(left), parse_not());
    }
    return left;
  }

  ExprPtr parse_not() {
    if (is_name("not")) {
      Nesting nesting(*this);
      const int line = cur().line;
      advance();
      return std::make_unique<UnaryExpr>(line, '!', parse_not());
    }
    return parse_compare();
  }

  ExprPtr parse_compare() {
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

  ExprPtr parse_math1() {
    ExprPtr left = parse_concat();
    while (is_op("+") || is_op("-")) {
      const BinaryOp op = is_op("+") ? BinaryOp::add : BinaryOp::sub;
      const int line = cur().line;
      advance();
      left = std::make_unique<BinaryExpr>(line, op, std::move(left), parse_concat());
    }
    return left;
  }

  ExprPtr parse_concat() {
    ExprPtr left = parse_math2();
    while (is_op("~")) {
      const int line = cur().line;
      advance();
      left = std::make_unique<BinaryExpr>(line, BinaryOp::concat, std::move(left), parse_math2());
    }
    return left;
  }

  ExprPtr parse_math2() {
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

  ExprPtr parse_pow() {
    ExprPtr left = parse_unary(true);
    while (is_op("**")) {
      const int line = cur().line;
      advance();
      left = std::make_unique<BinaryExpr>(line, BinaryOp::pow, std::move(left), parse_unary(true));
    }
    return left;
  }

  ExprPtr parse_unary(bool with_filter) {
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

  ExprPtr parse_primary() {
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

  ExprPtr parse_list() {
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

  ExprPtr parse_dict() {
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

  ExprPtr parse_postfix(ExprPtr node) {
    while (true) {
      if (is_op(".") || is_op("[")) node = parse_subscript(std::move(node));
      else if (is_op("(")) node = parse_call(std::move(node));
      else return node;
    }
  }

  ExprPtr parse_filter_expr(ExprPtr node) {
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

  ExprPtr parse_subscript(ExprPtr node) {
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
  ExprPtr parse_subscribed() {
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

  Arguments parse_call_args() {
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

  ExprPtr parse_call(ExprPtr callee) {
    auto c = std::make_unique<CallExpr>(cur().line, std::move(callee));
    c->args = parse_call_args();
    return c;
  }

  std::string parse_dotted_name() {
    std::string name = expect_name();
    while (skip_op(".")) name += "." + expect_name();
    return name;
  }

  std::unique_ptr<FilterExpr> parse_filter_call(ExprPtr operand) {
    const int line = cur().line;
    auto f = std::make_unique<FilterExpr>(line, std::move(operand), parse_dotted_name());
    if (is_op("(")) f->args = parse_call_args();
    return f;
  }

  ExprPtr parse_test(ExprPtr operand) {
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

  std::vector<Token> toks_;
  size_t i_ = 0;
  int nesting_ = 0;
  int loop_depth_ = 0;
  std::vector<MacroStmt*> macros_;  // the macros whose bodies are being parsed
};

}  // namespace

std::unique_ptr<Template::Program> parse_program(std::string_view source) {
  return Parser(tokenize(source)).run();
}

}  // namespace conveyor::jinja
