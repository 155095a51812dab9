// A small expression tree shared by the regular-expression and GBNF
// compilers, and its lowering into a GrammarBuilder.
//
// Both front ends parse to Expr first and lower afterwards, because the
// lowering needs to know which sub-expressions match the empty string: the
// builder's star(item) with a nullable item is left-recursive (check()
// refuses it), so `(a?)*` is lowered as `a*`: X{n,m} with a nullable X
// matches the same strings as (X minus "")'s {0,m}, and the tree can say
// what X minus "" is.
//
// Characters are code points; the lowering writes them as UTF-8, either
// raw or, for text inside a JSON string (the JSON Schema "pattern" and
// "format" keywords), as JSON writes them: '"' and '\' escaped (`\"`, `\\`),
// control characters as their short escape (`\n`) or `\u00XX` (either hex
// case), '/' raw or `\/`. Other characters are raw only: a `\u` escape of a
// character JSON need not escape does not match.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <string_view>
#include <vector>

#include "base/status.hpp"
#include "grammar/grammar.hpp"

namespace conveyor::grammar {

struct Expr {
  enum class Kind : uint8_t {
    empty,   // matches ""
    chars,   // one code point of `ranges` (or outside them when `negated`); none: never matches
    seq,     // items in order
    alt,     // one of items
    repeat,  // items[0] between min and max times (max < 0: unbounded)
    rule,    // the builder's rule `rule` (GBNF references)
    token,   // token `token` of the vocabulary (GBNF's <[id]>); `negated`: any other (!<[id]>)
  };
  Kind kind = Kind::empty;
  std::vector<CodepointRange> ranges;
  bool negated = false;
  std::vector<Expr> items;
  int32_t min = 0, max = -1;
  int32_t rule = -1;
  int32_t token = -1;

  static Expr chars_of(std::vector<CodepointRange> ranges, bool negated = false);
  static Expr codepoint(uint32_t cp) { return chars_of({{cp, cp}}); }
  static Expr sequence(std::vector<Expr> items);
  static Expr alternatives(std::vector<Expr> items);
  static Expr repeated(Expr item, int32_t min, int32_t max);
  static Expr reference(int32_t rule);
  static Expr token_of(int32_t id, bool negated = false);
};

// Repetition counts above this are refused by the parsers ({n,m}, and the
// JSON Schema lengths and item counts): each count is a rule.
inline constexpr int32_t kMaxRepeatCount = 10000;
// Groups nested deeper than this are refused by the parsers (they recurse).
inline constexpr int kMaxNesting = 256;
// A compiled grammar may have at most this many rules.
inline constexpr int32_t kMaxGrammarRules = 500000;

enum class TextForm : uint8_t { raw, json_string };

// Lowers expressions into one builder. GBNF supplies, for rule references,
// whether a rule matches "" and a rule for its non-empty strings.
class ExprLowering {
 public:
  struct Rules {
    std::function<bool(int32_t rule)> nullable;
    std::function<int32_t(int32_t rule)> nonempty;  // a rule matching the rule's strings but ""
  };
  ExprLowering(GrammarBuilder& b, TextForm form, Rules rules = {});

  // The expression as a sequence of elements; an error when the grammar
  // would pass kMaxGrammarRules.
  Expected<Alternative> lower(const Expr& e);
  // The same as one element (a rule when it needs more than one).
  Expected<Element> lower_element(const Expr& e, std::string_view name);

  bool nullable(const Expr& e) const;
  // e's strings except "" (an element that never matches when e matches
  // only "").
  Expected<Alternative> lower_nonempty(const Expr& e);

 private:
  // `item` between min and max times (max < 0: unbounded); item is not nullable.
  Expected<Alternative> repetition(Alternative item, int32_t min, int32_t max);
  Element chars(const Expr& e);
  Element json_chars(const std::vector<CodepointRange>& set);

  GrammarBuilder& b_;
  TextForm form_;
  Rules rules_;
  std::map<std::vector<CodepointRange>, Element> class_cache_;  // normalized set -> element
};

// For the parsers: a hex digit's value (-1 for another character), and the
// code point of the UTF-8 character at text[i], setting `length` (-1 when
// it is invalid: truncated, overlong, a surrogate or above U+10FFFF).
int hex_digit_value(char c);
int32_t decode_utf8(std::string_view text, size_t i, size_t& length);

// Whether g's root matches some finite text: `root ::= "a" root` does not,
// nor a schema whose branches all contradict themselves.
bool matches_some_text(const Grammar& g);

}  // namespace conveyor::grammar
