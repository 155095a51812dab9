// Template source to tokens, following jinja2/lexer.py with trim_blocks and
// lstrip_blocks on:
//  - text outside tags is one `text` token; comments vanish;
//  - `{%-`, `{{-`, `{#-` strip all whitespace before the tag, `-%}`, `-}}`,
//    `-#}` all whitespace after it;
//  - trim_blocks: the first newline after `%}` or `#}` is dropped (`+%}` keeps it);
//  - lstrip_blocks: spaces and tabs between a line start and `{%` / `{#` are
//    dropped (`{%+` keeps them);
//  - `{% raw %}...{% endraw %}` is text.
// Newlines (\r\n, \r) become \n and one trailing newline is dropped first.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace conveyor::jinja {

// A parse failure at a line; Template::parse turns it into an Error.
struct SyntaxError {
  int line = 0;
  std::string message;
};

enum class TokenKind : uint8_t {
  text,
  variable_begin,  // {{
  variable_end,    // }}
  block_begin,     // {%
  block_end,       // %}
  name,
  string,
  integer,
  floating,
  op,              // + - * / // % ** ~ [ ] ( ) { } == != < <= > >= = . : | , ;
  eof,
};

struct Token {
  TokenKind kind = TokenKind::eof;
  std::string value;  // text, name, operator, or the string literal's value
  int64_t int_value = 0;
  double float_value = 0;
  int line = 1;
};

// Throws SyntaxError.
std::vector<Token> tokenize(std::string_view source);

}  // namespace conveyor::jinja
