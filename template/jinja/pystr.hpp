// Python's str methods on UTF-8 text.
//
// Python indexes strings by code point; these helpers do the same on UTF-8
// bytes (an ill-formed byte counts as one code point). Whitespace is
// Python's str.isspace() set. Case mapping is Unicode's simple mapping (from
// the C library) plus Python's special cases for ß, İ and final sigma.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

namespace conveyor::jinja::pystr {

// The byte length of the code point that starts at s[i] (1 for a stray byte).
size_t char_len(std::string_view s, size_t i);
// Byte offsets of every code point start, plus s.size() at the end.
std::vector<size_t> char_starts(std::string_view s);
size_t char_count(std::string_view s);
// The code point at s[i] (the byte itself when ill-formed).
char32_t decode_at(std::string_view s, size_t i);
void append_utf8(std::string& out, char32_t c);

bool is_space(char32_t c);
// The length of the Python whitespace character at s[i], or 0.
size_t space_at(std::string_view s, size_t i);
// The length of the Python whitespace character that ends at s[end], or 0.
size_t space_before(std::string_view s, size_t end);

// [begin, end) byte bounds of s.strip(chars): `chars` null means whitespace.
struct Span {
  size_t begin = 0;
  size_t end = 0;
};
Span strip(std::string_view s, const std::string* chars, bool left, bool right);

// Python's str.split(sep, maxsplit) as byte spans (sep null: whitespace runs).
std::vector<Span> split(std::string_view s, const std::string* sep, long maxsplit);
std::vector<Span> rsplit(std::string_view s, const std::string* sep, long maxsplit);
// Python's str.splitlines() (keepends false) as byte spans.
std::vector<Span> splitlines(std::string_view s);

bool is_cased(char32_t c);
std::string upper(std::string_view s);
std::string lower(std::string_view s);
std::string swapcase(std::string_view s);
std::string capitalize(std::string_view s);  // str.capitalize()
std::string title(std::string_view s);       // str.title()
std::string jinja_title(std::string_view s);  // the `title` filter: words split at -, space, ( { [ <

bool starts_with(std::string_view s, std::string_view p);
bool ends_with(std::string_view s, std::string_view p);

}  // namespace conveyor::jinja::pystr
