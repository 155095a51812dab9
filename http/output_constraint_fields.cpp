#include "http/output_constraint_fields.hpp"
#include "http/json_detail.hpp"

#include <boost/json.hpp>

namespace conveyor::http {
namespace {

namespace json = boost::json;
using Fail = std::optional<ApiError>;

Fail already_set(const OutputConstraint& out, std::string_view field) {
  if (out.kind == OutputConstraint::Kind::none) return std::nullopt;
  std::string message = "'";  // appended, not concatenated: GCC 12 warns falsely (-Wrestrict)
  message.append(field).append("' and '").append(out.field).append("' both constrain the output; send one of them");
  return bad_request(std::move(message), std::string(field));
}

Fail parse(std::string_view text, std::string_view field, json::value& out) {
  boost::system::error_code ec;
  out = detail::parse_request_json(text, ec);
  if (ec) {
    std::string message = "'";
    message.append(field).append("' is not valid JSON: ").append(detail::json_error_text(ec));
    return bad_request(std::move(message), std::string(field));
  }
  return std::nullopt;
}

// What every field's parser does first: refuse a second constraint, read the JSON.
Fail begin(std::string_view text, std::string_view field, const OutputConstraint& out, json::value& v) {
  if (Fail f = already_set(out, field)) return f;
  return parse(text, field, v);
}

// The request field a dotted path starts with (errors' `param`).
std::string top_field(const std::string& where) { return where.substr(0, where.find('.')); }

// A schema: an object (or `true`, which allows any value), kept as compact JSON.
Fail schema_text(const json::value& schema, const std::string& where, std::string& out) {
  if (!schema.is_object() && !schema.is_bool())
    return bad_request("'" + where + "' must be a JSON Schema (an object or a boolean)", top_field(where));
  out = json::serialize(schema);
  return std::nullopt;
}

Fail unknown_key(const std::string& where, std::string_view key) {
  return bad_request("'" + where + "' has an unrecognized field '" + std::string(key) + "'", top_field(where));
}

}  // namespace

Fail parse_response_format(std::string_view text, OutputConstraint& out) {
  const std::string where = "response_format";
  json::value v;
  if (Fail f = begin(text, where, out, v)) return f;
  if (!v.is_object()) return bad_request("'response_format' must be an object", where);
  const json::object& o = v.as_object();
  const json::value* type = o.if_contains("type");
  if (!type || !type->is_string())
    return bad_request("'response_format.type' must be \"text\", \"json_object\" or \"json_schema\"", where);
  OutputConstraint c;
  c.field = where;
  c.strict = false;  // OpenAI's default for json_schema
  const std::string_view t = type->as_string();
  if (t == "text") {
    for (const auto& [key, value] : o)
      if (key != "type") return unknown_key(where, key);
    return std::nullopt;
  }
  if (t == "json_object") {
    c.kind = OutputConstraint::Kind::json_object;
    for (const auto& [key, value] : o) {
      if (key == "type") continue;
      if (key != "schema") return unknown_key(where, key);
      // llama.cpp's form: json_object constrained by a schema.
      c.kind = OutputConstraint::Kind::json_schema;
      if (Fail f = schema_text(value, where + ".schema", c.source)) return f;
    }
    out = std::move(c);
    return std::nullopt;
  }
  if (t != "json_schema")
    return bad_request("'response_format.type' must be \"text\", \"json_object\" or \"json_schema\", got \"" +
                           std::string(t) + "\"",
                       where);
  c.kind = OutputConstraint::Kind::json_schema;
  const json::value* spec = o.if_contains("json_schema");
  for (const auto& [key, value] : o)
    if (key != "type" && key != "json_schema") return unknown_key(where, key);
  if (!spec || !spec->is_object())
    return bad_request("'response_format.json_schema' must be an object with a 'schema'", where);
  bool has_schema = false;
  for (const auto& [key, value] : spec->as_object()) {
    if (key == "name") {
      if (!value.is_string()) return bad_request("'response_format.json_schema.name' must be a string", where);
      c.name = std::string(value.as_string());
    } else if (key == "description") {
      if (!value.is_string()) return bad_request("'response_format.json_schema.description' must be a string", where);
    } else if (key == "strict") {
      if (!value.is_bool() && !value.is_null())
        return bad_request("'response_format.json_schema.strict' must be a boolean", where);
      c.strict = value.is_bool() && value.as_bool();
    } else if (key == "schema") {
      if (Fail f = schema_text(value, where + ".json_schema.schema", c.source)) return f;
      has_schema = true;
    } else {
      return unknown_key(where + ".json_schema", key);
    }
  }
  if (!has_schema) return bad_request("'response_format.json_schema.schema' is required", where);
  out = std::move(c);
  return std::nullopt;
}

Fail parse_structured_outputs(std::string_view text, OutputConstraint& out) {
  const std::string where = "structured_outputs";
  json::value v;
  if (Fail f = begin(text, where, out, v)) return f;
  if (!v.is_object()) return bad_request("'structured_outputs' must be an object", where);
  OutputConstraint c;
  c.field = where;
  c.strict = false;
  int kinds = 0;
  for (const auto& [key, value] : v.as_object()) {
    if (value.is_null()) continue;
    const std::string name = where + "." + std::string(key);
    if (key == "json") {
      ++kinds;
      c.kind = OutputConstraint::Kind::json_schema;
      if (value.is_string()) {  // vLLM accepts the schema as a JSON string too
        json::value schema;
        if (Fail f = parse(value.as_string(), name, schema)) return f;
        if (Fail f = schema_text(schema, name, c.source)) return f;
      } else if (Fail f = schema_text(value, name, c.source)) {
        return f;
      }
    } else if (key == "regex" || key == "grammar") {
      ++kinds;
      if (!value.is_string()) return bad_request("'" + name + "' must be a string", where);
      c.kind = key == "regex" ? OutputConstraint::Kind::regex : OutputConstraint::Kind::grammar;
      c.source = std::string(value.as_string());
    } else if (key == "choice") {
      ++kinds;
      c.kind = OutputConstraint::Kind::choice;
      if (!value.is_array() || value.as_array().empty())
        return bad_request("'" + name + "' must be a non-empty array of strings", where);
      for (const json::value& choice : value.as_array()) {
        if (!choice.is_string()) return bad_request("'" + name + "' must be a non-empty array of strings", where);
        c.choices.emplace_back(choice.as_string());
      }
    } else if (key == "json_object") {
      if (!value.is_bool()) return bad_request("'" + name + "' must be a boolean", where);
      if (value.as_bool()) {
        ++kinds;
        c.kind = OutputConstraint::Kind::json_object;
      }
    } else if (key == "disable_any_whitespace") {
      // vLLM: no whitespace between JSON tokens, which strict mode bounds to
      // none or one space; taken as strict.
      if (!value.is_bool()) return bad_request("'" + name + "' must be a boolean", where);
      c.strict = c.strict || value.as_bool();
    } else {
      return bad_request("'" + name + "' is not supported (json, regex, choice, grammar and json_object are)", where);
    }
  }
  if (kinds != 1)
    return bad_request("'structured_outputs' needs exactly one of json, regex, choice, grammar or json_object", where);
  out = std::move(c);
  return std::nullopt;
}

Fail parse_json_schema_field(std::string_view text, OutputConstraint& out) {
  const std::string where = "json_schema";
  json::value v;
  if (Fail f = begin(text, where, out, v)) return f;
  OutputConstraint c;
  c.field = where;
  c.strict = false;
  c.kind = OutputConstraint::Kind::json_schema;
  if (Fail f = schema_text(v, where, c.source)) return f;
  out = std::move(c);
  return std::nullopt;
}

Fail parse_grammar_field(std::string_view text, OutputConstraint& out) {
  const std::string where = "grammar";
  json::value v;
  if (Fail f = begin(text, where, out, v)) return f;
  if (!v.is_string()) return bad_request("'grammar' must be a string of GBNF rules", where);
  if (v.as_string().empty()) return std::nullopt;  // llama.cpp: "" means none
  OutputConstraint c;
  c.field = where;
  c.kind = OutputConstraint::Kind::grammar;
  c.source = std::string(v.as_string());
  out = std::move(c);
  return std::nullopt;
}

}  // namespace conveyor::http
