// Grammars for JSON numbers within bounds: the JSON Schema keywords
// minimum, maximum, exclusiveMinimum and exclusiveMaximum, where a grammar
// can say them.
//
// Integers: any bounds (within +-1e18), as digit ranges: [0, 150] is
// [0-9] | [1-9][0-9] | 1[0-4][0-9] | 150, written without leading zeros.
//
// Numbers: a number is its integer part and its fraction's digits, so
// x >= 2.05 is: integer part above 2, or 2 with fraction digits from "05"
// up (compared digit by digit, as strings padded with zeros). Refused: two
// bounds that both cut into one integer's fractions ([1.2, 1.5], or
// (0, 0.5]: the fractions between two strings are not written yet), and
// bounds with more than 30 decimals. A bounded number is written without
// an exponent (1e2 is refused where 100 is accepted), and a negative one is
// never zero (-0 and -0.0 are refused; 0 and 0.0 are not).
#pragma once

#include <cstdint>
#include <optional>

#include "base/status.hpp"
#include "grammar/grammar.hpp"

namespace conveyor::grammar {

struct NumberBound {
  double value = 0;
  bool exclusive = false;
};

// Bounds beyond this magnitude are refused by the schema compiler.
inline constexpr int64_t kMaxNumberBound = 1000000000000000000;  // 1e18

// The integers in [lo, hi] (nullopt: unbounded) as JSON writes them; an
// element that never matches when the range is empty.
Element integer_range(GrammarBuilder& b, std::optional<int64_t> lo, std::optional<int64_t> hi);

// The JSON numbers x with lo < x (or <=, unless exclusive) and x < hi (or
// <=), as described above; nullopt bounds are open. Errc::invalid_argument
// for the refusals above.
Expected<Element> number_range(GrammarBuilder& b, std::optional<NumberBound> lo, std::optional<NumberBound> hi);

}  // namespace conveyor::grammar
