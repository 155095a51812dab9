#include "grammar/json_number_range.hpp"

#include <algorithm>
#include <string>
#include <vector>

namespace conveyor::grammar {
namespace {

Element digit_class(GrammarBuilder& b, char lo, char hi) {
  ByteSet s;
  s.set_range(uint8_t(lo), uint8_t(hi));
  return b.bytes(s);
}

// Alternatives for the digit strings from x to y, both of one length:
// shared leading digits, then x's tail up to 9s, a band of whole digits in
// between, and y's tail from 0s.
void same_length(GrammarBuilder& b, std::string_view x, std::string_view y, Alternative prefix,
                 std::vector<Alternative>& out) {
  if (x.empty()) {
    out.push_back(std::move(prefix));
    return;
  }
  if (x[0] == y[0]) {
    prefix.push_back(b.byte(uint8_t(x[0])));
    same_length(b, x.substr(1), y.substr(1), std::move(prefix), out);
    return;
  }
  const size_t rest = x.size() - 1;
  const bool x_tail_lowest = x.substr(1).find_first_not_of('0') == std::string_view::npos;
  const bool y_tail_highest = y.substr(1).find_first_not_of('9') == std::string_view::npos;
  char band_lo = x[0], band_hi = y[0];
  if (!x_tail_lowest) {
    Alternative p = prefix;
    p.push_back(b.byte(uint8_t(x[0])));
    same_length(b, x.substr(1), std::string(rest, '9'), std::move(p), out);
    ++band_lo;
  }
  if (!y_tail_highest) --band_hi;
  if (band_lo <= band_hi) {
    Alternative p = prefix;
    p.push_back(digit_class(b, band_lo, band_hi));
    p.insert(p.end(), rest, digit_class(b, '0', '9'));
    out.push_back(std::move(p));
  }
  if (!y_tail_highest) {
    prefix.push_back(b.byte(uint8_t(y[0])));
    same_length(b, std::string(rest, '0'), y.substr(1), std::move(prefix), out);
  }
}

uint64_t pow10(size_t n) {
  uint64_t v = 1;
  while (n--) v *= 10;
  return v;
}

// The integers in [lo, hi] (hi nullopt: unbounded) without leading zeros.
std::vector<Alternative> unsigned_range(GrammarBuilder& b, uint64_t lo, std::optional<uint64_t> hi) {
  std::vector<Alternative> out;
  if (hi && *hi < lo) return out;
  const std::string lo_text = std::to_string(lo);
  const size_t max_len = hi ? std::to_string(*hi).size() : lo_text.size();
  for (size_t len = lo_text.size(); len <= max_len; ++len) {
    const uint64_t from = len == lo_text.size() ? lo : pow10(len - 1);
    const uint64_t to = hi && len == max_len ? *hi : pow10(len) - 1;
    same_length(b, std::to_string(from), std::to_string(to), {}, out);
  }
  if (!hi) {  // every longer number
    Alternative longer{digit_class(b, '1', '9')};
    longer.insert(longer.end(), lo_text.size(), digit_class(b, '0', '9'));
    longer.push_back(b.star({digit_class(b, '0', '9')}));
    out.push_back(std::move(longer));
  }
  return out;
}

Element never(GrammarBuilder& b) { return b.bytes(ByteSet{}); }

enum class Fraction : uint8_t { any, zero, nonzero };

// Magnitudes n.f (n an integer, f a fraction) in a range: integer parts
// [lo, hi] with `fraction`.
struct Piece {
  uint64_t lo = 0;
  std::optional<uint64_t> hi;
  Fraction fraction = Fraction::any;
};

// The magnitudes m with lower < m (or <=) and m < upper (or <=), both
// bounds >= 0: see the header for why integer parts and three kinds of
// fraction say it exactly.
std::vector<Piece> magnitude_pieces(NumberBound lower, std::optional<NumberBound> upper) {
  const auto lo = uint64_t(lower.value);
  // Integer parts allowed with any fraction by each bound, and the one
  // allowed only with a nonzero (lower, exclusive) or zero (upper,
  // inclusive) fraction.
  const uint64_t any_from = lower.exclusive ? lo + 1 : lo;
  const std::optional<uint64_t> nonzero_at = lower.exclusive ? std::optional<uint64_t>(lo) : std::nullopt;
  std::optional<uint64_t> any_to, zero_at;
  bool any_upper_empty = false;
  if (upper) {
    const auto hi = uint64_t(upper->value);
    if (hi == 0) any_upper_empty = true; else any_to = hi - 1;
    if (!upper->exclusive) zero_at = hi;
  }
  std::vector<Piece> out;
  if (!any_upper_empty && (!any_to || *any_to >= any_from)) out.push_back({any_from, any_to, Fraction::any});
  if (zero_at && *zero_at >= any_from) out.push_back({*zero_at, *zero_at, Fraction::zero});
  if (nonzero_at && !any_upper_empty && (!any_to || *nonzero_at <= *any_to)) {
    out.push_back({*nonzero_at, *nonzero_at, Fraction::nonzero});
  }
  return out;
}

Element fraction_element(GrammarBuilder& b, Fraction f) {
  const Element digit = digit_class(b, '0', '9');
  switch (f) {
    case Fraction::any: return b.optional({b.byte('.'), b.plus({digit})});
    case Fraction::zero: return b.optional({b.byte('.'), b.plus({b.byte('0')})});
    case Fraction::nonzero:
      return b.choice({{b.byte('.'), b.star({b.byte('0')}), digit_class(b, '1', '9'), b.star({digit})}}, "frac");
  }
  return never(b);
}

}  // namespace

Element integer_range(GrammarBuilder& b, std::optional<int64_t> lo, std::optional<int64_t> hi) {
  std::vector<Alternative> alts;
  if (!hi || *hi >= 0) {
    alts = unsigned_range(b, uint64_t(lo ? std::max<int64_t>(*lo, 0) : 0),
                          hi ? std::optional<uint64_t>(uint64_t(*hi)) : std::nullopt);
  }
  if (!lo || *lo < 0) {  // -m for m in [max(1, -hi), -lo]
    const uint64_t m_lo = hi && *hi < 0 ? uint64_t(-*hi) : 1;
    const std::optional<uint64_t> m_hi = lo ? std::optional<uint64_t>(uint64_t(-*lo)) : std::nullopt;
    for (Alternative& alt : unsigned_range(b, m_lo, m_hi)) {
      alt.insert(alt.begin(), b.byte('-'));
      alts.push_back(std::move(alt));
    }
  }
  if (alts.empty()) return never(b);
  return b.choice(std::move(alts), "int_range");
}

Element number_range(GrammarBuilder& b, std::optional<NumberBound> lo, std::optional<NumberBound> hi) {
  std::vector<Alternative> alts;
  const auto add = [&](const std::vector<Piece>& pieces, bool negative) {
    for (const Piece& p : pieces) {
      std::vector<Alternative> ints = unsigned_range(b, p.lo, p.hi);
      if (ints.empty()) continue;
      Alternative alt;
      if (negative) alt.push_back(b.byte('-'));
      alt.push_back(b.choice(std::move(ints), "int_part"));
      alt.push_back(fraction_element(b, p.fraction));
      alts.push_back(std::move(alt));
    }
  };
  // x >= 0, written without a sign.
  if (!hi || hi->value > 0 || (hi->value == 0 && !hi->exclusive)) {
    const NumberBound lower = lo && lo->value >= 0 ? *lo : NumberBound{0, false};
    add(magnitude_pieces(lower, hi), false);
  }
  // x < 0, written as -m with m > 0: x's upper bound bounds m from below
  // and its lower bound m from above.
  if (!lo || lo->value < 0) {
    const NumberBound lower = hi && hi->value < 0 ? NumberBound{-hi->value, hi->exclusive} : NumberBound{0, true};
    const std::optional<NumberBound> upper =
        lo ? std::optional<NumberBound>(NumberBound{-lo->value, lo->exclusive}) : std::nullopt;
    add(magnitude_pieces(lower, upper), true);
  }
  if (alts.empty()) return never(b);
  return b.choice(std::move(alts), "number_range");
}

}  // namespace conveyor::grammar
