// JSON's tokens and values as grammar elements in one builder: what the JSON
// Schema compiler assembles schemas from, and the grammar of any JSON value
// (response_format json_object, the schema `{}`).
//
// Whitespace between tokens (JsonSchemaOptions::strict):
//   strict:     none, except one optional space after ':' and after ','
//               (`{"a":1,"b":[1, 2]}` and `{"a": 1, "b": [1, 2]}`), as
//               OpenAI-style strict decoders write; a schema whose strings
//               and arrays are bounded then has a bounded output.
//   non-strict: around every ':' ',' and inside each bracket, one of: none,
//               one space, or a newline followed by up to 20 spaces or tabs
//               (llama.cpp's json-schema-to-grammar `space` rule), so a
//               model may pretty-print with indentation.
// Never before the first or after the last token of the text.
//
// Strings: UTF-8 characters except '"', '\' and controls, and the escapes
// \" \\ \/ \b \f \n \r \t \uXXXX, where a \u escape of a surrogate must be a
// high one followed by a low one (one character). Numbers: JSON's grammar
// (-?(0|[1-9][0-9]*)(\.[0-9]+)?([eE][+-]?[0-9]+)?) with at most 20 integer,
// 32 fraction and 3 exponent digits (grammar/json_number_range.hpp says why).
#pragma once

#include <boost/json/value.hpp>
#include <optional>
#include <string>
#include <vector>

#include "grammar/grammar.hpp"
#include "grammar/json_number_range.hpp"

namespace conveyor::grammar {

class JsonSyntax {
 public:
  JsonSyntax(GrammarBuilder& b, bool strict);

  GrammarBuilder& builder() { return b_; }
  // The digit runs every number of this builder shares.
  DigitRuns& digits() { return digits_; }

  // Token sequences with the whitespace they own: "{" and "[" with what may
  // follow, "}" and "]" with what may precede, ':' and ',' both.
  Alternative open(char bracket);
  Alternative close(char bracket);
  Alternative colon();
  Alternative comma();
  // "{}" or "[]" with what may come between.
  Alternative empty(char open_bracket);

  Element string();                  // any JSON string, quotes included
  Element string_char();             // one character inside a string
  Element number();
  Element integer();
  Element boolean();
  Element null();
  Element value();                   // any JSON value
  Element object();                  // any JSON object

  // The value written canonically (objects' members in their order,
  // numbers as json_number_text) with this syntax's whitespace.
  Alternative literal(const boost::json::value& v);
  // A JSON string (quotes included) whose characters, as written, differ
  // from each of `names`: the keys of additional properties. A key equal
  // to a name but written with a different escape (\u0061 for a) is not
  // recognised as equal.
  Element key_not_in(const std::vector<std::string>& names);
  // The name as a JSON string literal (quotes included).
  static std::string quoted(std::string_view name);

 private:
  Element ws();
  Element hex();

  GrammarBuilder& b_;
  bool strict_;
  DigitRuns digits_;
  std::optional<Element> ws_, string_, string_char_, number_, integer_, value_, object_, hex_, boolean_, null_;
};

// A JSON number's canonical text: integers in decimal, other doubles in the
// shortest form that reads back the same, integral doubles below 1e17 as
// integers (1.0 is written 1, as a schema's enum [1.0] means the number 1).
std::string json_number_text(const boost::json::value& v);

}  // namespace conveyor::grammar
