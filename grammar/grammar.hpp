// The grammar IR every constraint compiles to, and the builder the compilers
// (JSON Schema, regular expressions, choices, GBNF) share.
//
// A Grammar is a context-free grammar over BYTES: each rule is a list of
// alternatives, each alternative a sequence of elements, each element either
// a byte class (a set of byte values, matched by one byte), a reference to
// another rule, or a token of the vocabulary (matched by that token alone,
// never by bytes: a control token such as Mistral's [ARGS], or GBNF's
// <[id]>), or any one token but a given one (GBNF's !<[id]>). An empty
// alternative matches the empty string. Text is UTF-8:
// a class of code points becomes alternatives of byte sequences
// (GrammarBuilder::codepoints), so the matcher never decodes UTF-8 and a
// token that ends inside a character is handled like any other byte prefix.
//
// Repetition, options and bounded counts are rules too (star, plus,
// optional, repeat): the IR stays four kinds of element, which keeps the
// matcher small. Left recursion (a rule that can reach itself without
// consuming a byte) is refused by check(): the matcher is a pushdown
// automaton, as llama.cpp's and XGrammar's are, and would loop on it.
//
// Thread-safety: a built Grammar is immutable and shared freely.
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>
#include <vector>

#include "base/status.hpp"

namespace conveyor::grammar {

// A set of byte values.
struct ByteSet {
  std::array<uint64_t, 4> bits{};
  bool test(uint8_t b) const { return (bits[b >> 6] >> (b & 63)) & 1; }
  void set(uint8_t b) { bits[b >> 6] |= uint64_t(1) << (b & 63); }
  void set_range(uint8_t lo, uint8_t hi);  // inclusive
  bool empty() const { return (bits[0] | bits[1] | bits[2] | bits[3]) == 0; }
  bool operator==(const ByteSet&) const = default;
};

struct ByteSetHash {
  size_t operator()(const ByteSet& s) const {
    return std::hash<uint64_t>{}(s.bits[0] * 31 + s.bits[1] * 17 + s.bits[2] * 7 + s.bits[3]);
  }
};

struct Element {
  enum class Kind : uint8_t { bytes, rule, token, not_token };
  Kind kind = Kind::bytes;
  // bytes: into Grammar::byte_sets; rule: into Grammar::rules; token,
  // not_token: a token id (not_token: any one token but that one and the end tokens)
  int32_t index = 0;
  bool is_token() const { return kind == Kind::token || kind == Kind::not_token; }
  bool operator==(const Element&) const = default;
};

using Alternative = std::vector<Element>;  // empty: matches ""

struct Rule {
  std::string name;  // for messages and dumps; unique within a grammar
  std::vector<Alternative> alternatives;
};

struct Grammar {
  std::vector<Rule> rules;
  std::vector<ByteSet> byte_sets;  // distinct
  int32_t root = 0;
  // A structural tag opened by a control token (Mistral's [TOOL_CALLS]):
  // before this token id the text is free (every token allowed, the end
  // included); from the token after it, the rules hold. -1: they hold from
  // the start. compile() requires a control token of the vocabulary (one
  // without bytes that does not end generation).
  int32_t trigger_token = -1;
};

// What `g` holds in memory: its vectors' and names' heap blocks (each
// counted with 16 bytes of allocator overhead).
size_t memory_bytes(const Grammar& g);

// A heap block's allocator overhead, as memory_bytes counts it.
inline constexpr size_t kHeapBlockBytes = 16;
// The heap block of a vector's buffer (nothing when it has no buffer).
template <class T>
size_t heap_bytes(const std::vector<T>& v) {
  return v.capacity() ? v.capacity() * sizeof(T) + kHeapBlockBytes : 0;
}

// The token ids of the grammar's token and not_token elements, sorted, without repeats.
std::vector<int32_t> token_elements(const Grammar& g);

// Checks that every reference names a rule, every rule has an alternative,
// the root exists, and no rule is left-recursive. The error
// (Errc::invalid_argument) names the rule.
Status check(const Grammar& g);

// The grammar in GBNF-like text, one rule a line: for tests and messages.
std::string to_string(const Grammar& g);

// Inclusive code point range.
using CodepointRange = std::pair<uint32_t, uint32_t>;

// `ranges` (or, when `negated`, the valid code points outside them) sorted,
// merged, clipped to U+10FFFF and without surrogates: the set
// GrammarBuilder::codepoints matches. The compilers use it to split a class
// (JSON strings escape some members).
std::vector<CodepointRange> normalize_codepoints(std::vector<CodepointRange> ranges, bool negated);

// Builds a Grammar. Rule names are made unique by a numeric suffix.
class GrammarBuilder {
 public:
  // A new rule with no alternatives yet; returns its index.
  int32_t add_rule(std::string_view name);
  // The rule of that exact name, or -1.
  int32_t find_rule(std::string_view name) const;
  void add_alternative(int32_t rule, Alternative alt);
  bool has_alternatives(int32_t rule) const;
  // Rules so far: the compilers bound a grammar's size with it.
  int32_t rule_count() const { return int32_t(g_.rules.size()); }

  Element rule_ref(int32_t rule) const { return {Element::Kind::rule, rule}; }
  Element bytes(const ByteSet& set);  // shares equal sets
  Element byte(uint8_t b);
  // Token `id` (compile() checks that the vocabulary has it).
  Element token(int32_t id) const { return {Element::Kind::token, id}; }
  // Any one token but `id` (and the end tokens).
  Element not_token(int32_t id) const { return {Element::Kind::not_token, id}; }
  // The bytes of `s`, one element each.
  Alternative literal(std::string_view s);
  // One code point from `ranges` (or, when `negated`, any valid code point,
  // U+0000..U+10FFFF except surrogates, outside them), as UTF-8. One
  // element: a byte class when every member is ASCII, else a rule.
  Element codepoints(std::vector<CodepointRange> ranges, bool negated = false);

  // Rules that repeat `item`: zero or more, one or more, zero or one, and
  // between min and max times (max < 0: unbounded). Each returns a
  // reference to a new rule.
  Element star(const Alternative& item);
  Element plus(const Alternative& item);
  Element optional(const Alternative& item);
  Element repeat(const Alternative& item, int32_t min, int32_t max);
  // A rule with these alternatives.
  Element choice(std::vector<Alternative> alts, std::string_view name = "choice");

  // The grammar rooted at `root`, after check().
  Expected<Grammar> build(int32_t root) &&;

 private:
  Grammar g_;
  std::unordered_map<std::string, int32_t> names_;         // rule name -> index
  std::unordered_map<std::string, int> next_suffix_;       // base name -> last suffix used
  std::unordered_map<ByteSet, int32_t, ByteSetHash> set_index_;  // byte class -> index
};

}  // namespace conveyor::grammar
