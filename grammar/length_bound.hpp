// A regular expression held to a length: JSON Schema's "pattern" or
// "format" with "minLength"/"maxLength" on the same string.
//
// The expression (regex.hpp's tree, over code points) becomes a
// deterministic automaton by the subset construction, over the intervals
// its character classes split the code points into; its product with a
// count of the characters read is then written as rules, one for each
// (automaton state, count) pair that the start reaches and that can still
// end at an allowed length:
//
//   S_{d,k} ::= c1 S_{d1,k+1} | c2 S_{d2,k+1} | ...   ("" too when d accepts
//                                                        and k >= minLength)
//
// Without a maxLength the count stops at minLength. Deterministic, so every
// string has one parse and the matcher keeps one stack for it. Lengths
// count code points, as JSON Schema does: under TextForm::json_string an
// escaped character (`\n`, `\u00e9`) is one.
//
// Thread-safety: pure functions of their arguments (and the builder).
#pragma once

#include <cstdint>

#include "base/status.hpp"
#include "grammar/expr.hpp"
#include "grammar/grammar.hpp"

namespace conveyor::grammar {

// Limits on the work one bounded pattern may cause: the automaton's states
// (before and after the subset construction) and the product's rules.
inline constexpr int32_t kMaxLengthBoundNfaStates = 100000;
inline constexpr int32_t kMaxLengthBoundDfaStates = 4000;
inline constexpr int32_t kMaxLengthBoundRules = 100000;

// The strings of `e` with min_length to max_length code points (max_length
// < 0: no upper bound), lowered into `b` in `form`. An element that never
// matches when there are none. Errors (Errc::invalid_argument) when a limit
// above is passed, or for rule references (GBNF's, which may recurse).
Expected<Element> add_length_bounded(GrammarBuilder& b, const Expr& e, int32_t min_length, int32_t max_length,
                                     TextForm form);

}  // namespace conveyor::grammar
