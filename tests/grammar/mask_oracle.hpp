// Helpers for the matcher's tests: the brute-force mask (every token tried on
// a copy of the matcher), a toy vocabulary, and a small JSON grammar built
// with GrammarBuilder.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "grammar/grammar.hpp"
#include "grammar/matcher.hpp"
#include "grammar/vocabulary.hpp"

namespace conveyor::grammar::testing {

// Bit t set when a copy of `m` accepts token t: what fill_mask must equal.
inline std::vector<uint64_t> brute_force_mask(const Matcher& m) {
  std::vector<uint64_t> mask(m.mask_words(), 0);
  for (int32_t t = 0; t < m.vocab_size(); ++t) {
    Matcher copy = m;
    if (copy.accept_token(t)) mask[size_t(t) >> 6] |= uint64_t(1) << (t & 63);
  }
  return mask;
}

inline std::vector<uint64_t> mask_of(const Matcher& m) {
  std::vector<uint64_t> mask(m.mask_words());
  m.fill_mask(mask);
  return mask;
}

inline std::vector<int32_t> allowed_tokens(const std::vector<uint64_t>& mask) {
  std::vector<int32_t> out;
  for (size_t w = 0; w < mask.size(); ++w) {
    for (int b = 0; b < 64; ++b) {
      if ((mask[w] >> b) & 1) out.push_back(int32_t(w * 64 + size_t(b)));
    }
  }
  return out;
}

// Tokens that differ between two masks, as text for a failure message.
inline std::string mask_difference(const std::vector<uint64_t>& got, const std::vector<uint64_t>& want,
                                   const TokenIndex& vocab) {
  std::string out;
  int shown = 0;
  for (size_t w = 0; w < got.size() && shown < 20; ++w) {
    const uint64_t diff = got[w] ^ want[w];
    for (int b = 0; b < 64 && shown < 20; ++b) {
      if (!((diff >> b) & 1)) continue;
      const auto t = int32_t(w * 64 + size_t(b));
      out += ((got[w] >> b) & 1 ? " +" : " -") + std::to_string(t) + "'" + std::string(vocab.bytes(t)) + "'";
      ++shown;
    }
  }
  return out;
}

// JSON values (objects, arrays, strings with escapes and any UTF-8, numbers,
// literals) with optional whitespace: json_object's shape, built by hand.
inline Grammar json_grammar() {
  GrammarBuilder b;
  const int32_t root = b.add_rule("root");
  const int32_t value = b.add_rule("value");
  const Element ws = b.star({b.codepoints({{' ', ' '}, {'\t', '\t'}, {'\n', '\n'}})});
  const Element hex = b.codepoints({{'0', '9'}, {'a', 'f'}, {'A', 'F'}});
  Alternative escape = b.literal("\\");
  escape.push_back(b.choice({{b.codepoints({{'"', '"'}, {'\\', '\\'}, {'/', '/'}, {'b', 'b'}, {'f', 'f'},
                                             {'n', 'n'}, {'r', 'r'}, {'t', 't'}})},
                             {b.byte('u'), hex, hex, hex, hex}},
                            "escape"));
  const Element chr = b.choice({{b.codepoints({{'"', '"'}, {'\\', '\\'}, {0, 0x1F}}, true)}, escape}, "char");
  Alternative string = b.literal("\"");
  string.push_back(b.star({chr}));
  string.push_back(b.byte('"'));
  const Element str = b.choice({string}, "string");
  const Element digits = b.plus({b.codepoints({{'0', '9'}})});
  Alternative integer{b.optional(b.literal("-")),
                      b.choice({b.literal("0"), {b.codepoints({{'1', '9'}}), b.star({b.codepoints({{'0', '9'}})})}})};
  Alternative fraction = b.literal(".");
  fraction.push_back(digits);
  Alternative exponent{b.codepoints({{'e', 'e'}, {'E', 'E'}}), b.optional({b.codepoints({{'+', '+'}, {'-', '-'}})}),
                       digits};
  Alternative number = integer;
  number.push_back(b.optional(fraction));
  number.push_back(b.optional(exponent));
  Alternative member{str, ws, b.byte(':'), ws, b.rule_ref(value)};
  Alternative more_members{b.byte(','), ws};
  more_members.insert(more_members.end(), member.begin(), member.end());
  more_members.push_back(ws);
  Alternative members = member;
  members.push_back(ws);
  members.push_back(b.star(more_members));
  Alternative object{b.byte('{'), ws, b.optional(members), b.byte('}')};
  Alternative more_values{b.byte(','), ws, b.rule_ref(value), ws};
  Alternative values{b.rule_ref(value), ws, b.star(more_values)};
  Alternative array{b.byte('['), ws, b.optional(values), b.byte(']')};
  b.add_alternative(value, object);
  b.add_alternative(value, array);
  b.add_alternative(value, {str});
  b.add_alternative(value, number);
  b.add_alternative(value, b.literal("true"));
  b.add_alternative(value, b.literal("false"));
  b.add_alternative(value, b.literal("null"));
  b.add_alternative(root, {ws, b.choice({object}, "object"), ws});
  return std::move(std::move(b).build(root).value());
}

}  // namespace conveyor::grammar::testing
