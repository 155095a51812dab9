#include "grammar/json_number_range.hpp"

#include <algorithm>
#include <charconv>
#include <cmath>
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

// The integers in [lo, hi] (hi nullopt: up to kMaxIntegerDigits digits)
// without leading zeros.
std::vector<Alternative> unsigned_range(DigitRuns& runs, uint64_t lo, std::optional<uint64_t> hi) {
  GrammarBuilder& b = runs.builder();
  std::vector<Alternative> out;
  if (hi && *hi < lo) return out;
  const std::string lo_text = std::to_string(lo);
  const size_t max_len = hi ? std::to_string(*hi).size() : lo_text.size();
  for (size_t len = lo_text.size(); len <= max_len; ++len) {
    const uint64_t from = len == lo_text.size() ? lo : pow10(len - 1);
    const uint64_t to = hi && len == max_len ? *hi : pow10(len) - 1;
    same_length(b, std::to_string(from), std::to_string(to), {}, out);
  }
  if (!hi && int32_t(lo_text.size()) < kMaxIntegerDigits) {  // every longer number
    Alternative longer{digit_class(b, '1', '9')};
    longer.insert(longer.end(), lo_text.size(), runs.digit());
    runs.up_to(longer, kMaxIntegerDigits - 1 - int32_t(lo_text.size()));
    out.push_back(std::move(longer));
  }
  return out;
}

Element never(GrammarBuilder& b) { return b.bytes(ByteSet{}); }

// A bound's magnitude as decimal digits: integer part and fraction digits
// without trailing zeros (2.05 -> 2, "05").
struct Decimal {
  uint64_t integer = 0;
  std::string fraction;
};

constexpr size_t kMaxDecimals = 30;

Expected<Decimal> decimal_of(double magnitude) {
  char buf[64];
  const auto r = std::to_chars(buf, buf + sizeof buf, magnitude, std::chars_format::scientific);
  const std::string_view text(buf, size_t(r.ptr - buf));  // d.ddde+XX
  const size_t e = text.find('e');
  std::string digits(text.substr(0, 1));
  if (e > 1) digits += text.substr(2, e - 2);
  const int exponent = std::stoi(std::string(text.substr(e + 1)));
  // value = 0.digits * 10^(exponent + 1)
  const int point = exponent + 1;
  std::string int_part, frac;
  if (point <= 0) {
    frac = std::string(size_t(-point), '0') + digits;
  } else if (size_t(point) >= digits.size()) {
    int_part = digits + std::string(size_t(point) - digits.size(), '0');
  } else {
    int_part = digits.substr(0, size_t(point));
    frac = digits.substr(size_t(point));
  }
  while (!frac.empty() && frac.back() == '0') frac.pop_back();
  if (frac.size() > kMaxDecimals) {
    return make_error(Errc::invalid_argument, "number bounds with more than 30 decimals are not supported");
  }
  return Decimal{int_part.empty() ? 0 : std::stoull(int_part), frac};
}

// A bound on a magnitude's fraction digits D (an absent fraction is ""),
// compared as digit strings padded with zeros: D >= digits (lower), D >
// digits (lower, strict), D <= digits, D < digits.
struct FractionBound {
  std::string digits;
  bool lower = true;
  bool strict = false;
  bool any() const { return lower && !strict && digits.empty(); }  // D >= "": every fraction
};

// Magnitudes with integer parts [lo, hi] and a fraction within `fraction`
// (nullopt: any).
struct Piece {
  uint64_t lo = 0;
  std::optional<uint64_t> hi;
  std::optional<FractionBound> fraction;
};

struct MagnitudeBound {
  Decimal at;
  bool exclusive = false;
};

// The magnitudes m with lower < m (or <=) and m < upper (or <=): integer
// parts strictly between the bounds' with any fraction, and the bounds'
// own integer parts with the fractions their bound allows.
Expected<std::vector<Piece>> magnitude_pieces(const MagnitudeBound& lower, const std::optional<MagnitudeBound>& upper) {
  const uint64_t n_lo = lower.at.integer;
  FractionBound at_lo{lower.at.fraction, true, lower.exclusive};
  std::vector<Piece> out;
  if (!upper) {
    out.push_back({n_lo + 1, std::nullopt, std::nullopt});
    out.push_back({n_lo, n_lo, at_lo});
    return out;
  }
  const uint64_t n_hi = upper->at.integer;
  const FractionBound at_hi{upper->at.fraction, false, upper->exclusive};
  if (n_hi < n_lo) return out;
  if (n_hi == n_lo) {
    const bool upper_none = at_hi.strict && at_hi.digits.empty();   // D < ""
    const bool upper_zero = !at_hi.strict && at_hi.digits.empty();  // D <= "": zeros only
    if (upper_none || (upper_zero && !at_lo.any())) return out;     // the lower bound wants a nonzero D
    if (!at_lo.any()) {
      return make_error(Errc::invalid_argument, "two bounds within one integer's fractions are not supported");
    }
    out.push_back({n_lo, n_lo, at_hi});
    return out;
  }
  if (n_hi > n_lo + 1) out.push_back({n_lo + 1, n_hi - 1, std::nullopt});
  out.push_back({n_lo, n_lo, at_lo});
  out.push_back({n_hi, n_hi, at_hi});
  return out;
}

// "." and the fraction digits a bound allows, or nothing where it allows an
// absent fraction; nullopt when no fraction satisfies it. At most about
// kMaxFractionDigits digits (a strict lower bound's zeros and what follows
// them may pass it by a few).
std::optional<Element> fraction_element(DigitRuns& runs, const std::optional<FractionBound>& f) {
  GrammarBuilder& b = runs.builder();
  const Element digit = runs.digit();
  const Element dot = b.byte('.');
  if (!f || f->any()) {
    Alternative some{dot, digit};
    runs.up_to(some, kMaxFractionDigits - 1);
    return b.optional(some);
  }
  const std::string& d = f->digits;
  const auto left = [&](size_t used) { return kMaxFractionDigits - int32_t(used); };
  std::vector<Alternative> alts;
  // D differs from d first at i, by a larger (lower bound) or smaller digit.
  for (size_t i = 0; i < d.size(); ++i) {
    if (f->lower ? d[i] == '9' : d[i] == '0') continue;
    Alternative alt{dot};
    for (size_t k = 0; k < i; ++k) alt.push_back(b.byte(uint8_t(d[k])));
    alt.push_back(f->lower ? digit_class(b, char(d[i] + 1), '9') : digit_class(b, '0', char(d[i] - 1)));
    runs.up_to(alt, left(i + 1));
    alts.push_back(std::move(alt));
  }
  // D starts with d.
  Alternative same{dot};
  for (char c : d) same.push_back(b.byte(uint8_t(c)));
  if (f->lower) {
    if (f->strict) {  // then something nonzero
      runs.up_to(same, left(d.size() + 1), /*zeros=*/true);
      same.push_back(digit_class(b, '1', '9'));
    }
    runs.up_to(same, left(d.size() + (f->strict ? 1 : 0)));
    if (!d.empty() || f->strict) alts.push_back(std::move(same));
  } else {
    // D a proper prefix of d (or absent) is smaller: d ends in a nonzero digit.
    if (!d.empty()) alts.push_back({});
    for (size_t j = 1; j < d.size(); ++j) {
      Alternative prefix{dot};
      for (size_t k = 0; k < j; ++k) prefix.push_back(b.byte(uint8_t(d[k])));
      alts.push_back(std::move(prefix));
    }
    if (!f->strict) {  // D == d, zeros after
      if (d.empty()) {
        alts.push_back({});
        same.push_back(b.byte('0'));
        runs.up_to(same, left(1), /*zeros=*/true);
      } else {
        runs.up_to(same, left(d.size()), /*zeros=*/true);
      }
      alts.push_back(std::move(same));
    }
  }
  if (alts.empty()) return std::nullopt;
  return b.choice(std::move(alts), "frac");
}

}  // namespace

DigitRuns::DigitRuns(GrammarBuilder& b) : b_(b), digit_(digit_class(b, '0', '9')), zero_(b.byte('0')) {}

void DigitRuns::up_to(Alternative& alt, int32_t n, bool zeros) {
  if (n <= 0) return;
  std::vector<Element>& chain = zeros ? zeros_ : digits_;
  const Element one = zeros ? zero_ : digit_;
  while (int32_t(chain.size()) < n) {
    chain.push_back(chain.empty() ? b_.optional({one}) : b_.optional({one, chain.back()}));
  }
  alt.push_back(chain[size_t(n - 1)]);
}

Element integer_range(DigitRuns& runs, std::optional<int64_t> lo, std::optional<int64_t> hi) {
  GrammarBuilder& b = runs.builder();
  std::vector<Alternative> alts;
  if (!hi || *hi >= 0) {
    alts = unsigned_range(runs, uint64_t(lo ? std::max<int64_t>(*lo, 0) : 0),
                          hi ? std::optional<uint64_t>(uint64_t(*hi)) : std::nullopt);
  }
  if (!lo || *lo < 0) {  // -m for m in [max(1, -hi), -lo]
    const uint64_t m_lo = hi && *hi < 0 ? uint64_t(-*hi) : 1;
    std::vector<Alternative> negative =
        lo ? unsigned_range(runs, m_lo, uint64_t(-*lo)) : unsigned_range(runs, m_lo, std::nullopt);
    for (Alternative& alt : negative) {
      alt.insert(alt.begin(), b.byte('-'));
      alts.push_back(std::move(alt));
    }
  }
  if (alts.empty()) return never(b);
  return b.choice(std::move(alts), "int_range");
}

Expected<Element> number_range(DigitRuns& runs, std::optional<NumberBound> lo, std::optional<NumberBound> hi) {
  GrammarBuilder& b = runs.builder();
  std::vector<Alternative> alts;
  const auto add = [&](const std::vector<Piece>& pieces, bool negative) {
    for (const Piece& p : pieces) {
      std::vector<Alternative> ints = unsigned_range(runs, p.lo, p.hi);
      const std::optional<Element> fraction = fraction_element(runs, p.fraction);
      if (ints.empty() || !fraction) continue;
      Alternative alt;
      if (negative) alt.push_back(b.byte('-'));
      alt.push_back(b.choice(std::move(ints), "int_part"));
      alt.push_back(*fraction);
      alts.push_back(std::move(alt));
    }
  };
  const auto magnitude = [](double v, bool exclusive) -> Expected<MagnitudeBound> {
    auto d = decimal_of(std::fabs(v));
    if (!d) return d.error();
    return MagnitudeBound{*d, exclusive};
  };
  // x >= 0, written without a sign.
  if (!hi || hi->value > 0 || (hi->value == 0 && !hi->exclusive)) {
    auto lower = lo && lo->value >= 0 ? magnitude(lo->value, lo->exclusive) : magnitude(0, false);
    if (!lower) return lower.error();
    std::optional<MagnitudeBound> upper;
    if (hi) {
      auto u = magnitude(hi->value, hi->exclusive);
      if (!u) return u.error();
      upper = *u;
    }
    auto pieces = magnitude_pieces(*lower, upper);
    if (!pieces) return pieces.error();
    add(*pieces, false);
  }
  // x < 0, written as -m with m > 0: x's upper bound bounds m from below
  // and its lower bound m from above.
  if (!lo || lo->value < 0) {
    auto lower = hi && hi->value < 0 ? magnitude(hi->value, hi->exclusive) : magnitude(0, true);
    if (!lower) return lower.error();
    std::optional<MagnitudeBound> upper;
    if (lo) {
      auto u = magnitude(lo->value, lo->exclusive);
      if (!u) return u.error();
      upper = *u;
    }
    auto pieces = magnitude_pieces(*lower, upper);
    if (!pieces) return pieces.error();
    add(*pieces, true);
  }
  if (alts.empty()) return never(b);
  return b.choice(std::move(alts), "number_range");
}

}  // namespace conveyor::grammar
