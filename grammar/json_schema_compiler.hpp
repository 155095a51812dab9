// The JSON Schema compiler's inside, shared by json_schema.cpp (keywords,
// $ref, allOf / anyOf / oneOf, the public functions) and
// json_schema_types.cpp (each type's keywords). Not a public header.
#pragma once

#include <boost/json/serializer.hpp>
#include <boost/json/value.hpp>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <unordered_map>
#include <vector>

#include "base/status.hpp"
#include "grammar/grammar.hpp"
#include "grammar/json_schema.hpp"
#include "grammar/json_syntax.hpp"

namespace conveyor::grammar::detail {

namespace json = boost::json;

// The keywords the compiler enforces, and the annotations it accepts and
// ignores; any other keyword is refused.
inline const std::set<std::string_view> kKeywords = {
    "type",      "enum",          "const",      "properties",      "required",        "additionalProperties",
    "items",     "prefixItems",   "additionalItems", "minItems",   "maxItems",        "anyOf",
    "oneOf",     "allOf",         "$ref",       "minLength",       "maxLength",       "pattern",
    "format",    "minimum",       "maximum",    "exclusiveMinimum", "exclusiveMaximum"};
inline const std::set<std::string_view> kAnnotations = {
    "title",    "description", "$schema",  "$id",      "$comment", "examples",
    "default",  "deprecated",  "readOnly", "writeOnly", "$defs",   "definitions"};

enum Type : uint8_t { kNull = 1, kBoolean = 2, kObject = 4, kArray = 8, kString = 16, kNumber = 32, kInteger = 64 };

// A JSON pointer's token for a property name (~ and / escaped).
inline std::string pointer_token(std::string_view name) {
  std::string out;
  for (char c : name) {
    if (c == '~') out += "~0";
    else if (c == '/') out += "~1";
    else out += c;
  }
  return out;
}

// One schema document's compilation into one builder: a rule per $ref
// target, shared JSON syntax elements. Errors name the keyword and the JSON
// pointer of the schema where it is.
class SchemaCompiler {
 public:
  SchemaCompiler(GrammarBuilder& b, const json::value& root, const JsonSchemaOptions& options)
      : b_(b), root_(root), strict_(options.strict), syntax_(b, options.strict) {}

  // Equal subschemas (one definition written out for many properties
  // rather than named with $ref) compile once and share their rule: its
  // positions, and so its token masks, exist once.
  Expected<Element> compile(const json::value& schema, const std::string& path, int depth = 0);

 private:
  Expected<Element> compile_new(const json::value& schema, const std::string& path, int depth);
  // The key of compiled_: the subschema's JSON text, or none past kMaxSharedBytes.
  static constexpr size_t kMaxSharedBytes = 16 * 1024;
  std::optional<std::string> shared_key(const json::value& schema);
  Error fail(const std::string& path, const std::string& what) const {
    return make_error(Errc::invalid_argument, "json_schema: " + what + " (at " + path + ")");
  }
  Element never() { return b_.bytes(ByteSet{}); }
  Element nothing_more() { return b_.choice({Alternative{}}, "end"); }

  Expected<json::value> resolve(std::string_view ref, const std::string& path) const;
  Expected<json::value> inline_refs(const json::value& schema, const std::string& path, int depth) const;
  Expected<Element> ref_rule(std::string_view ref, const std::string& path);

  Expected<Element> compile_enum(const json::object& s, uint8_t types, const std::string& path);
  Expected<Element> compile_string(const json::object& s, const std::string& path);
  Expected<Element> compile_number(const json::object& s, bool integer, const std::string& path);
  Expected<Element> compile_object(const json::object& s, const std::string& path, int depth);
  Expected<Element> compile_array(const json::object& s, const std::string& path, int depth);

  // A non-negative count keyword (minLength ...), or `fallback` when absent.
  Expected<int64_t> count(const json::object& s, std::string_view key, int64_t fallback, const std::string& path) const;

  GrammarBuilder& b_;
  const json::value& root_;
  bool strict_;
  JsonSyntax syntax_;
  std::map<std::string, int32_t, std::less<>> ref_rules_;  // $ref -> its rule
  std::unordered_map<std::string, Element> compiled_;      // a subschema's JSON text -> its element
  json::serializer writer_;                                // shared_key's
  std::vector<char> key_buffer_;                           // shared_key's: kMaxSharedBytes
};

}  // namespace conveyor::grammar::detail
