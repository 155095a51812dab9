#include "model/tokenizer/utf8.hpp"

namespace conveyor::utf8 {
namespace {

// How many bytes the sequence led by `lead` needs, or 0 for a byte that can
// never start a character (continuation bytes, C0/C1 overlongs, F5..FF).
size_t sequence_length(uint8_t lead) {
  if (lead < 0x80) return 1;
  if (lead >= 0xC2 && lead <= 0xDF) return 2;
  if (lead >= 0xE0 && lead <= 0xEF) return 3;
  if (lead >= 0xF0 && lead <= 0xF4) return 4;
  return 0;
}

// Whether `byte` may follow `lead` as the continuation byte at index `index`
// (1-based) of its sequence. Index 1 carries the overlong/surrogate/range
// restrictions of the Unicode table; later ones only need 10xxxxxx.
bool valid_continuation(uint8_t lead, size_t index, uint8_t byte) {
  if (index == 1) {
    switch (lead) {
      case 0xE0: return byte >= 0xA0 && byte <= 0xBF;  // no overlongs
      case 0xED: return byte >= 0x80 && byte <= 0x9F;  // no surrogates
      case 0xF0: return byte >= 0x90 && byte <= 0xBF;  // no overlongs
      case 0xF4: return byte >= 0x80 && byte <= 0x8F;  // <= U+10FFFF
      default: break;
    }
  }
  return is_continuation(static_cast<char>(byte));
}

enum class Scan { complete, invalid, truncated };

// Examines the sequence at in[pos]; `length` receives the bytes it covers:
// the character (complete), the maximal subpart to replace (invalid), or the
// valid prefix that ran into the end of `in` (truncated).
Scan scan(std::string_view in, size_t pos, size_t& length) {
  const auto lead = static_cast<uint8_t>(in[pos]);
  const size_t need = sequence_length(lead);
  if (need == 0) {
    length = 1;
    return Scan::invalid;
  }
  for (size_t i = 1; i < need; ++i) {
    if (pos + i >= in.size()) {
      length = i;
      return Scan::truncated;
    }
    if (!valid_continuation(lead, i, static_cast<uint8_t>(in[pos + i]))) {
      length = i;
      return Scan::invalid;
    }
  }
  length = need;
  return Scan::complete;
}

}  // namespace

size_t append_valid(std::string_view in, bool final, std::string& out) {
  size_t pos = 0;
  while (pos < in.size()) {
    size_t length = 0;
    switch (scan(in, pos, length)) {
      case Scan::complete:
        out.append(in.substr(pos, length));
        break;
      case Scan::invalid:
        out.append(kReplacement);
        break;
      case Scan::truncated:
        if (!final) return pos;
        out.append(kReplacement);
        break;
    }
    pos += length;
  }
  return pos;
}

std::string sanitize(std::string_view in) {
  std::string out;
  out.reserve(in.size());
  append_valid(in, /*final=*/true, out);
  return out;
}

bool is_valid(std::string_view in) {
  size_t pos = 0;
  while (pos < in.size()) {
    size_t length = 0;
    if (scan(in, pos, length) != Scan::complete) return false;
    pos += length;
  }
  return true;
}

size_t char_length(std::string_view in, size_t pos) {
  if (pos >= in.size()) return 0;
  size_t length = 0;
  return scan(in, pos, length) == Scan::complete ? length : 0;
}

uint32_t decode_char(std::string_view in, size_t pos, size_t len) {
  const auto byte = [&](size_t i) { return static_cast<uint8_t>(in[pos + i]); };
  switch (len) {
    case 1: return byte(0);
    case 2: return (uint32_t(byte(0) & 0x1F) << 6) | (byte(1) & 0x3F);
    case 3:
      return (uint32_t(byte(0) & 0x0F) << 12) | (uint32_t(byte(1) & 0x3F) << 6) |
             (byte(2) & 0x3F);
    case 4:
      return (uint32_t(byte(0) & 0x07) << 18) | (uint32_t(byte(1) & 0x3F) << 12) |
             (uint32_t(byte(2) & 0x3F) << 6) | (byte(3) & 0x3F);
    default: return 0xFFFD;
  }
}

void append_code_point(uint32_t cp, std::string& out) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

size_t count_chars(std::string_view in) {
  size_t chars = 0;
  for (char c : in) chars += !is_continuation(c);
  return chars;
}

}  // namespace conveyor::utf8
