#include "template/jinja/parser.hpp"

#include "template/jinja/parser_impl.hpp"

namespace conveyor::jinja {

// Statements until a block whose first name is in `end_tags` (left as the
// current token) or the end of the template.
Body Parser::subparse(std::initializer_list<std::string_view> end_tags) {
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
Body Parser::parse_block_body(std::initializer_list<std::string_view> end_tags, bool drop_end_name) {
  skip_op(":");
  expect(TokenKind::block_end, "end of statement block");
  Body body = subparse(end_tags);
  if (drop_end_name) advance();
  return body;
}

void Parser::parse_statement(Body& out) {
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

StmtPtr Parser::parse_for() {
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

StmtPtr Parser::parse_if() {
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

StmtPtr Parser::parse_set() {
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

void Parser::parse_signature(MacroStmt& m) {
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
void Parser::parse_macro_body(MacroStmt& m, std::string_view end_tag) {
  const int saved = loop_depth_;
  loop_depth_ = 0;
  macros_.push_back(&m);
  m.body = parse_block_body({end_tag}, true);
  macros_.pop_back();
  loop_depth_ = saved;
}

StmtPtr Parser::parse_macro() {
  auto s = std::make_unique<MacroStmt>(cur().line);
  advance();
  s->name = expect_name();
  parse_signature(*s);
  parse_macro_body(*s, "endmacro");
  return s;
}

StmtPtr Parser::parse_call_block() {
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

StmtPtr Parser::parse_filter_block() {
  auto s = std::make_unique<FilterBlockStmt>(cur().line);
  advance();
  s->filters.push_back(parse_filter_call(nullptr));
  while (skip_op("|")) s->filters.push_back(parse_filter_call(nullptr));
  s->body = parse_block_body({"endfilter"}, true);
  return s;
}

StmtPtr Parser::parse_with() {
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

std::unique_ptr<Program> parse_program(std::string_view source) {
  return Parser(tokenize(source)).run();
}

}  // namespace conveyor::jinja
