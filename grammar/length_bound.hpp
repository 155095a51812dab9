// Regular expressions held to a length and to each other: JSON Schema's
// "pattern" and "format" with "minLength"/"maxLength" on the same string.
//
// Each expression (regex.hpp's tree, over code points) becomes a
// deterministic automaton by the subset construction, over the intervals
// its character classes split the code points into; several are
// intersected (pairs of states). The automaton's product with a count of
// the characters read is then written as rules, one for each
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
#include <span>

#include "base/status.hpp"
#include "grammar/expr.hpp"
#include "grammar/grammar.hpp"

namespace conveyor::grammar {

// Limits on the work one bounded pattern may cause: the automaton's states
// (before and after the subset construction) and the product's rules.
inline constexpr int32_t kMaxLengthBoundNfaStates = 100000;
inline constexpr int32_t kMaxLengthBoundDfaStates = 4000;
inline constexpr int32_t kMaxLengthBoundRules = 100000;
// ... the product's alternatives (moves of the rules above), and the subset
// construction's steps (NFA states and moves visited): compiling is on a
// request's path, so refusing a pattern takes about a tenth of a second at
// most (a 2-core EPYC: 4-122 ms for the hostile patterns tried).
inline constexpr int64_t kMaxLengthBoundMoves = 400000;
inline constexpr int64_t kMaxLengthBoundWork = 4000000;

// The strings that every expression of `exprs` matches and that have
// min_length to max_length code points (max_length < 0: no upper bound),
// lowered into `b` in `form`: with several expressions their automata are
// intersected (pairs of states) before the count is added. An element that
// never matches when there are no such strings. Errors
// (Errc::invalid_argument) when a limit above is passed, for rule
// references (GBNF's, which may recurse) and for an empty `exprs`.
Expected<Element> add_bounded_regexes(GrammarBuilder& b, std::span<const Expr> exprs, int32_t min_length,
                                      int32_t max_length, TextForm form);

}  // namespace conveyor::grammar
