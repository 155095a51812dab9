// What every grammar compiler fuzzer checks of a result: a grammar passes
// check() and stays within the rule budget; an error is invalid_argument
// with the compiler's prefix. Any crash or sanitizer report is a finding.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string_view>

#include "grammar/expr.hpp"
#include "grammar/grammar.hpp"

namespace conveyor::grammar::fuzz {

inline void expect(bool ok, const char* what) {
  if (!ok) {
    std::fprintf(stderr, "grammar fuzz: %s\n", what);
    std::abort();
  }
}

inline void check_result(const Expected<Grammar>& g, std::string_view prefix) {
  if (!g) {
    expect(g.error().code == Errc::invalid_argument, "an error that is not invalid_argument");
    expect(g.error().message.starts_with(prefix), "an error without the compiler's prefix");
    return;
  }
  expect(check(*g).is_ok(), "a compiled grammar fails check()");
  expect(g->rules.size() <= size_t(kMaxGrammarRules) + 1000, "a grammar beyond the rule budget");
  expect(!to_string(*g).empty(), "an empty dump");
}

}  // namespace conveyor::grammar::fuzz
