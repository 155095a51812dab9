#include "base/bytes.hpp"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <sstream>

#include "base/text.hpp"

namespace conveyor {

namespace {

// The multiplier of a unit ("" is bytes), or 0 for an unknown one.
double unit_multiplier(std::string unit) {
  if (!unit.empty() && unit.back() == 'b') unit.pop_back();  // KiB = Ki, GB = G, B = ""
  if (unit.empty()) return 1.0;
  const bool binary = unit.size() == 2 && unit[1] == 'i';
  if (unit.size() != 1 && !binary) return 0.0;
  const char* prefixes = "kmgt";
  const char* p = std::strchr(prefixes, unit[0]);
  if (p == nullptr || unit[0] == '\0') return 0.0;
  return std::pow(binary ? 1024.0 : 1000.0, double(p - prefixes + 1));
}

}  // namespace

Expected<int64_t> parse_byte_size(std::string_view text) {
  const std::string_view s = trim_space(text);
  auto bad = [&](const std::string& why) {
    std::string message = "'";
    message.append(text);
    message += "' is not a size: ";
    message += why;
    message += " (examples: 4GiB, 512MiB, 1.5GB, 1000000)";
    return Error{Errc::invalid_argument, std::move(message)};
  };
  if (s.empty()) return bad("it is empty");
  size_t digits = 0;
  while (digits < s.size() && (std::isdigit(static_cast<unsigned char>(s[digits])) || s[digits] == '.'))
    ++digits;
  if (digits == 0) return bad(s[0] == '-' ? "it is negative" : "it does not start with a number");
  double value = 0.0;
  const auto [end, ec] = std::from_chars(s.data(), s.data() + digits, value, std::chars_format::fixed);
  if (ec != std::errc() || end != s.data() + digits) return bad("the number is malformed");
  const std::string unit = ascii_lower(trim_space(s.substr(digits)));
  const double multiplier = unit_multiplier(unit);
  if (multiplier == 0.0) return bad("unknown unit '" + std::string(trim_space(s.substr(digits))) + "'");
  const double bytes = std::floor(value * multiplier);
  if (!std::isfinite(bytes) || bytes >= 0x1p62) return bad("it is too large");
  return int64_t(bytes);
}

std::string format_bytes(int64_t bytes) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double v = double(bytes);
  int u = 0;
  while (std::abs(v) >= 1024.0 && u < 5) {
    v /= 1024.0;
    ++u;
  }
  char buf[32];
  if (u == 0)
    std::snprintf(buf, sizeof buf, "%lld B", static_cast<long long>(bytes));
  else
    std::snprintf(buf, sizeof buf, "%.1f %s", v, units[u]);
  return buf;
}

std::optional<int64_t> parse_mem_available(std::string_view meminfo) {
  std::istringstream in{std::string(meminfo)};
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind("MemAvailable:", 0) != 0) continue;
    std::istringstream fields(line.substr(13));
    int64_t value = 0;
    std::string unit;
    if (!(fields >> value) || value < 0) return std::nullopt;
    fields >> unit;
    if (unit.empty()) return value;
    if (ascii_lower(unit) == "kb") return value * 1024;  // the kernel's "kB" is KiB
    return std::nullopt;
  }
  return std::nullopt;
}

std::optional<int64_t> read_mem_available() {
  std::ifstream in("/proc/meminfo");
  if (!in) return std::nullopt;
  std::stringstream text;
  text << in.rdbuf();
  return parse_mem_available(text.str());
}

}  // namespace conveyor
