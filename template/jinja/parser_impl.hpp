// The parser's class, shared by parser.cpp (statements) and
// parser_expressions.cpp (expressions and assignment targets). Internal to
// template/jinja.
#pragma once

#include <initializer_list>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "template/jinja/ast.hpp"
#include "template/jinja/lexer.hpp"

namespace conveyor::jinja {

constexpr int kMaxNesting = 128;  // brackets, unary operators and blocks inside each other

class Parser {
 public:
  explicit Parser(std::vector<Token> tokens) : toks_(std::move(tokens)) {}

  std::unique_ptr<Program> run() {
    auto program = std::make_unique<Program>();
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
  Body subparse(std::initializer_list<std::string_view> end_tags);

  // `:`? `%}` body, up to one of `end_tags`; drops the end tag's name when asked.
  Body parse_block_body(std::initializer_list<std::string_view> end_tags, bool drop_end_name);
  void parse_statement(Body& out);
  StmtPtr parse_for();
  StmtPtr parse_if();
  StmtPtr parse_set();
  void parse_signature(MacroStmt& m);

  // Macro bodies are their own world: no enclosing loop to break out of.
  void parse_macro_body(MacroStmt& m, std::string_view end_tag);
  StmtPtr parse_macro();
  StmtPtr parse_call_block();
  StmtPtr parse_filter_block();
  StmtPtr parse_with();

  // --- assignment targets ----------------------------------------------------

  bool is_tuple_end(std::initializer_list<std::string_view> extra_end) const;
  static bool is_constant_name(std::string_view n);
  Target parse_target(bool with_namespace, std::initializer_list<std::string_view> extra_end);
  Target parse_target_primary(bool with_namespace);
  Target to_target(const Expr& e) const;

  // --- expressions -----------------------------------------------------------

  // Expressions separated by commas make a tuple.
  ExprPtr parse_tuple(bool explicit_parentheses, bool with_condexpr,
                      std::initializer_list<std::string_view> extra_end);
  ExprPtr parse_expression(bool with_condexpr);
  ExprPtr parse_condexpr();
  ExprPtr parse_or();
  ExprPtr parse_and();
  ExprPtr parse_not();
  ExprPtr parse_compare();
  ExprPtr parse_math1();
  ExprPtr parse_concat();
  ExprPtr parse_math2();
  ExprPtr parse_pow();
  ExprPtr parse_unary(bool with_filter);
  ExprPtr parse_primary();
  ExprPtr parse_list();
  ExprPtr parse_dict();
  ExprPtr parse_postfix(ExprPtr node);
  ExprPtr parse_filter_expr(ExprPtr node);
  ExprPtr parse_subscript(ExprPtr node);

  // An index, or a slice a:b:c with any part left out.
  ExprPtr parse_subscribed();
  Arguments parse_call_args();
  ExprPtr parse_call(ExprPtr callee);
  std::string parse_dotted_name();
  std::unique_ptr<FilterExpr> parse_filter_call(ExprPtr operand);
  ExprPtr parse_test(ExprPtr operand);

  std::vector<Token> toks_;
  size_t i_ = 0;
  int nesting_ = 0;
  int loop_depth_ = 0;
  std::vector<MacroStmt*> macros_;  // the macros whose bodies are being parsed
};

}  // namespace conveyor::jinja
