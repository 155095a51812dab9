// The request fields that ask for structured outputs: each form read into
// one OutputConstraint, and the mistakes a client makes refused by name.
#include "http/output_constraint_fields.hpp"

#include <gtest/gtest.h>

#include "http/api_request.hpp"

namespace conveyor::http {
namespace {

using Kind = OutputConstraint::Kind;

TEST(OutputConstraintFields, ResponseFormatJsonSchema) {
  OutputConstraint c;
  ASSERT_FALSE(parse_response_format(
      R"({"type": "json_schema", "json_schema": {"name": "person", "strict": true,
          "schema": {"type": "object", "properties": {"a": {"type": "integer"}}}}})", c));
  EXPECT_EQ(c.kind, Kind::json_schema);
  EXPECT_EQ(c.name, "person");
  EXPECT_TRUE(c.strict);
  EXPECT_EQ(c.field, "response_format");
  EXPECT_EQ(c.source, R"({"type":"object","properties":{"a":{"type":"integer"}}})");
}

TEST(OutputConstraintFields, ResponseFormatKinds) {
  OutputConstraint text;
  ASSERT_FALSE(parse_response_format(R"({"type": "text"})", text));
  EXPECT_EQ(text.kind, Kind::none);
  OutputConstraint object;
  ASSERT_FALSE(parse_response_format(R"({"type": "json_object"})", object));
  EXPECT_EQ(object.kind, Kind::json_object);
  EXPECT_FALSE(object.strict);
  OutputConstraint llama;  // llama.cpp: json_object with a schema
  ASSERT_FALSE(parse_response_format(R"({"type": "json_object", "schema": {"type": "array"}})", llama));
  EXPECT_EQ(llama.kind, Kind::json_schema);
  EXPECT_EQ(llama.source, R"({"type":"array"})");
}

TEST(OutputConstraintFields, ResponseFormatMistakesAreNamed) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"type": "xml"})", "got \"xml\""},
      {R"({"type": "json_schema"})", "'response_format.json_schema' must be an object"},
      {R"({"type": "json_schema", "json_schema": {"name": "x"}})", "'response_format.json_schema.schema' is required"},
      {R"({"type": "json_schema", "json_schema": {"schema": 5}})", "must be a JSON Schema"},
      {R"({"type": "json_schema", "json_schema": {"schema": {}, "strict": "yes"}})", "strict' must be a boolean"},
      {R"({"type": "json_schema", "json_schema": {"schema": {}, "extra": 1}})", "unrecognized field 'extra'"},
      {R"({"type": "text", "schema": {}})", "unrecognized field 'schema'"},
      {R"([1])", "must be an object"},
  };
  for (const auto& [json, want] : cases) {
    OutputConstraint c;
    auto e = parse_response_format(json, c);
    ASSERT_TRUE(e) << json;
    EXPECT_EQ(e->status, 400);
    EXPECT_NE(e->message.find(want), std::string::npos) << json << " -> " << e->message;
    EXPECT_EQ(e->param, "response_format");
  }
}

TEST(OutputConstraintFields, StructuredOutputsTakesExactlyOne) {
  OutputConstraint regex;
  ASSERT_FALSE(parse_structured_outputs(R"({"regex": "[a-z]+"})", regex));
  EXPECT_EQ(regex.kind, Kind::regex);
  EXPECT_EQ(regex.source, "[a-z]+");
  OutputConstraint choice;
  ASSERT_FALSE(parse_structured_outputs(R"({"choice": ["yes", "no"]})", choice));
  EXPECT_EQ(choice.kind, Kind::choice);
  EXPECT_EQ(choice.choices, (std::vector<std::string>{"yes", "no"}));
  OutputConstraint json_string;  // vLLM takes the schema as a string too
  ASSERT_FALSE(parse_structured_outputs(R"({"json": "{\"type\": \"string\"}"})", json_string));
  EXPECT_EQ(json_string.kind, Kind::json_schema);
  EXPECT_EQ(json_string.source, R"({"type":"string"})");
  OutputConstraint gbnf;
  ASSERT_FALSE(parse_structured_outputs(R"({"grammar": "root ::= \"a\"", "disable_any_whitespace": true})", gbnf));
  EXPECT_EQ(gbnf.kind, Kind::grammar);
  EXPECT_TRUE(gbnf.strict);

  OutputConstraint c;
  auto two = parse_structured_outputs(R"({"regex": "a", "choice": ["b"]})", c);
  ASSERT_TRUE(two);
  EXPECT_NE(two->message.find("exactly one"), std::string::npos);
  auto unknown = parse_structured_outputs(R"({"structural_tag": "x"})", c);
  ASSERT_TRUE(unknown);
  EXPECT_NE(unknown->message.find("'structured_outputs.structural_tag' is not supported"), std::string::npos);
  auto empty = parse_structured_outputs(R"({"choice": []})", c);
  ASSERT_TRUE(empty);
}

TEST(OutputConstraintFields, LlamaCppFields) {
  OutputConstraint schema;
  ASSERT_FALSE(parse_json_schema_field(R"({"type": "integer"})", schema));
  EXPECT_EQ(schema.kind, Kind::json_schema);
  OutputConstraint gbnf;
  ASSERT_FALSE(parse_grammar_field(R"("root ::= [0-9]+")", gbnf));
  EXPECT_EQ(gbnf.kind, Kind::grammar);
  EXPECT_EQ(gbnf.source, "root ::= [0-9]+");
  OutputConstraint none;
  ASSERT_FALSE(parse_grammar_field(R"("")", none));
  EXPECT_EQ(none.kind, Kind::none);
}

TEST(OutputConstraintFields, OneFieldPerRequest) {
  auto parsed = parse_api_request(
      R"({"prompt": "x", "grammar": "root ::= \"a\"", "structured_outputs": {"regex": "b"}})",
      Endpoint::completions);
  ASSERT_TRUE(parsed.error);
  EXPECT_NE(parsed.error->message.find("'structured_outputs' and 'grammar' both constrain the output"),
            std::string::npos)
      << parsed.error->message;
}

TEST(OutputConstraintFields, ReachTheRequestOnEveryEndpoint) {
  auto chat = parse_api_request(
      R"({"messages": [{"role": "user", "content": "hi"}], "response_format": {"type": "json_object"}})",
      Endpoint::chat);
  ASSERT_FALSE(chat.error) << chat.error->message;
  EXPECT_EQ(chat.request.constraint.kind, Kind::json_object);
  auto completion = parse_api_request(R"({"prompt": "x", "structured_outputs": {"choice": ["a"]}})",
                                      Endpoint::completions);
  ASSERT_FALSE(completion.error) << completion.error->message;
  EXPECT_EQ(completion.request.constraint.kind, Kind::choice);
  auto ws = parse_api_request(R"({"id": 1, "prompt": "x", "json_schema": {"type": "boolean"}})",
                              Endpoint::websocket);
  ASSERT_FALSE(ws.error) << ws.error->message;
  EXPECT_EQ(ws.request.constraint.kind, Kind::json_schema);
}

}  // namespace
}  // namespace conveyor::http
