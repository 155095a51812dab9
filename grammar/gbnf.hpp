// GBNF, llama.cpp's grammar syntax, compiled to the grammar IR.
//
//   root   ::= greeting (" " name)? "!"     # `root` is the start rule
//   greeting ::= "hello" | "hi"
//   name   ::= [A-Z] [a-z]{1,15}
//
// Rules: `name ::= alternatives`. As llama.cpp reads it, a newline ends a
// rule except inside parentheses and right after `::=` or `|`. Names:
// letters, digits, '-' and '_'. Elements: "literals" and [classes] ([^...] negated, a-z ranges)
// with the escapes \n \r \t \\ \" \[ \] \- \xHH \uHHHH \UHHHHHHHH; `.` (any
// character); rule names; ( groups ); <[id]>, the token of that id, and
// <text> (<think>, <|tool_call|>), the token whose text that is (`tokens`
// finds it: one token of the vocabulary); !<[id]> and !<text>, any one token
// but that one (and the end tokens). A token reference matches tokens
// themselves, never their text. Postfix * + ? {m} {m,} {m,n} {,n}.
// Comments run from # to the end of the line. Text is UTF-8; classes and
// `.` match characters (code points), not bytes.
//
// Refused with the line and column: a reference to a rule never defined, a
// rule defined twice, no `root` rule, left recursion (naming the cycle:
// the matcher cannot run it), counts above kMaxRepeatCount, a <text> that is
// not one token (or given without `tokens`), and syntax errors. compile() refuses a token id the
// vocabulary lacks or that ends generation. A repetition of something
// that can match nothing (`("a"?)*`) is fine: it is lowered as the
// repetition of its non-empty strings.
#pragma once

#include <cstdint>
#include <functional>
#include <string_view>

#include "base/status.hpp"
#include "grammar/grammar.hpp"

namespace conveyor::grammar {

// Errors: Errc::invalid_argument, "gbnf: <what> (line L, column C)".
// `tokens`: the id of the one token whose text is the argument, or -1.
using TokenLookup = std::function<int32_t(std::string_view text)>;
Expected<Grammar> grammar_from_gbnf(std::string_view text, const TokenLookup& tokens = {});

}  // namespace conveyor::grammar
