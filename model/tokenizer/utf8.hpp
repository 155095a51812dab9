// UTF-8 helpers shared by the tokenizers and the incremental detokenizer.
//
// Validation follows the Unicode standard's well-formedness table (no
// overlongs, no surrogates, nothing above U+10FFFF) and its "maximal subpart"
// rule for replacement: each maximal prefix of a sequence that could have
// become valid is replaced by one U+FFFD, as browsers and Python do.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

namespace conveyor::utf8 {

inline constexpr std::string_view kReplacement = "\xEF\xBF\xBD";  // U+FFFD

// Appends `in` to `out` with each ill-formed subsequence replaced by U+FFFD.
// When `final` is false, a well-formed but incomplete sequence at the very end
// is not consumed. Returns how many bytes of `in` were consumed (all of them
// when `final`); the rest (at most 3 bytes) must be offered again later.
size_t append_valid(std::string_view in, bool final, std::string& out);

// `in` with every ill-formed subsequence replaced by U+FFFD.
std::string sanitize(std::string_view in);

// True when `in` is entirely well-formed UTF-8.
bool is_valid(std::string_view in);

// Length of the well-formed character starting at in[pos], or 0 when the
// bytes there do not start one (invalid, or cut short by the end of `in`).
size_t char_length(std::string_view in, size_t pos);

// The code point of the well-formed character of length `len` at in[pos].
uint32_t decode_char(std::string_view in, size_t pos, size_t len);

// Whether `byte` is a continuation byte (10xxxxxx), which no character starts with.
inline bool is_continuation(char byte) { return (static_cast<uint8_t>(byte) & 0xC0) == 0x80; }

// The characters (code points) of `in`: its bytes that are not continuation
// bytes, so a character cut at the end counts by its lead byte.
size_t count_chars(std::string_view in);

// Appends the UTF-8 encoding of code point `cp` (assumed a scalar value).
void append_code_point(uint32_t cp, std::string& out);

}  // namespace conveyor::utf8
