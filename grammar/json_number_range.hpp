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
//
// Every number's digits are bounded (kMax*Digits, for JsonSyntax's numbers
// too): a grammar that allows any count lets a sampled model spend all of
// max_tokens on one number (seen: 330 fraction digits of a number in
// [0, 1]), so a schema whose strings and arrays are bounded would not bound
// its output.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "base/status.hpp"
#include "grammar/grammar.hpp"

namespace conveyor::grammar {

struct NumberBound {
  double value = 0;
  bool exclusive = false;
};

// Bounds beyond this magnitude are refused by the schema compiler.
inline constexpr int64_t kMaxNumberBound = 1000000000000000000;  // 1e18

// The most digits a number's integer part, fraction and exponent may have:
// every int64 and every double (17 significant digits, exponents to 308),
// and the bounds' 30 decimals.
inline constexpr int32_t kMaxIntegerDigits = 20;
inline constexpr int32_t kMaxFractionDigits = 32;
inline constexpr int32_t kMaxExponentDigits = 3;

// "Up to n more digits" (or zeros) in one builder, as chains of nested
// options that every length shares: up_to(n) is the n-th link, so a grammar
// holds one chain however many numbers it has.
class DigitRuns {
 public:
  explicit DigitRuns(GrammarBuilder& b);
  GrammarBuilder& builder() { return b_; }
  Element digit() const { return digit_; }
  // Appends "up to n digits" ('0's only with zeros) to `alt` (nothing for n <= 0).
  void up_to(Alternative& alt, int32_t n, bool zeros = false);

 private:
  GrammarBuilder& b_;
  Element digit_, zero_;
  std::vector<Element> digits_, zeros_;  // [k]: up to k + 1
};

// The integers in [lo, hi] (nullopt: unbounded) as JSON writes them; an
// element that never matches when the range is empty.
Element integer_range(DigitRuns& runs, std::optional<int64_t> lo, std::optional<int64_t> hi);

// The JSON numbers x with lo < x (or <=, unless exclusive) and x < hi (or
// <=), as described above; nullopt bounds are open. Errc::invalid_argument
// for the refusals above.
Expected<Element> number_range(DigitRuns& runs, std::optional<NumberBound> lo, std::optional<NumberBound> hi);

}  // namespace conveyor::grammar
