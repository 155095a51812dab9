// Regular expressions (the ECMAScript subset that JSON Schema "pattern" and
// vLLM's `regex` structured output use) compiled to the grammar IR.
//
// Supported: literals; escapes \d \w \s \D \W \S, \t \n \r \v \f \0, \xHH,
// \uHHHH (a surrogate pair is one character), \u{H...}, \cX, and a backslash
// before any punctuation; classes [a-z], [^...], with those escapes inside
// ([\b] is a backspace); `.` (any character but \n \r U+2028 U+2029);
// groups (...), (?:...), (?<name>...), (?P<name>...); alternation |;
// quantifiers * + ? {n} {n,} {n,m}, whose lazy forms (*? ...) are the same
// language and so treated as greedy; a `{` that starts no quantifier is a
// literal (ECMAScript's Annex B). Anchors: ^ at the start and $ at the end
// of a top-level alternative.
//
// Refused, by name: backreferences (\1, \k<name>), lookarounds ((?=, (?!,
// (?<=, (?<!), word boundaries (\b, \B), Unicode property escapes (\p, \P),
// inline flags ((?i) ...), anchors elsewhere, counts above kMaxRepeatCount.
// The matcher matches languages, not positions, so none of these has a
// meaning it could enforce.
#pragma once

#include <string_view>

#include "base/status.hpp"
#include "grammar/expr.hpp"
#include "grammar/grammar.hpp"

namespace conveyor::grammar {

struct RegexOptions {
  // whole_string: the text is exactly one match (vLLM's `regex`; ^ and $
  // change nothing). search: the pattern may match anywhere in the text, as
  // JSON Schema's "pattern" does, so an alternative without ^ may be
  // preceded by any text and one without $ followed by any.
  enum class Anchoring : uint8_t { whole_string, search };
  Anchoring anchoring = Anchoring::whole_string;
  // raw: the text is UTF-8; json_string: the text is the inside of a JSON
  // string literal, escaped as expr.hpp describes.
  TextForm form = TextForm::raw;
};

// The pattern as an expression over code points, with the text around a
// match that `anchoring` allows. Errors as add_regex's.
Expected<Expr> regex_expr(std::string_view pattern, RegexOptions::Anchoring anchoring);

// The pattern as an element of `b`. Errors (Errc::invalid_argument) read
// "regex: <what> at offset N".
Expected<Element> add_regex(GrammarBuilder& b, std::string_view pattern, const RegexOptions& options = {});

// A grammar whose language is the strings the pattern matches whole.
Expected<Grammar> grammar_from_regex(std::string_view pattern);

}  // namespace conveyor::grammar
