// Generated text for the terminal: the embedded default model has random
// weights, so its text is arbitrary bytes (control characters included).
#pragma once

#include <cstdio>
#include <string>
#include <string_view>

namespace conveyor::examples {

// `text` with control characters, quotes and backslashes escaped, so that
// random bytes print on one line.
inline std::string printable(std::string_view text) {
  std::string out;
  for (unsigned char c : text) {
    if (c == '\\' || c == '"') {
      out += '\\';
      out += char(c);
    } else if (c == '\n') {
      out += "\\n";
    } else if (c < 0x20 || c == 0x7f) {
      char buf[8];
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
    } else {
      out += char(c);
    }
  }
  return out;
}

}  // namespace conveyor::examples
