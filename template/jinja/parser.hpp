// Tokens to statements, following jinja2/parser.py: the same precedence
// (filters and tests bind tighter than arithmetic, unary minus tighter than
// `**`), the same tuple rules and the same statements, less template
// inheritance, include/import and recursive loops (syntax errors here).
#pragma once

#include <memory>
#include <string_view>

#include "template/jinja/ast.hpp"

namespace conveyor::jinja {

// Throws SyntaxError.
std::unique_ptr<Program> parse_program(std::string_view source);

}  // namespace conveyor::jinja
