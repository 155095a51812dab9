#include "grammar/json_schema.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <boost/json/serializer.hpp>
#include <map>
#include <optional>
#include <string>

#include "grammar/expr.hpp"
#include "grammar/json_schema_compiler.hpp"
#include "grammar/json_schema_merge.hpp"

namespace conveyor::grammar {
namespace {

namespace json = boost::json;
using detail::SchemaCompiler;

// Nested merges and inlined $refs deeper than this are a cycle.
constexpr int kMaxInlineDepth = 64;

std::string percent_decoded(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    const int hi = i + 2 < s.size() ? hex_digit_value(s[i + 1]) : -1;
    const int lo = i + 2 < s.size() ? hex_digit_value(s[i + 2]) : -1;
    if (s[i] == '%' && hi >= 0 && lo >= 0) {
      out += char(hi * 16 + lo);
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

}  // namespace

namespace detail {

Expected<json::value> SchemaCompiler::resolve(std::string_view ref, const std::string& path) const {
  if (!ref.starts_with('#')) {
    return fail(path, "$ref '" + std::string(ref) +
                          "' is not supported (only references within the schema, \"#/...\")");
  }
  const std::string pointer = percent_decoded(ref.substr(1));
  boost::system::error_code ec;
  const json::value* target = root_.find_pointer(pointer, ec);
  if (!target) return fail(path, "$ref '" + std::string(ref) + "' does not resolve");
  return *target;
}

// The schema with a top-level $ref replaced by its target merged with the
// $ref's siblings, repeatedly.
Expected<json::value> SchemaCompiler::inline_refs(const json::value& schema, const std::string& path,
                                                  int depth) const {
  if (!schema.is_object() || !schema.get_object().contains("$ref")) return schema;
  if (depth > kMaxInlineDepth) return fail(path, "$ref cycle");
  const json::value& ref = schema.get_object().at("$ref");
  if (!ref.is_string()) return fail(path, "'$ref' must be a string");
  auto target = resolve(ref.get_string(), path);
  if (!target) return target;
  auto expanded = inline_refs(*target, path, depth + 1);
  if (!expanded) return expanded;
  json::object siblings = schema.get_object();
  siblings.erase("$ref");
  auto merged = merge_schemas(*expanded, siblings);
  if (!merged) return fail(path, merged.error().message);
  return merged;
}

Expected<Element> SchemaCompiler::ref_rule(std::string_view ref, const std::string& path) {
  if (const auto it = ref_rules_.find(ref); it != ref_rules_.end()) return b_.rule_ref(it->second);
  auto target = resolve(ref, path);
  if (!target) return target.error();
  const size_t slash = ref.rfind('/');
  const int32_t rule = b_.add_rule(slash == std::string_view::npos || slash + 1 == ref.size()
                                       ? std::string("ref")
                                       : "ref_" + std::string(ref.substr(slash + 1)));
  ref_rules_.emplace(std::string(ref), rule);  // before compiling: the target may refer to itself
  auto body = compile(*target, std::string(ref), 0);
  if (!body) return body;
  b_.add_alternative(rule, {*body});
  return b_.rule_ref(rule);
}

Expected<Element> SchemaCompiler::compile(const json::value& schema, const std::string& path, int depth) {
  if (depth > kMaxInlineDepth) return fail(path, "schema nested or merged too deeply");
  if (b_.rule_count() > kMaxGrammarRules) return fail(path, "the grammar would be too large");
  if (schema.is_bool()) return schema.get_bool() ? syntax_.value() : never();
  // Keyed by the text: what a subschema compiles to depends on it alone
  // (paths name errors only; one found again deeper than the depth bound is
  // taken: the bound guards work, and a copy costs none). Large subschemas
  // seldom repeat: past kMaxSharedBytes of text they are not keyed, which
  // bounds the serializing to that much a subschema.
  std::optional<std::string> key = shared_key(schema);
  if (key) {
    if (const auto it = compiled_.find(*key); it != compiled_.end()) return it->second;
  }
  auto e = compile_new(schema, path, depth);
  if (e && key) compiled_.emplace(std::move(*key), *e);
  return e;
}

std::optional<std::string> SchemaCompiler::shared_key(const json::value& schema) {
  writer_.reset(&schema);
  key_buffer_.resize(kMaxSharedBytes);
  const std::string_view written = writer_.read(key_buffer_.data(), key_buffer_.size());
  if (!writer_.done()) return std::nullopt;
  return std::string(written);
}

Expected<Element> SchemaCompiler::compile_new(const json::value& schema, const std::string& path, int depth) {
  if (!schema.is_object()) return fail(path, "a schema must be an object or a boolean");
  const json::object& s = schema.get_object();
  for (const auto& member : s) {
    if (!kKeywords.contains(member.key()) && !kAnnotations.contains(member.key())) {
      return fail(path, "keyword '" + std::string(member.key()) + "' is not supported");
    }
  }
  const auto constrains = [](const json::object& o, std::string_view except) {
    for (const auto& member : o) {
      if (member.key() != except && !kAnnotations.contains(member.key())) return true;
    }
    return false;
  };
  // $ref: a rule of its own, or merged with the siblings that constrain too.
  if (const json::value* ref = s.if_contains("$ref")) {
    if (!ref->is_string()) return fail(path, "'$ref' must be a string");
    if (!constrains(s, "$ref")) return ref_rule(ref->get_string(), path);
    auto merged = inline_refs(schema, path, depth);
    if (!merged) return merged.error();
    return compile(*merged, path, depth + 1);
  }
  if (const json::value* all = s.if_contains("allOf")) {
    if (!all->is_array() || all->get_array().empty()) return fail(path, "'allOf' must be a non-empty list");
    json::value merged = s;
    merged.get_object().erase("allOf");
    for (size_t i = 0; i < all->get_array().size(); ++i) {
      const std::string at = path + "/allOf/" + std::to_string(i);
      auto sub = inline_refs(all->get_array()[i], at, depth);
      if (!sub) return sub.error();
      auto next = merge_schemas(merged, *sub);
      if (!next) return fail(at, next.error().message);
      merged = std::move(*next);
    }
    return compile(merged, path, depth + 1);
  }
  if (s.contains("anyOf") || s.contains("oneOf")) {
    if (s.contains("anyOf") && s.contains("oneOf")) return fail(path, "anyOf together with oneOf is not supported");
    const std::string_view key = s.contains("anyOf") ? "anyOf" : "oneOf";
    const json::value& branches = s.at(key);
    if (!branches.is_array() || branches.get_array().empty()) {
      return fail(path, "'" + std::string(key) + "' must be a non-empty list");
    }
    json::object rest = s;
    rest.erase(key);
    const bool merge = constrains(rest, "");
    std::vector<Alternative> alts;
    for (size_t i = 0; i < branches.get_array().size(); ++i) {
      const std::string at = path + "/" + std::string(key) + "/" + std::to_string(i);
      json::value branch = branches.get_array()[i];
      if (merge) {
        auto inlined = inline_refs(branch, at, depth);
        if (!inlined) return inlined.error();
        auto merged = merge_schemas(rest, *inlined);
        if (!merged) return fail(at, merged.error().message);
        branch = std::move(*merged);
      }
      auto e = compile(branch, at, depth + 1);
      if (!e) return e;
      alts.push_back({*e});
    }
    return b_.choice(std::move(alts), "any_of");
  }
  uint8_t types = kNull | kBoolean | kObject | kArray | kString | kNumber;
  if (const json::value* t = s.if_contains("type")) {
    types = 0;
    const json::array names = t->is_array() ? t->get_array() : json::array{*t};
    for (const json::value& name : names) {
      static const std::map<std::string_view, Type> kTypes = {{"null", kNull},     {"boolean", kBoolean},
                                                              {"object", kObject}, {"array", kArray},
                                                              {"string", kString}, {"number", kNumber},
                                                              {"integer", kInteger}};
      const auto it = name.is_string() ? kTypes.find(name.get_string()) : kTypes.end();
      if (it == kTypes.end()) return fail(path, "unknown type " + json::serialize(name));
      types |= it->second;
    }
    if (types & kNumber) types &= uint8_t(~kInteger);
  }
  if (s.contains("enum") || s.contains("const")) return compile_enum(s, types, path);
  std::vector<Alternative> alts;
  if (types & kNull) alts.push_back({syntax_.null()});
  if (types & kBoolean) alts.push_back({syntax_.boolean()});
  const std::pair<Type, Expected<Element> (SchemaCompiler::*)(const json::object&, const std::string&, int)>
      nested[] = {{kObject, &SchemaCompiler::compile_object}, {kArray, &SchemaCompiler::compile_array}};
  for (const auto& [type, method] : nested) {
    if (!(types & type)) continue;
    auto e = (this->*method)(s, path, depth);
    if (!e) return e;
    alts.push_back({*e});
  }
  if (types & kString) {
    auto e = compile_string(s, path);
    if (!e) return e;
    alts.push_back({*e});
  }
  if (types & (kNumber | kInteger)) {
    auto e = compile_number(s, !(types & kNumber), path);
    if (!e) return e;
    alts.push_back({*e});
  }
  if (alts.empty()) return never();
  if (alts.size() == 1) return alts[0][0];
  return b_.choice(std::move(alts), "types");
}

}  // namespace detail

Expected<Element> add_json_schema(GrammarBuilder& b, const json::value& schema, const JsonSchemaOptions& options) {
  SchemaCompiler compiler(b, schema, options);
  return compiler.compile(schema, "#");
}

Expected<Grammar> grammar_from_json_schema(std::string_view schema_json, const JsonSchemaOptions& options) {
  boost::system::error_code ec;
  // Boost.JSON stops at 32 levels by default: 16 nested objects (each is a
  // "properties" level and a schema level). The compiler bounds the schema's
  // own nesting (kMaxInlineDepth), so the text may nest as deep as that.
  json::parse_options parse_options;
  parse_options.max_depth = 2 * kMaxInlineDepth + 8;
  const json::value schema = json::parse(schema_json, ec, {}, parse_options);
  if (ec == json::error::too_deep) {
    std::string message = "json_schema: the schema nests deeper than ";
    message += std::to_string(parse_options.max_depth);
    message += " JSON levels";
    return make_error(Errc::invalid_argument, std::move(message));
  }
  if (ec) return make_error(Errc::invalid_argument, "json_schema: the schema is not valid JSON: " + ec.message());
  GrammarBuilder b;
  const int32_t root = b.add_rule("root");
  auto element = add_json_schema(b, schema, options);
  if (!element) return element.error();
  b.add_alternative(root, {*element});
  auto g = std::move(b).build(root);
  if (!g) return make_error(Errc::invalid_argument, "json_schema: " + g.error().message);
  if (!matches_some_text(*g)) {
    return make_error(Errc::invalid_argument, "json_schema: the schema matches no JSON value");
  }
  return g;
}

Grammar grammar_for_json_object(const JsonSchemaOptions& options) {
  GrammarBuilder b;
  const int32_t root = b.add_rule("root");
  JsonSyntax syntax(b, options.strict);
  b.add_alternative(root, {syntax.object()});
  return std::move(b).build(root).value();
}

}  // namespace conveyor::grammar
