// Small ASCII text helpers for parsing what people type (flags, headers).
#pragma once

#include <cctype>
#include <string>
#include <string_view>

namespace conveyor {

// `s` with ASCII letters in lower case (other bytes as they are).
inline std::string ascii_lower(std::string_view s) {
  std::string out(s);
  for (char& c : out) c = char(std::tolower(static_cast<unsigned char>(c)));
  return out;
}

// `s` without leading and trailing whitespace.
inline std::string_view trim_space(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

}  // namespace conveyor
