#include "model/tokenizer/word_splitters.hpp"

#include <unicode/uchar.h>
#include <unicode/utf16.h>

#include <algorithm>
#include <array>

namespace conveyor::tokenizer_detail {
namespace {

// \p{L}, \p{N}, \s (Unicode White_Space) or anything else; kEnd past the span.
enum Class : uint8_t { kLetter, kNumber, kSpace, kOther, kEnd };

Class classify_slow(uint32_t cp) {
  if (u_isUWhiteSpace(UChar32(cp))) return kSpace;
  const int8_t type = u_charType(UChar32(cp));
  if (type >= U_UPPERCASE_LETTER && type <= U_OTHER_LETTER) return kLetter;
  if (type >= U_DECIMAL_DIGIT_NUMBER && type <= U_OTHER_NUMBER) return kNumber;
  return kOther;
}

const std::array<Class, 128>& ascii_classes() {
  static const std::array<Class, 128> table = [] {
    std::array<Class, 128> t{};
    for (uint32_t c = 0; c < 128; ++c) t[c] = classify_slow(c);
    return t;
  }();
  return table;
}

// The span as a sequence of characters.
class Text {
 public:
  Text(const char16_t* units, int32_t end) : u_(units), end_(end), ascii_(ascii_classes()) {}

  int32_t end() const { return end_; }
  char16_t unit(int32_t i) const { return i < end_ ? u_[i] : 0; }
  bool is(int32_t i, char16_t c) const { return i < end_ && u_[i] == c; }
  bool is_newline(int32_t i) const { return is(i, '\r') || is(i, '\n'); }

  int32_t next(int32_t i) const { return U16_IS_LEAD(u_[i]) && i + 1 < end_ ? i + 2 : i + 1; }

  Class cls(int32_t i) const {
    if (i >= end_) return kEnd;
    const char16_t c = u_[i];
    if (c < 128) return ascii_[c];
    if (U16_IS_LEAD(c) && i + 1 < end_) return classify_slow(U16_GET_SUPPLEMENTARY(c, u_[i + 1]));
    return classify_slow(c);
  }

  // The end of the run of characters of class `c` from `i`.
  int32_t run(int32_t i, Class c) const {
    while (cls(i) == c) i = next(i);
    return i;
  }

 private:
  const char16_t* u_;
  int32_t end_;
  const std::array<Class, 128>& ascii_;
};

// 's 't 're 've 'm 'll 'd at `i` (ASCII case variants too when `any_case`):
// the end of the match, or `i`.
int32_t contraction(const Text& t, int32_t i, bool any_case) {
  if (!t.is(i, '\'')) return i;
  const auto at = [&](int32_t k) -> char16_t {
    const char16_t c = t.unit(k);
    return any_case && c >= 'A' && c <= 'Z' ? char16_t(c + ('a' - 'A')) : c;
  };
  const char16_t a = at(i + 1);
  if (a == 's' || a == 't' || a == 'm' || a == 'd') return i + 2;
  const char16_t b = at(i + 2);
  if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return i + 3;
  return i;
}

// \s+(?!\S)|\s+ at `i`, where a space starts: a run of spaces before a
// non-space leaves its last space (always one code unit) to the next piece.
int32_t spaces(const Text& t, int32_t i) {
  const int32_t end = t.run(i, kSpace);
  return end < t.end() && end - i >= 2 ? end - 1 : end;
}

int32_t gpt2_match(const Text& t, int32_t i) {
  if (const int32_t e = contraction(t, i, false); e > i) return e;
  const int32_t body = t.is(i, ' ') ? i + 1 : i;
  const Class c = t.cls(body);
  if (c == kLetter || c == kNumber || c == kOther) return t.run(body, c);
  return spaces(t, i);
}

int32_t llama3_match(const Text& t, int32_t i, int max_digits) {
  if (const int32_t e = contraction(t, i, true); e > i) return e;
  const Class c = t.cls(i);
  // [^\r\n\p{L}\p{N}]?\p{L}+
  if (c == kLetter) return t.run(i, kLetter);
  if (c != kNumber && !t.is_newline(i) && t.cls(t.next(i)) == kLetter)
    return t.run(t.next(i), kLetter);
  // \p{N}{1,max}
  if (c == kNumber) {
    int32_t end = i;
    for (int n = 0; n < max_digits && t.cls(end) == kNumber; ++n) end = t.next(end);
    return end;
  }
  // " ?[^\s\p{L}\p{N}]+[\r\n]*"
  const int32_t body = t.is(i, ' ') ? i + 1 : i;
  if (t.cls(body) == kOther) {
    int32_t end = t.run(body, kOther);
    while (t.is_newline(end)) ++end;
    return end;
  }
  // \s*[\r\n]+: the spaces up to and including the last line break among them.
  const int32_t end = t.run(i, kSpace);
  for (int32_t k = end; k > i; --k)
    if (t.is_newline(k - 1)) return k;
  return spaces(t, i);
}

}  // namespace

void split_words(WordSplitter kind, const char16_t* units, int32_t begin, int32_t end,
                 std::vector<Span16>& out) {
  const Text t(units, end);
  int32_t i = begin;
  while (i < end) {
    int32_t next = i;
    switch (kind) {
      case WordSplitter::gpt2: next = gpt2_match(t, i); break;
      case WordSplitter::llama3: next = llama3_match(t, i, 3); break;
      case WordSplitter::qwen2: next = llama3_match(t, i, 1); break;
    }
    next = std::max(next, t.next(i));  // never stall (every character matches anyway)
    out.push_back({i, next});
    i = next;
  }
}

}  // namespace conveyor::tokenizer_detail
