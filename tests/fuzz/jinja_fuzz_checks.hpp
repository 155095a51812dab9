// What both Jinja fuzz targets check of a render (template/jinja/jinja.hpp's
// contract): the data ranges are sorted, disjoint, merged and inside the
// text; an error says its line; a template and data that are valid UTF-8
// give valid UTF-8 (Python's str cannot hold anything else); rendering the
// same input again gives the same bytes (a Template is immutable).
#pragma once

#include <chrono>
#include <cstdint>
#include <string_view>

#include "template/jinja/jinja.hpp"

namespace conveyor::fuzz {

inline void check(bool ok) {
  if (!ok) __builtin_trap();
}

// Well-formed UTF-8 as Python encodes str: no overlongs, no surrogates, at
// most U+10FFFF.
inline bool valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto b = uint8_t(s[i]);
    size_t n;
    uint32_t cp;
    if (b < 0x80) { ++i; continue; }
    if (b >= 0xC2 && b <= 0xDF) { n = 1; cp = b & 0x1F; }
    else if (b >= 0xE0 && b <= 0xEF) { n = 2; cp = b & 0x0F; }
    else if (b >= 0xF0 && b <= 0xF4) { n = 3; cp = b & 0x07; }
    else return false;
    if (s.size() - i <= n) return false;  // truncated
    for (size_t k = 1; k <= n; ++k) {
      const auto c = uint8_t(s[i + k]);
      if ((c & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (c & 0x3F);
    }
    if ((n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF))
      return false;
    i += n + 1;
  }
  return true;
}

inline void check_rendered(const Expected<jinja::Rendered>& r, bool utf8_in) {
  if (!r) {
    const std::string& m = r.error().message;
    check(m.rfind("line ", 0) == 0 && m.find(": ") != std::string::npos);
    return;
  }
  const jinja::Rendered& out = r.value();
  for (size_t i = 0; i < out.data.size(); ++i) {
    check(out.data[i].begin < out.data[i].end && out.data[i].end <= out.text.size());
    if (i > 0) check(out.data[i - 1].end < out.data[i].begin);  // merged: no touching ranges
  }
  if (utf8_in) check(valid_utf8(out.text));
}

inline void check_same(const Expected<jinja::Rendered>& a, const Expected<jinja::Rendered>& b) {
  check(bool(a) == bool(b));
  if (!a) return check(a.error().message == b.error().message);
  check(a.value().text == b.value().text && a.value().data.size() == b.value().data.size());
  for (size_t i = 0; i < a.value().data.size(); ++i)
    check(a.value().data[i].begin == b.value().data[i].begin && a.value().data[i].end == b.value().data[i].end);
}

// Far below the defaults, so each input renders in milliseconds.
inline jinja::RenderOptions fuzz_render_options() {
  jinja::RenderOptions o;
  o.limits.max_output_bytes = 256 << 10;
  o.limits.max_steps = 200'000;
  o.limits.max_call_depth = 32;
  o.now = std::chrono::system_clock::time_point(std::chrono::seconds(1'700'000'000));
  return o;
}

}  // namespace conveyor::fuzz
