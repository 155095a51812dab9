#include "template/jinja/pystr.hpp"

#include <clocale>
#include <cstdint>
#include <cwctype>
#include <locale.h>

namespace conveyor::jinja::pystr {

size_t char_len(std::string_view s, size_t i) {
  const auto b = static_cast<unsigned char>(s[i]);
  size_t n = b < 0x80 ? 1 : (b >> 5) == 0x6 ? 2 : (b >> 4) == 0xE ? 3 : (b >> 3) == 0x1E ? 4 : 1;
  if (i + n > s.size()) return 1;
  for (size_t k = 1; k < n; ++k) {
    if ((static_cast<unsigned char>(s[i + k]) & 0xC0) != 0x80) return 1;
  }
  return n;
}

std::vector<size_t> char_starts(std::string_view s) {
  std::vector<size_t> starts;
  starts.reserve(s.size() + 1);
  for (size_t i = 0; i < s.size(); i += char_len(s, i)) starts.push_back(i);
  starts.push_back(s.size());
  return starts;
}

size_t char_count(std::string_view s) {
  size_t n = 0;
  for (size_t i = 0; i < s.size(); i += char_len(s, i)) ++n;
  return n;
}

char32_t decode_at(std::string_view s, size_t i) {
  const size_t n = char_len(s, i);
  const auto b = static_cast<unsigned char>(s[i]);
  if (n == 1) return b;
  char32_t c = b & (0xFF >> (n + 1));
  for (size_t k = 1; k < n; ++k) c = (c << 6) | (static_cast<unsigned char>(s[i + k]) & 0x3F);
  return c;
}

void append_utf8(std::string& out, char32_t c) {
  if (c < 0x80) {
    out += static_cast<char>(c);
  } else if (c < 0x800) {
    out += static_cast<char>(0xC0 | (c >> 6));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else if (c < 0x10000) {
    out += static_cast<char>(0xE0 | (c >> 12));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  } else {
    out += static_cast<char>(0xF0 | (c >> 18));
    out += static_cast<char>(0x80 | ((c >> 12) & 0x3F));
    out += static_cast<char>(0x80 | ((c >> 6) & 0x3F));
    out += static_cast<char>(0x80 | (c & 0x3F));
  }
}

bool is_space(char32_t c) {
  if (c < 0x80) return c == ' ' || (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x1F);
  return c == 0x85 || c == 0xA0 || c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 ||
         c == 0x2029 || c == 0x202F || c == 0x205F || c == 0x3000;
}

size_t space_at(std::string_view s, size_t i) {
  if (i >= s.size()) return 0;
  const size_t n = char_len(s, i);
  return is_space(decode_at(s, i)) ? n : 0;
}

// The length of the code point that ends at s[end] (1 for a stray byte).
size_t last_char_len(std::string_view s, size_t begin, size_t end) {
  for (size_t n = 1; n <= 4 && n <= end - begin; ++n) {
    const size_t start = end - n;
    if ((static_cast<unsigned char>(s[start]) & 0xC0) != 0x80) return char_len(s, start) == n ? n : 1;
  }
  return 1;
}

size_t space_before(std::string_view s, size_t end) {
  if (end == 0) return 0;
  const size_t n = last_char_len(s, 0, end);
  return is_space(decode_at(s, end - n)) ? n : 0;
}

namespace {

// Whether the code point at s[i] (of length n) is one of `chars`.
bool in_chars(std::string_view s, size_t i, size_t n, const std::string& chars) {
  const std::string_view c = s.substr(i, n);
  for (size_t k = 0; k < chars.size(); k += char_len(chars, k)) {
    if (std::string_view(chars).substr(k, char_len(chars, k)) == c) return true;
  }
  return false;
}

}  // namespace

Span strip(std::string_view s, const std::string* chars, bool left, bool right) {
  Span span{0, s.size()};
  if (left) {
    while (span.begin < span.end) {
      const size_t n = char_len(s, span.begin);
      const bool strip_it = chars ? in_chars(s, span.begin, n, *chars) : space_at(s, span.begin) > 0;
      if (!strip_it) break;
      span.begin += n;
    }
  }
  if (right) {
    while (span.end > span.begin) {
      const size_t n = last_char_len(s, span.begin, span.end);
      const bool strip_it = chars ? in_chars(s, span.end - n, n, *chars) : space_before(s, span.end) == n;
      if (!strip_it) break;
      span.end -= n;
    }
  }
  return span;
}

std::vector<Span> split(std::string_view s, const std::string* sep, long maxsplit) {
  std::vector<Span> out;
  if (sep) {
    size_t start = 0;
    while (maxsplit < 0 || static_cast<long>(out.size()) < maxsplit) {
      const size_t at = s.find(*sep, start);
      if (at == std::string_view::npos) break;
      out.push_back({start, at});
      start = at + sep->size();
    }
    out.push_back({start, s.size()});
    return out;
  }
  size_t i = 0;
  while (true) {
    while (size_t n = space_at(s, i)) i += n;
    if (i >= s.size()) break;
    if (maxsplit >= 0 && static_cast<long>(out.size()) == maxsplit) {
      out.push_back({i, s.size()});  // the rest, trailing whitespace and all
      break;
    }
    const size_t begin = i;
    while (i < s.size() && space_at(s, i) == 0) i += char_len(s, i);
    out.push_back({begin, i});
  }
  return out;
}

std::vector<Span> rsplit(std::string_view s, const std::string* sep, long maxsplit) {
  if (maxsplit < 0) return split(s, sep, maxsplit);
  std::vector<Span> out;
  if (sep) {
    size_t end = s.size();
    while (static_cast<long>(out.size()) < maxsplit && end >= sep->size()) {
      const size_t at = s.rfind(*sep, end - sep->size());
      if (at == std::string_view::npos) break;
      out.push_back({at + sep->size(), end});
      end = at;
    }
    out.push_back({0, end});
  } else {
    size_t end = s.size();
    while (true) {
      while (size_t n = space_before(s, end)) end -= n;
      if (end == 0) break;
      if (static_cast<long>(out.size()) == maxsplit) {
        out.push_back({0, end});  // the rest, leading whitespace and all
        break;
      }
      size_t begin = end;
      while (begin > 0 && space_before(s, begin) == 0) begin -= last_char_len(s, 0, begin);
      out.push_back({begin, end});
      end = begin;
    }
  }
  return {out.rbegin(), out.rend()};
}

std::vector<Span> splitlines(std::string_view s) {
  std::vector<Span> out;
  size_t begin = 0;
  size_t i = 0;
  while (i < s.size()) {
    const size_t n = char_len(s, i);
    const char32_t c = decode_at(s, i);
    const bool breaks = c == '\n' || c == '\r' || c == 0x0B || c == 0x0C || c == 0x1C || c == 0x1D ||
                        c == 0x1E || c == 0x85 || c == 0x2028 || c == 0x2029;
    if (!breaks) {
      i += n;
      continue;
    }
    out.push_back({begin, i});
    i += (c == '\r' && i + 1 < s.size() && s[i + 1] == '\n') ? 2 : n;
    begin = i;
  }
  if (begin < s.size()) out.push_back({begin, s.size()});
  return out;
}

namespace {

// Unicode simple case mappings from the C library's C.UTF-8 tables (ASCII
// alone if that locale is missing), plus Python's special cases below.
locale_t unicode_locale() {
  static const locale_t loc = newlocale(LC_CTYPE_MASK, "C.UTF-8", static_cast<locale_t>(nullptr));
  return loc;
}

char32_t upper_char(char32_t c) {
  if (c < 0x80) return c >= 'a' && c <= 'z' ? c - 32 : c;
  const locale_t loc = unicode_locale();
  return loc ? static_cast<char32_t>(towupper_l(static_cast<wint_t>(c), loc)) : c;
}

char32_t lower_char(char32_t c) {
  if (c < 0x80) return c >= 'A' && c <= 'Z' ? c + 32 : c;
  const locale_t loc = unicode_locale();
  return loc ? static_cast<char32_t>(towlower_l(static_cast<wint_t>(c), loc)) : c;
}

}  // namespace

bool is_cased(char32_t c) { return upper_char(c) != c || lower_char(c) != c; }

namespace {

void append_upper(std::string& out, char32_t c) {
  if (c == 0xDF) {  // ß
    out += "SS";
    return;
  }
  append_utf8(out, upper_char(c));
}

// Python lowers a capital sigma at the end of a word to the final form.
void append_lower(std::string& out, std::string_view s, size_t i, bool previous_cased) {
  const char32_t c = decode_at(s, i);
  if (c == 0x130) {  // İ
    out += "i\xCC\x87";
    return;
  }
  if (c == 0x3A3 && previous_cased) {
    const size_t next = i + char_len(s, i);
    if (next >= s.size() || !is_cased(decode_at(s, next))) {
      append_utf8(out, 0x3C2);
      return;
    }
  }
  append_utf8(out, lower_char(c));
}

// Calls fn(offset, code point) for each code point.
template <class Fn>
void for_each_char(std::string_view s, Fn fn) {
  for (size_t i = 0; i < s.size(); i += char_len(s, i)) fn(i, decode_at(s, i));
}

}  // namespace

std::string upper(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for_each_char(s, [&](size_t, char32_t c) { append_upper(out, c); });
  return out;
}

std::string lower(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  bool previous_cased = false;
  for_each_char(s, [&](size_t i, char32_t c) {
    append_lower(out, s, i, previous_cased);
    previous_cased = is_cased(c);
  });
  return out;
}

std::string swapcase(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for_each_char(s, [&](size_t, char32_t c) {
    if (lower_char(c) != c) append_utf8(out, lower_char(c));
    else append_upper(out, c);
  });
  return out;
}

std::string capitalize(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  bool previous_cased = false;
  for_each_char(s, [&](size_t i, char32_t c) {
    if (i == 0) append_upper(out, c);
    else append_lower(out, s, i, previous_cased);
    previous_cased = is_cased(c);
  });
  return out;
}

std::string title(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  bool previous_cased = false;
  for_each_char(s, [&](size_t i, char32_t c) {
    if (previous_cased) append_lower(out, s, i, true);
    else append_upper(out, c);
    previous_cased = is_cased(c);
  });
  return out;
}

std::string jinja_title(std::string_view s) {
  // "".join(w[0].upper() + w[1:].lower() for w in re.split(r"([-\s({\[<]+)", s) if w)
  std::string out;
  bool word_start = true;
  bool previous_cased = false;
  for_each_char(s, [&](size_t i, char32_t c) {
    const bool separator = is_space(c) || c == '-' || c == '(' || c == '{' || c == '[' || c == '<';
    if (separator) {
      append_utf8(out, c);
      word_start = true;
    } else {
      if (word_start) append_upper(out, c);
      else append_lower(out, s, i, previous_cased);
      word_start = false;
    }
    previous_cased = is_cased(c);
  });
  return out;
}

bool starts_with(std::string_view s, std::string_view p) { return s.substr(0, p.size()) == p; }
bool ends_with(std::string_view s, std::string_view p) {
  return s.size() >= p.size() && s.substr(s.size() - p.size()) == p;
}

}  // namespace conveyor::jinja::pystr
