// What the command-line programs (`conveyor`, the examples, the benchmarks)
// share about their flags: one parse with the same exit codes, and the checks
// CLI11's own do not make: its Range and PositiveNumber let "nan" through
// (every comparison with it is false), and an unsigned option wraps "-1" to
// 2^64 - 1.
#pragma once

#include <CLI/CLI.hpp>

#include <charconv>
#include <cmath>
#include <cstdint>
#include <optional>
#include <sstream>
#include <string>

namespace conveyor::cli {

// Exit codes: 0 success, 1 a failure at run time (a model that does not
// load), 2 bad arguments (the message says which).
inline constexpr int kExitFailure = 1;
inline constexpr int kExitUsage = 2;

// Parses the command line into `app`. Returns the code to exit with when the
// program should not go on: 0 after --help, kExitUsage after a bad flag (with
// CLI11's message printed; its own codes are 100 and more).
inline std::optional<int> parse_command_line(CLI::App& app, int argc, const char* const* argv) {
  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? 0 : kExitUsage;
  }
  return std::nullopt;
}

// Whether all of `text` reads as one T (std::from_chars: no sign on an
// unsigned T, no spaces, nothing left over).
template <class T>
bool read_whole(const std::string& text, T& v) {
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  return !text.empty() && ec == std::errc() && end == text.data() + text.size();
}

// A finite number in [lo, hi].
inline CLI::Validator finite_range(double lo, double hi) {
  std::ostringstream range;
  range << "[" << lo << ", " << hi << "]";
  return CLI::Validator(
      [lo, hi, range = range.str()](std::string& text) -> std::string {
        double v = 0;
        if (!read_whole(text, v) || !std::isfinite(v) || v < lo || v > hi)
          return "must be a number in " + range + ", not '" + text + "'";
        return {};
      },
      "NUMBER in " + range.str());
}

// A finite number more than 0.
inline CLI::Validator positive_number() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        double v = 0;
        if (!read_whole(text, v) || !std::isfinite(v) || v <= 0)
          return "must be a number more than 0, not '" + text + "'";
        return {};
      },
      "POSITIVE");
}

// An integer in [0, 2^64 - 1], as written (no sign, no wrap-around).
inline CLI::Validator unsigned_integer() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        uint64_t v = 0;
        if (!read_whole(text, v)) return "must be an integer from 0 to 18446744073709551615, not '" + text + "'";
        return {};
      },
      "UINT64");
}

// A power of two in [1, max].
inline CLI::Validator power_of_two(int max) {
  return CLI::Validator(
      [max](std::string& text) -> std::string {
        int v = 0;
        if (!read_whole(text, v) || v < 1 || v > max || (v & (v - 1)) != 0)
          return "must be a power of two from 1 to " + std::to_string(max) + ", not '" + text + "'";
        return {};
      },
      "POWER_OF_TWO");
}

}  // namespace conveyor::cli
