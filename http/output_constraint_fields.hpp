// The request fields that ask for structured outputs, read into one
// OutputConstraint: OpenAI's `response_format` (text, json_object,
// json_schema with name/schema/strict; llama.cpp's json_object with a
// `schema`), vLLM's `structured_outputs` (exactly one of json, regex,
// choice, grammar, json_object), and llama.cpp's `json_schema` (a schema)
// and `grammar` (GBNF text). A request may ask in one field only.
//
// Each parser takes the field's JSON text as sent and fills `out` (whose
// `field` names the request field for later errors), or returns the 400
// naming what is wrong. Compiling the constraint is the planner's job
// (http/constraint_compiler.hpp).
#pragma once

#include <optional>
#include <string_view>

#include "http/api_types.hpp"

namespace conveyor::http {

std::optional<ApiError> parse_response_format(std::string_view json, OutputConstraint& out);
std::optional<ApiError> parse_structured_outputs(std::string_view json, OutputConstraint& out);
// llama.cpp's `json_schema`: the schema itself.
std::optional<ApiError> parse_json_schema_field(std::string_view json, OutputConstraint& out);
// llama.cpp's `grammar`: GBNF text (a JSON string).
std::optional<ApiError> parse_grammar_field(std::string_view json, OutputConstraint& out);

}  // namespace conveyor::http
