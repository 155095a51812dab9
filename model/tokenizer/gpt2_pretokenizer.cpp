#include "model/tokenizer/gpt2_pretokenizer.hpp"

#include <cstdint>

#include "model/tokenizer/unicode_class.hpp"
#include "model/tokenizer/utf8.hpp"

namespace conveyor::tokenizer_detail {
namespace {

constexpr uint32_t kNoCodePoint = 0xFFFFFFFF;  // an ill-formed byte, or past the end

struct Unit {
  size_t offset;  // bytes into the text
  uint32_t code_point;
  CharClass cls;
};

std::vector<Unit> split_units(std::string_view text) {
  std::vector<Unit> units;
  units.reserve(text.size());
  size_t pos = 0;
  while (pos < text.size()) {
    const size_t length = utf8::char_length(text, pos);
    if (length == 0) {
      units.push_back({pos, kNoCodePoint, CharClass::other});
      pos += 1;
    } else {
      const uint32_t cp = utf8::decode_char(text, pos, length);
      units.push_back({pos, cp, classify(cp)});
      pos += length;
    }
  }
  return units;
}

// Runs the pattern's alternatives in order at each position, like a regex
// engine that takes the first alternative that matches.
class Splitter {
 public:
  Splitter(std::string_view text, std::vector<Unit> units)
      : text_(text), units_(std::move(units)) {}

  std::vector<std::string_view> run() {
    size_t pos = 0;
    while (pos < units_.size()) pos = match_at(pos);
    return std::move(pieces_);
  }

 private:
  uint32_t cp(size_t i) const { return i < units_.size() ? units_[i].code_point : kNoCodePoint; }
  bool has(size_t i, CharClass cls) const { return i < units_.size() && units_[i].cls == cls; }

  // Emits units [start, end) as one piece and returns `end`.
  size_t emit(size_t start, size_t end) {
    const size_t from = units_[start].offset;
    const size_t to = end < units_.size() ? units_[end].offset : text_.size();
    pieces_.push_back(text_.substr(from, to - from));
    return end;
  }

  size_t match_at(size_t pos) {
    if (const size_t n = contraction_length(pos); n > 0) return emit(pos, pos + n);

    // An optional leading space, then a run of one class.
    const size_t body = cp(pos) == ' ' ? pos + 1 : pos;
    for (CharClass cls : {CharClass::letter, CharClass::number, CharClass::other}) {
      if (has(body, cls)) {
        size_t end = body;
        while (has(end, cls)) ++end;
        return emit(pos, end);
      }
    }

    size_t end = pos;
    while (has(end, CharClass::whitespace)) ++end;
    const size_t spaces = end - pos;
    // \s+(?!\S): a run of spaces before a non-space leaves its last space
    // to prefix the next word.
    if (spaces > 1 && end < units_.size()) return emit(pos, end - 1);
    if (spaces > 0) return emit(pos, end);
    return emit(pos, pos + 1);  // unreachable: every unit has a class
  }

  // 's 't 're 've 'm 'll 'd (case-sensitive, as in GPT-2).
  size_t contraction_length(size_t pos) const {
    if (cp(pos) != '\'') return 0;
    const uint32_t a = cp(pos + 1);
    if (a == 's' || a == 't' || a == 'm' || a == 'd') return 2;
    const uint32_t b = cp(pos + 2);
    if ((a == 'r' && b == 'e') || (a == 'v' && b == 'e') || (a == 'l' && b == 'l')) return 3;
    return 0;
  }

  std::string_view text_;
  std::vector<Unit> units_;
  std::vector<std::string_view> pieces_;
};

}  // namespace

std::vector<std::string_view> gpt2_pretokenize(std::string_view text) {
  return Splitter(text, split_units(text)).run();
}

}  // namespace conveyor::tokenizer_detail
