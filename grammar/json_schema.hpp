// JSON Schema (a draft 2020-12 subset) and response_format json_object
// compiled to the grammar IR: the grammar's language is JSON texts valid
// under the schema, written as json_syntax.hpp describes (whitespace, string
// escapes, canonical numbers).
//
// Supported keywords:
//   type (a name or a list; "integer", "number", "string", "boolean",
//     "null", "object", "array"); without `type`, every type the other
//     keywords allow
//   enum, const: any JSON values, written canonically (json_syntax.hpp);
//     with `type` beside them, the values of other types are dropped
//   properties, required, additionalProperties (false, true or a schema)
//   prefixItems, items, minItems, maxItems; draft 7's tuple form (items as
//     a list, additionalItems) is read as prefixItems and items
//   anyOf; oneOf is compiled as anyOf (a grammar cannot say "exactly one"),
//     so a value valid under two branches is accepted
//   allOf, merged into one schema (json_schema_merge.hpp says what merges)
//   $ref to "#" or any "#/..." JSON pointer ($defs, definitions, ...), a
//     rule per target, recursion included; siblings beside $ref apply too
//     (2020-12), by merging
//   minLength, maxLength (characters; a \u escape pair is one), pattern
//     (grammar/regex.hpp, unanchored as JSON Schema says: `a` means `.*a.*`;
//     ^ and $ anchor), format: date, time, date-time (RFC 3339 full-date,
//     full-time, date-time: month lengths and leap years checked, years 0001
//     to 9999 (year 0000 is one most parsers refuse), T and Z in
//     either case, no second 60 (RFC 3339 allows a leap second, which
//     Python's datetime, jsonschema's format checker and most parsers
//     refuse: a valid text is never written as one), at most 9 fraction
//     digits: nanoseconds,
//     so that a weak model cannot run to max_tokens in one), uuid (RFC
//     4122's 8-4-4-4-12 hex), email (dot-atom local part @ dot-separated
//     hostname labels of at most 63 characters; no quoted local parts or IP
//     literals), ipv4 (dotted
//     decimal, 0-255 without leading zeros). At most one of pattern, format
//     and the lengths on one string schema.
//   minimum, maximum, exclusiveMinimum, exclusiveMaximum: within +-1e18;
//     on numbers, any decimal bounds but two that cut into one integer's
//     fractions ([1.2, 1.5]); a bounded number has no exponent
//     (grammar/json_number_range.hpp)
//   annotations, accepted and ignored: title, description, $schema, $id,
//     $comment, examples, default, deprecated, readOnly, writeOnly, and
//     $defs / definitions themselves
// Any other keyword (multipleOf, not, if/then/else, patternProperties,
// uniqueItems, contains, minProperties, ..., or one unknown) is refused with
// Errc::invalid_argument: "json_schema: keyword 'multipleOf' is not
// supported (at #/properties/age)". No keyword is silently ignored.
//
// Objects: properties appear in the schema's order (as XGrammar and
// llama.cpp generate them); required ones must appear, optional ones may be
// skipped; required names missing from "properties" follow, in the order
// "required" lists them (their values follow additionalProperties);
// additional properties, where allowed, come last, with keys other than the
// listed names. A text with the same members in another order
// is refused.
#pragma once

#include <boost/json/value.hpp>
#include <string_view>

#include "base/status.hpp"
#include "grammar/grammar.hpp"

namespace conveyor::grammar {

struct JsonSchemaOptions {
  // true (the default, as OpenAI's strict structured outputs): whitespace
  // is at most one space after ':' and ',', and an object schema with
  // "properties" but no "additionalProperties" allows no other properties.
  // false: whitespace may also be a newline and indentation
  // (json_syntax.hpp), and additionalProperties defaults to true, as JSON
  // Schema says. An object schema without "properties" accepts any members
  // in both modes.
  bool strict = true;
};

// The schema's grammar, rooted at "root". Errors: Errc::invalid_argument,
// "json_schema: <what> (at #/json/pointer)".
Expected<Grammar> grammar_from_json_schema(std::string_view schema_json, const JsonSchemaOptions& options = {});

// The schema's grammar as an element of `b`, for grammars that embed JSON
// (a tool call's arguments). `$ref`s resolve within `schema`. Each call
// adds its own rules.
Expected<Element> add_json_schema(GrammarBuilder& b, const boost::json::value& schema,
                                  const JsonSchemaOptions& options = {});

// Any JSON object (response_format json_object), with any values inside.
Grammar grammar_for_json_object(const JsonSchemaOptions& options = {});

}  // namespace conveyor::grammar
