// JSON Schema to grammars: each keyword's accepted and refused texts (run
// through earley.hpp), the whitespace and property-order rules of both
// modes, digit-range grammars checked exhaustively against arithmetic, and
// the refusals, whose messages name the keyword and where it is.
#include "grammar/json_schema.hpp"

#include <gtest/gtest.h>

#include <boost/json/parse.hpp>
#include <chrono>

#include "tests/grammar/earley.hpp"

namespace conveyor::grammar {
namespace {

using testing::earley_accepts;

Grammar compile_schema(std::string_view schema, bool strict = true) {
  auto g = grammar_from_json_schema(schema, JsonSchemaOptions{strict});
  EXPECT_TRUE(g) << schema << ": " << g.error().message;
  return g ? *g : Grammar{};
}

void expect_texts(std::string_view schema, const std::vector<std::string>& accept,
                  const std::vector<std::string>& refuse, bool strict = true) {
  const Grammar g = compile_schema(schema, strict);
  if (g.rules.empty()) return;
  for (const std::string& s : accept) EXPECT_TRUE(earley_accepts(g, s)) << schema << " should accept " << s;
  for (const std::string& s : refuse) EXPECT_FALSE(earley_accepts(g, s)) << schema << " should refuse " << s;
}

void expect_refused(std::string_view schema, std::string_view message) {
  auto g = grammar_from_json_schema(schema);
  ASSERT_FALSE(g) << schema;
  EXPECT_EQ(g.error().code, Errc::invalid_argument);
  EXPECT_NE(g.error().message.find(message), std::string::npos) << schema << ": " << g.error().message;
}

// Objects nested n deep: {"a": {"a": ... {} ...}}, and its schema.
std::pair<std::string, std::string> nested_objects(int n) {
  std::string schema = R"({"type": "object"})", text = "{}";
  for (int i = 0; i < n; ++i) {
    schema = R"({"type": "object", "properties": {"a": )" + schema + R"(}, "required": ["a"]})";
    text = R"({"a":)" + text + "}";
  }
  return {schema, text};
}

TEST(JsonSchema, DeeplyNestedObjectsCompileUpToTheCompilersBound) {
  // Boost.JSON's default of 32 levels refused 16 nested objects as "not
  // valid JSON"; tool parameters (parsed by the server) took them.
  const auto [schema, text] = nested_objects(40);
  expect_texts(schema, {text}, {"{}"});
  expect_refused(nested_objects(66).first, "nested or merged too deeply");
  expect_refused(std::string(300, '[') + std::string(300, ']'), "nests deeper than");
}

TEST(JsonSchema, PropertiesInSchemaOrderRequiredAndOptional) {
  const char* schema = R"({"type": "object", "properties": {"name": {"type": "string"},
      "age": {"type": "integer"}, "tags": {"type": "array", "items": {"type": "string"}}},
      "required": ["name"]})";
  expect_texts(schema,
               {R"({"name":"Ann"})", R"({"name": "Ann", "age": 3})", R"({"name":"Ann","tags":["a", "b"]})",
                R"({"name":"Ann","age":-1,"tags":[]})"},
               {R"({})", R"({"age":3,"name":"Ann"})", R"({"name":"Ann","age":3.5})", R"({"name":"Ann","x":1})",
                R"({"name":"Ann", "age":3,})", R"({"name":"Ann"} )", R"( {"name":"Ann"})"});
}

TEST(JsonSchema, StrictWhitespaceIsOneOptionalSpaceAfterColonAndComma) {
  expect_texts(R"({"type": "array", "items": {"type": "object", "properties": {"a": {"type": "null"}}}})",
               {R"([{"a":null},{}])", R"([{"a": null}, {}])"},
               {R"([ {"a":null}])", R"([{"a" :null}])", R"([{"a":  null}])", "[{\"a\":\nnull}]", R"([{"a":null} ])"});
}

TEST(JsonSchema, NonStrictWhitespaceAllowsIndentation) {
  const char* schema = R"({"type": "object", "properties": {"a": {"type": "array"}, "b": {"type": "boolean"}}})";
  expect_texts(schema, {"{\n  \"a\": [\n    1,\n    2\n  ],\n  \"b\": true\n}", R"({ "a" : [ ] })", R"({"b":false})"},
               {"{\n\n  \"a\": []}", "{\"a\": []}\n", std::string("{") + std::string(22, ' ') + "}"}, false);
}

TEST(JsonSchema, AdditionalPropertiesDefaultDependsOnStrictness) {
  const char* schema = R"({"type": "object", "properties": {"id": {"type": "integer"}}})";
  expect_texts(schema, {R"({"id":1})"}, {R"({"id":1,"x":2})"}, true);
  expect_texts(schema, {R"({"id":1})", R"({"id":1,"x":2})", R"({"x":"y","z":null})", R"({"i":1})", R"({"idx":1})"},
               {R"({"id":1,"id":2})", R"({"x":2,"id":1})"}, false);
  // A schema without "properties" is any object in both modes.
  expect_texts(R"({"type": "object"})", {R"({})", R"({"k":[1,{"z":null}]})"}, {R"([])"}, true);
}

TEST(JsonSchema, AdditionalPropertiesSchemaAndKeysOtherThanTheListedOnes) {
  expect_texts(R"({"properties": {"a": {"type": "integer"}, "\u00e9\"": {"type": "null"}},
                   "additionalProperties": {"type": "boolean"}})",
               {R"({"a":1,"b":true})", R"({"b":true,"c":false})", "{\"\xC3\xA9\\\"\":null,\"\xC3\xA9\":true}",
                R"({"ab":false})", R"({"\n":true})"},
               {R"({"a":true})", R"({"b":1})", "{\"\xC3\xA9\\\"\":true}", R"({"a":1,"a":true})"});
}

TEST(JsonSchema, RequiredNotListedTakesTheAdditionalSchema) {
  expect_texts(R"({"type":"object","required":["k", "b", "k"],"additionalProperties":{"type":"integer"}})",
               {R"({"k":1,"b":2})", R"({"k":1,"b":2,"j":2})"}, {R"({})", R"({"k":"x","b":2})", R"({"b":2,"k":1})"});
  expect_refused(R"({"type":"object","properties":{},"required":["k"],"additionalProperties":false})",
                 "matches no JSON value");
}

TEST(JsonSchema, EnumAndConstAreCanonicalLiterals) {
  expect_texts(R"({"enum": ["red", 1.0, null, {"a": [1, "x"]}, 2.5]})",
               {R"("red")", "1", "null", R"({"a":[1,"x"]})", R"({"a": [1, "x"]})", "2.5"},
               {R"("blue")", "1.0", R"({"a":[1]})", "2.50"});
  expect_texts(R"({"type": "string", "enum": ["a", 1]})", {R"("a")"}, {"1"});
  expect_texts(R"({"const": "tab\there"})", {R"("tab\there")"}, {"\"tab\there\""});
}

TEST(JsonSchema, IntegerRangesMatchArithmetic) {
  const std::vector<std::pair<std::string, std::pair<int, int>>> ranges = {
      {R"("minimum": 0, "maximum": 150)", {0, 150}},
      {R"("minimum": -37, "maximum": 209)", {-37, 209}},
      {R"("exclusiveMinimum": -100, "exclusiveMaximum": -9)", {-99, -10}},
      {R"("minimum": 19.5, "maximum": 100.5)", {20, 100}},
      {R"("minimum": 7, "maximum": 7)", {7, 7}},
      {R"("minimum": 98)", {98, 1000}},
      {R"("maximum": -98)", {-1000, -98}},
  };
  for (const auto& [bounds, range] : ranges) {
    const Grammar g = compile_schema(R"({"type": "integer", )" + bounds + "}");
    for (int x = -300; x <= 300; ++x) {
      const bool in = x >= range.first && x <= range.second;
      EXPECT_EQ(earley_accepts(g, std::to_string(x)), in) << bounds << " x=" << x;
    }
    EXPECT_EQ(earley_accepts(g, "1000"), range.second >= 1000) << bounds;
    EXPECT_EQ(earley_accepts(g, "-1000"), range.first <= -1000) << bounds;
    EXPECT_FALSE(earley_accepts(g, "0100")) << bounds;
    EXPECT_FALSE(earley_accepts(g, "-0")) << bounds;
  }
}

TEST(JsonSchema, NumberBounds) {
  expect_texts(R"({"type": "number", "minimum": 0})", {"0", "0.0", "3.25", "12"}, {"-1", "-0.5", "1e3"});
  expect_texts(R"({"type": "number", "exclusiveMinimum": 0})", {"0.001", "1", "7.0"}, {"0", "0.000", "-2"});
  expect_texts(R"({"type": "number", "minimum": -2, "exclusiveMaximum": 3})", {"-2", "-2.0", "-1.5", "0", "2.999"},
               {"-2.01", "3", "3.0", "-3"});
  expect_texts(R"({"type": "number", "maximum": 10})", {"10", "10.00", "-1000.5", "9.99"}, {"10.01", "11"});
  expect_texts(R"({"type": "number", "minimum": 2.05, "maximum": 7.5})", {"2.05", "2.050", "2.1", "2.06", "3", "7.5", "7.49999", "7"},
               {"2.049", "2", "2.0", "1.99", "7.51", "7.6", "8", "-3"});
  expect_texts(R"({"type": "number", "exclusiveMinimum": -1.25, "exclusiveMaximum": 0.001})",
               {"-1.2499", "-1", "-0.5", "0", "0.0009", "0.000999"}, {"-1.25", "-1.250", "-1.3", "-2", "0.001", "0.0010", "0.01", "1"});
  expect_texts(R"({"type": "number", "maximum": -0.5})", {"-0.5", "-0.51", "-1", "-1000.25"}, {"-0.49", "0", "-0"});
  expect_refused(R"({"type": "number", "minimum": 1.2, "maximum": 1.5})", "two bounds within one integer's fractions");
  expect_refused(R"({"type": "number", "minimum": 1e-40})", "more than 30 decimals");
  expect_refused(R"({"type": "integer", "maximum": 1e30})", "'maximum' beyond +-1e18");
}

// A number's digits are bounded (20 integer, 32 fraction, 3 exponent), bounds
// or not, so a sampled model cannot spend max_tokens on one number.
TEST(JsonSchema, NumbersHaveBoundedDigits) {
  const std::string twenty = "1" + std::string(19, '0'), thirty_two = std::string(32, '3');
  for (const char* schema : {R"({"type": "number"})", R"({"type": "number", "minimum": 0, "maximum": 1})",
                             R"({"type": "number", "exclusiveMinimum": 0.25})", R"({})"}) {
    expect_texts(schema, {"0." + thirty_two}, {"0." + thirty_two + "3"});
  }
  for (const char* schema : {R"({"type": "integer"})", R"({"type": "integer", "minimum": 5})", R"({"type": "number"})",
                             R"({"type": "number", "minimum": 5})"}) {
    expect_texts(schema, {twenty, "5" + std::string(19, '9')}, {twenty + "0"});
  }
  expect_texts(R"({"type": "number"})", {"1e308", "-2.5E-300"}, {"1e3080"});
  // Near a bound of 30 decimals a value is still written.
  const std::string tiny = "0." + std::string(29, '0') + "1";  // 1e-30
  expect_texts(R"({"type": "number", "exclusiveMinimum": 1e-30})", {tiny + "1", tiny + "01", "0.2"}, {tiny, "0"});
}

TEST(JsonSchema, StringsEscapesLengthsPatternsFormats) {
  expect_texts(R"({"type": "string"})",
               {R"("")", R"("a\"b\\c\/\n\u00e9\uD83D\uDE00")", "\"\xE2\x82\xAC\""},
               {"\"a\nb\"", R"("\x")", R"("\uD83D")", "\"\xC3\x28\"", R"("\q")"});
  expect_texts(R"({"type": "string", "minLength": 2, "maxLength": 3})", {R"("ab")", R"("\n\u0041c")", "\"\xC3\xA9\xC3\xA9\""},
               {R"("a")", R"("abcd")"});
  expect_texts(R"({"type": "string", "pattern": "b+c"})", {R"("bc")", R"("xxbbcyy")", R"("a\nbc")"}, {R"("b c")"});
  expect_texts(R"({"type": "string", "pattern": "^[a-z]+$"})", {R"("abc")"}, {R"("ab1")", R"("")"});
  expect_texts(R"({"type": "string", "pattern": "^a\"\\\\$"})", {R"("a\"\\")"}, {R"("a\"\")"});
  expect_texts(R"({"format": "date"})", {R"("2024-02-29")", R"("2000-02-29")", R"("1999-12-31")", R"("0001-01-01")", R"("0400-02-29")"},
               {R"("2023-02-29")", R"("1900-02-29")", R"("2024-04-31")", R"("2024-13-01")", R"("0000-01-01")",
                R"("0000-02-29")"});  // year 0000: RFC 3339 allows it, Python's date.fromisoformat and most parsers refuse it
  expect_texts(R"({"format": "date-time"})", {R"("1990-12-31T23:59:59Z")", R"("1963-06-19t08:30:06.283185+01:00")"},
               {R"("1990-12-31T15:59:60-24:00")", R"("1990-12-31 15:59:59Z")", R"("1990-12-31T23:59:60Z")"});
  expect_texts(R"({"format": "time"})", {R"("08:30:06.5z")", R"("08:30:06.123456789Z")", R"("23:59:59.5+00:00")"},
               {R"("08:30:06")", R"("24:00:00Z")", R"("08:30:06.1234567890Z")", R"("17:45:60-08:49")",
                R"("23:59:60Z")"});  // no leap second: most parsers (Python's datetime) refuse one
  expect_texts(R"({"format": "uuid"})", {R"("123e4567-e89b-12d3-a456-426614174000")"},
               {R"("123e4567e89b12d3a456426614174000")"});
  expect_texts(R"({"format": "email"})", {R"("joe.bloggs+x@example.co.uk")", R"("a/b@c")"},
               {R"("joe@")", R"(".joe@x.com")", R"("joe@-x.com")", R"("2962")"});
  expect_texts(R"({"format": "ipv4"})", {R"("192.168.0.1")", R"("0.0.0.0")"},
               {R"("256.1.1.1")", R"("01.1.1.1")", R"("1.1.1")"});
}

TEST(JsonSchema, PatternsAndFormatsWithLengths) {
  expect_texts(R"({"type": "string", "pattern": "^[a-z]+$", "maxLength": 3})", {R"("a")", R"("abc")"},
               {R"("abcd")", R"("")", R"("ab1")"});
  // Search mode: the match may sit anywhere in a string of the allowed length.
  expect_texts(R"({"type": "string", "pattern": "b+c", "minLength": 4})",
               {R"("xxbc")", R"("bbbc")", R"("bcyy")", R"("abcd")", R"("xbcxxxxxxxxxx")"},
               {R"("bc")", R"("bbc")", R"("xxxx")"});
  expect_texts(R"({"type": "string", "pattern": "^a\\d*$", "minLength": 2, "maxLength": 2})", {R"("a1")"},
               {R"("a")", R"("a12")", R"("b1")"});
  // Lengths count characters: an escape or a two-byte character is one.
  expect_texts(R"({"type": "string", "pattern": "^[^x]*$", "maxLength": 2})",
               {R"("\n\u0001")", "\"\xC3\xA9\xC3\xA9\"", R"("")"}, {R"("abc")", R"("x")", R"("\n\n\n")"});
  expect_texts(R"({"format": "email", "maxLength": 8})", {R"("a@b.co")"}, {R"("abcd@efgh.com")", R"("a@")"});
  expect_texts(R"({"format": "uuid", "minLength": 36})", {R"("123e4567-e89b-12d3-a456-426614174000")"}, {});
  expect_texts(R"({"anyOf": [{"format": "date", "maxLength": 9}, {"type": "null"}]})", {"null"},
               {R"("2024-01-01")"});
  expect_texts(R"({"type": "string", "format": "email", "maxLength": 254})", {R"("joe.bloggs+x@example.co.uk")"},
               {R"(".joe@x.com")"});
  // A pattern and a format: the strings both allow (their automata intersected).
  expect_texts(R"({"type": "string", "format": "email", "pattern": "@example\\.com$"})",
               {R"("joe@example.com")", R"("a.b@example.com")"}, {R"("joe@example.org")", R"("@example.com")"});
  expect_texts(R"({"type": "string", "format": "date", "pattern": "^2024-", "maxLength": 10})", {R"("2024-02-29")"},
               {R"("2023-02-28")", R"("2024-02-30")"});
  expect_texts(R"({"anyOf": [{"format": "ipv4", "pattern": "x"}, {"type": "null"}]})", {"null"}, {R"("1.2.3.4")"});
  // Remembering the last 15 characters takes 2^15 states.
  expect_refused(R"({"type": "string", "pattern": "a[ab]{14}$", "maxLength": 20})", "too large to bound its length");
}

TEST(JsonSchema, ArraysPrefixItemsAndCounts) {
  expect_texts(R"({"prefixItems": [{"type": "integer"}, {"type": "string"}], "items": false})",
               {"[]", "[1]", R"([1,"a"])"}, {R"(["a"])", R"([1,"a",2])"});
  expect_texts(R"({"prefixItems": [{"const": 1}], "items": {"type": "boolean"}, "minItems": 2, "maxItems": 3})",
               {"[1,true]", "[1,true, false]"}, {"[1]", "[1,true,true,true]", "[true,true]"});
  expect_texts(R"({"type": "array", "items": {"type": "null"}, "maxItems": 2})", {"[]", "[null]", "[null,null]"},
               {"[null,null,null]"});
  expect_texts(R"({"prefixItems": [{"const": 1}, {"const": 2}, {"const": 3}], "maxItems": 2})",
               {"[]", "[1]", "[1,2]"}, {"[1,2,3]"});
  expect_texts(R"({"items": [{"const": "a"}], "additionalItems": {"type": "integer"}})", {R"(["a",1,2])"},
               {R"(["a","b"])"});
}

TEST(JsonSchema, AnyOfAllOfAndRecursiveRefs) {
  expect_texts(R"({"anyOf": [{"type": "string"}, {"type": "integer", "minimum": 5}]})", {R"("x")", "7"}, {"3", "null"});
  expect_texts(R"({"type": "object", "properties": {"kind": {"type": "string"}}, "required": ["kind"],
                   "oneOf": [{"properties": {"n": {"type": "integer"}}}, {"properties": {"s": {"type": "string"}}}]})",
               {R"({"kind":"a","n":1})", R"({"kind":"a","s":"x"})", R"({"kind":"a"})"}, {R"({"kind":"a","n":"x"})"});
  expect_texts(R"({"allOf": [{"type": "object", "properties": {"a": {"type": "integer"}}, "required": ["a"]},
                             {"properties": {"b": {"type": "string"}}, "required": ["b"]}]})",
               {R"({"a":1,"b":"x"})"}, {R"({"a":1})", R"({"b":"x","a":1})"});
  expect_texts(R"({"$defs": {"node": {"type": "object", "properties": {"v": {"type": "integer"},
                   "next": {"anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}]}}, "required": ["v", "next"]}},
                   "$ref": "#/$defs/node"})",
               {R"({"v":1,"next":null})", R"({"v":1,"next":{"v":2,"next":{"v":3,"next":null}}})"},
               {R"({"v":1,"next":{"v":2}})"});
  expect_texts(R"({"definitions": {"pos": {"type": "integer", "minimum": 1}},
                   "properties": {"x": {"$ref": "#/definitions/pos", "maximum": 9}}})",
               {R"({"x":9})"}, {R"({"x":10})", R"({"x":0})"});
  expect_texts(R"({"type": "array", "items": {"$ref": "#"}})", {"[]", "[[],[[]]]"}, {"[1]"});
  expect_texts(R"({"$defs": {"a b": {"type": "integer"}, "x/y": {"type": "null"}},
                   "properties": {"p": {"$ref": "#/$defs/a%20b"}, "q": {"$ref": "#/$defs/x~1y"}}})",
               {R"({"p":1,"q":null})"}, {R"({"p":null})", R"({"q":1})"});
}

TEST(JsonSchema, RefusesWhatItCannotEnforceNamingKeywordAndPlace) {
  expect_refused(R"({"properties": {"age": {"type": "integer", "multipleOf": 5}}})",
                 "json_schema: keyword 'multipleOf' is not supported (at #/properties/age)");
  expect_refused(R"({"not": {"type": "string"}})", "keyword 'not' is not supported (at #)");
  expect_refused(R"({"items": {"uniqueItems": true}})", "keyword 'uniqueItems' is not supported (at #/items)");
  expect_refused(R"({"patternProperties": {"^a": {}}})", "keyword 'patternProperties'");
  expect_refused(R"({"anyOf": [{"type": "string", "x-custom": 1}]})", "keyword 'x-custom' is not supported (at #/anyOf/0)");
  expect_refused(R"({"$ref": "http://example.com/s.json"})", "only references within the schema");
  expect_refused(R"({"$ref": "#/$defs/missing"})", "$ref '#/$defs/missing' does not resolve");
  expect_refused(R"({"format": "hostname"})", "format 'hostname' is not supported");
  expect_refused(R"({"type": "string", "pattern": "(a)\\1"})", "backreferences");
  expect_refused(R"({"type": "strin"})", "unknown type \"strin\"");
  expect_refused(R"({"allOf": [{"type": "string"}, {"type": "integer"}]})", "matches no JSON value");
  expect_refused(R"({"allOf": [{"pattern": "a"}, {"pattern": "b"}]})", "'pattern' differs");
  expect_refused(R"({"$defs": {"a": {"$ref": "#/$defs/a"}}, "$ref": "#/$defs/a"})", "left-recursive");
  expect_refused(R"({"type": "string", "maxLength": 100000})", "'maxLength' above 10000");
  expect_refused(R"({"type": )", "not valid JSON");
  // Annotations are accepted.
  expect_texts(R"({"$schema": "https://json-schema.org/draft/2020-12/schema", "$id": "x", "title": "t",
                   "description": "d", "$comment": "c", "examples": [1], "default": 1, "deprecated": false,
                   "readOnly": true, "writeOnly": false, "type": "integer"})",
               {"1"}, {"true"});
}

TEST(JsonSchema, JsonObjectAndTheEmptySchemaAcceptAnyValue) {
  const Grammar object = grammar_for_json_object();
  for (const char* text : {R"({})", R"({"a":[1,2.5e-3,{"b":null}],"c":"\u0041", "d":true})"}) {
    EXPECT_TRUE(earley_accepts(object, text)) << text;
  }
  for (const char* text : {"[]", "1", R"({"a"})", R"({"a":01})", R"({'a':1})"}) {
    EXPECT_FALSE(earley_accepts(object, text)) << text;
  }
  expect_texts("{}", {"1", R"("s")", "[true,null]", R"({"x":{}})", "-0.5E+2"}, {"", "tru", "[1,]"});
  expect_texts("true", {"false"}, {"nul"});
}

TEST(JsonSchema, SchemasEmbedInALargerGrammar) {
  // Two tools' arguments in one builder, each with its own $defs of the
  // same name: a tool call grammar's shape.
  GrammarBuilder b;
  const int32_t root = b.add_rule("root");
  const char* tools[][2] = {
      {"f", R"({"$defs": {"n": {"type": "integer", "maximum": 9}}, "type": "object",
               "properties": {"x": {"$ref": "#/$defs/n"}}, "required": ["x"]})"},
      {"g", R"({"$defs": {"n": {"type": "string", "maxLength": 2}}, "type": "array", "items": {"$ref": "#/$defs/n"}})"}};
  for (const auto& [name, schema] : tools) {
    auto args = add_json_schema(b, boost::json::parse(schema));
    ASSERT_TRUE(args) << args.error().message;
    Alternative call = b.literal(std::string("<tool_call>{\"name\": \"") + name + "\", \"arguments\": ");
    call.push_back(*args);
    const Alternative end = b.literal("}</tool_call>");
    call.insert(call.end(), end.begin(), end.end());
    b.add_alternative(root, std::move(call));
  }
  auto g = std::move(b).build(root);
  ASSERT_TRUE(g) << g.error().message;
  EXPECT_TRUE(earley_accepts(*g, R"(<tool_call>{"name": "f", "arguments": {"x": 7}}</tool_call>)"));
  EXPECT_TRUE(earley_accepts(*g, R"(<tool_call>{"name": "g", "arguments": ["ab", ""]}</tool_call>)"));
  EXPECT_FALSE(earley_accepts(*g, R"(<tool_call>{"name": "f", "arguments": {"x": 10}}</tool_call>)"));
  EXPECT_FALSE(earley_accepts(*g, R"(<tool_call>{"name": "g", "arguments": {"x": 7}}</tool_call>)"));
  EXPECT_FALSE(earley_accepts(*g, R"(<tool_call>{"name": "g", "arguments": ["abc"]}</tool_call>)"));
}

TEST(JsonSchema, TwentyPropertySchemaCompilesQuickly) {
  std::string schema = R"({"type": "object", "properties": {)";
  const char* kinds[] = {R"({"type": "string", "maxLength": 64})", R"({"type": "integer", "minimum": 0, "maximum": 150})",
                         R"({"enum": ["a", "b", "c"]})", R"({"type": "array", "items": {"type": "number"}})",
                         R"({"type": "string", "format": "date-time"})"};
  std::string required;
  for (int i = 0; i < 20; ++i) {
    schema += (i ? ", " : "") + std::string("\"field") + std::to_string(i) + "\": " + kinds[i % 5];
    if (i % 2 == 0) required += (required.empty() ? "\"field" : ", \"field") + std::to_string(i) + "\"";
  }
  schema += "}, \"required\": [" + required + "]}";
  const auto start = std::chrono::steady_clock::now();
  auto g = grammar_from_json_schema(schema);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  ASSERT_TRUE(g) << g.error().message;
  std::cout << "20-property schema: " << ms << " ms, " << g->rules.size() << " rules\n";
  EXPECT_LT(ms, 1000.0);
  std::string text = "{";
  for (int i = 0; i < 20; i += 2) {
    const char* values[] = {R"("x")", "150", R"("c")", "[1.5]", R"("2024-01-01T00:00:00Z")"};
    text += (i ? "," : "") + std::string("\"field") + std::to_string(i) + "\":" + values[i % 5];
  }
  EXPECT_TRUE(earley_accepts(*g, text + "}")) << text;
}

// A definition written out for each of many properties (rather than named
// with $ref) compiles once: its rules, and so the token masks computed for
// them, are shared. 1,000 such properties of a date and a bounded integer took
// minutes of masks before.
TEST(JsonSchema, EqualSubschemasShareTheirRules) {
  const std::string item =
      R"({"type": "object", "properties": {"d": {"type": "string", "format": "date-time"},
          "n": {"type": "integer", "minimum": 0, "maximum": 1000}}, "required": ["d", "n"]})";
  const auto schema = [&](int k, bool distinct) {
    std::string s = R"({"type": "object", "properties": {)", required;
    for (int i = 0; i < k; ++i) {
      std::string sub = item;
      if (distinct) {  // every subschema other (its maximum), the date's too (its length)
        sub.replace(sub.find("1000"), 4, std::to_string(1000 + i));
        sub.replace(sub.find("\"date-time\""), 11, "\"date-time\", \"maxLength\": " + std::to_string(30 + i));
      }
      s += (i ? ", " : "") + std::string("\"p") + std::to_string(i) + "\": " + sub;
      required += (i ? ", \"p" : "\"p") + std::to_string(i) + "\"";
    }
    return s + "}, \"required\": [" + required + "]}";
  };
  const size_t one = compile_schema(schema(1, false)).rules.size();
  const size_t shared = compile_schema(schema(30, false)).rules.size();
  const size_t distinct = compile_schema(schema(30, true)).rules.size();
  // Each member adds its key and separators: a few rules, not the value's.
  EXPECT_LT(shared - one, 5 * 29u) << one << " rules for one property, " << shared << " for 30";
  EXPECT_GT(distinct - one, 4 * (shared - one)) << distinct << " rules for 30 distinct properties";
  // Shared, each property still holds its own values.
  std::string text = "{";
  for (int i = 0; i < 30; ++i)
    text += (i ? "," : "") + std::string("\"p") + std::to_string(i) + R"(":{"d":"2024-01-01T00:00:00Z","n":)" +
            std::to_string(i * 30) + "}";
  expect_texts(schema(30, false), {text + "}"}, {text.substr(0, text.size() - 4) + "1001}}", text});
}

}  // namespace
}  // namespace conveyor::grammar
