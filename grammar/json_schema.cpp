#include "grammar/json_schema.hpp"

#include <boost/json/parse.hpp>
#include <boost/json/serialize.hpp>
#include <cmath>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "grammar/expr.hpp"
#include "grammar/json_number_range.hpp"
#include "grammar/json_schema_merge.hpp"
#include "grammar/json_syntax.hpp"
#include "grammar/regex.hpp"

namespace conveyor::grammar {
namespace {

namespace json = boost::json;

const std::set<std::string_view> kKeywords = {
    "type",     "enum",        "const",         "properties", "required",  "additionalProperties",
    "items",    "prefixItems", "additionalItems", "minItems", "maxItems",  "anyOf",
    "oneOf",    "allOf",       "$ref",          "minLength",  "maxLength", "pattern",
    "format",   "minimum",     "maximum",       "exclusiveMinimum", "exclusiveMaximum"};
const std::set<std::string_view> kAnnotations = {"title",   "description", "$schema",    "$id",       "$comment",
                                                 "examples", "default",    "deprecated", "readOnly",  "writeOnly",
                                                 "$defs",   "definitions"};

// The formats, as regular expressions over the string's characters (see
// the header for the standards they follow).
const std::map<std::string_view, std::string_view> kFormats = {
    {"date",
     R"((?:\d{4}-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12]\d|3[01])|(?:0[469]|11)-(?:0[1-9]|[12]\d|30)|02-(?:0[1-9]|1\d|2[0-8]))|(?:\d\d(?:0[48]|[2468][048]|[13579][26])|(?:[02468][048]|[13579][26])00)-02-29))"},
    {"time", R"((?:[01]\d|2[0-3]):[0-5]\d:(?:[0-5]\d|60)(?:\.\d+)?(?:[Zz]|[+-](?:[01]\d|2[0-3]):[0-5]\d))"},
    {"uuid", R"([0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12})"},
    {"email",
     R"([A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(?:\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*@[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?(?:\.[A-Za-z0-9](?:[A-Za-z0-9-]{0,61}[A-Za-z0-9])?)*)"},
    {"ipv4", R"((?:(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d)\.){3}(?:25[0-5]|2[0-4]\d|1\d\d|[1-9]?\d))"},
};

std::string format_regex(std::string_view name) {
  if (name == "date-time") return std::string(kFormats.at("date")) + "[Tt]" + std::string(kFormats.at("time"));
  const auto it = kFormats.find(name);
  return it == kFormats.end() ? std::string() : std::string(it->second);
}

// Nested merges and inlined $refs deeper than this are a cycle.
constexpr int kMaxInlineDepth = 64;

enum Type : uint8_t { kNull = 1, kBoolean = 2, kObject = 4, kArray = 8, kString = 16, kNumber = 32, kInteger = 64 };

std::string pointer_token(std::string_view name) {
  std::string out;
  for (char c : name) {
    if (c == '~') out += "~0";
    else if (c == '/') out += "~1";
    else out += c;
  }
  return out;
}

std::string percent_decoded(std::string_view s) {
  std::string out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '%' && i + 2 < s.size() && std::isxdigit(uint8_t(s[i + 1])) && std::isxdigit(uint8_t(s[i + 2]))) {
      out += char(std::stoi(std::string(s.substr(i + 1, 2)), nullptr, 16));
      i += 2;
    } else {
      out += s[i];
    }
  }
  return out;
}

class SchemaCompiler {
 public:
  SchemaCompiler(GrammarBuilder& b, const json::value& root, const JsonSchemaOptions& options)
      : b_(b), root_(root), strict_(options.strict), syntax_(b, options.strict) {}

  Expected<Element> compile(const json::value& schema, const std::string& path, int depth = 0);

 private:
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
};

Expected<json::value> SchemaCompiler::resolve(std::string_view ref, const std::string& path) const {
  if (!ref.starts_with('#')) {
    return fail(path, "$ref '" + std::string(ref) + "' is not supported (only references within the schema, \"#/...\")");
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

Expected<int64_t> SchemaCompiler::count(const json::object& s, std::string_view key, int64_t fallback,
                                        const std::string& path) const {
  const json::value* v = s.if_contains(key);
  if (!v) return fallback;
  if (!v->is_number()) return fail(path, "'" + std::string(key) + "' must be a non-negative integer");
  const double d = v->to_number<double>();
  if (d < 0 || std::floor(d) != d) return fail(path, "'" + std::string(key) + "' must be a non-negative integer");
  if (d > kMaxRepeatCount) {
    return fail(path, "'" + std::string(key) + "' above " + std::to_string(kMaxRepeatCount) + " is not supported");
  }
  return int64_t(d);
}

Expected<Element> SchemaCompiler::compile(const json::value& schema, const std::string& path, int depth) {
  if (depth > kMaxInlineDepth) return fail(path, "schema nested or merged too deeply");
  if (b_.rule_count() > kMaxGrammarRules) return fail(path, "the grammar would be too large");
  if (schema.is_bool()) return schema.get_bool() ? syntax_.value() : never();
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

Expected<Element> SchemaCompiler::compile_enum(const json::object& s, uint8_t types, const std::string& path) {
  for (const auto& member : s) {
    if (member.key() != "enum" && member.key() != "const" && member.key() != "type" &&
        !kAnnotations.contains(member.key())) {
      return fail(path, "'" + std::string(member.key()) + "' beside enum or const is not supported");
    }
  }
  json::array values;
  if (const json::value* c = s.if_contains("const")) values.push_back(*c);
  if (const json::value* e = s.if_contains("enum")) {
    if (!e->is_array()) return fail(path, "'enum' must be a list");
    if (s.contains("const")) {  // both: the const, if it is among the enum's values
      const auto& list = e->get_array();
      if (std::find(list.begin(), list.end(), values[0]) == list.end()) values.clear();
    } else {
      values = e->get_array();
    }
  }
  std::vector<Alternative> alts;
  for (const json::value& v : values) {
    const bool integral = v.is_int64() || v.is_uint64() || (v.is_double() && std::floor(v.get_double()) == v.get_double());
    const uint8_t type = v.is_null()     ? kNull
                         : v.is_bool()   ? kBoolean
                         : v.is_object() ? kObject
                         : v.is_array()  ? kArray
                         : v.is_string() ? kString
                         : integral      ? uint8_t(kNumber | kInteger)
                                         : kNumber;
    if (types & type) alts.push_back(syntax_.literal(v));
  }
  if (alts.empty()) return never();
  return b_.choice(std::move(alts), "enum");
}

Expected<Element> SchemaCompiler::compile_string(const json::object& s, const std::string& path) {
  const json::value* pattern = s.if_contains("pattern");
  const json::value* format = s.if_contains("format");
  const bool lengths = s.contains("minLength") || s.contains("maxLength");
  if (int(pattern != nullptr) + int(format != nullptr) + int(lengths) > 1) {
    return fail(path, "at most one of pattern, format and minLength/maxLength is supported on one string");
  }
  const Element quote = b_.byte('"');
  if (pattern || format) {
    RegexOptions options{RegexOptions::Anchoring::search, TextForm::json_string};
    std::string regex;
    if (pattern) {
      if (!pattern->is_string()) return fail(path, "'pattern' must be a string");
      regex = std::string(pattern->get_string());
    } else {
      if (!format->is_string()) return fail(path, "'format' must be a string");
      regex = format_regex(format->get_string());
      if (regex.empty()) return fail(path, "format '" + std::string(format->get_string()) + "' is not supported");
      options.anchoring = RegexOptions::Anchoring::whole_string;
    }
    auto body = add_regex(b_, regex, options);
    if (!body) return fail(path, "pattern: " + body.error().message);
    return b_.choice({{quote, *body, quote}}, "string");
  }
  if (!lengths) return syntax_.string();
  auto min = count(s, "minLength", 0, path);
  if (!min) return min.error();
  auto max = count(s, "maxLength", -1, path);
  if (!max) return max.error();
  if (*max >= 0 && *max < *min) return never();
  return b_.choice({{quote, b_.repeat({syntax_.string_char()}, int32_t(*min), int32_t(*max)), quote}}, "string");
}

Expected<Element> SchemaCompiler::compile_number(const json::object& s, bool integer, const std::string& path) {
  std::optional<NumberBound> lo, hi;
  std::optional<int64_t> int_lo, int_hi;  // integers: the bounds as the first and last integer in range
  for (const char* key : {"minimum", "exclusiveMinimum", "maximum", "exclusiveMaximum"}) {
    const json::value* v = s.if_contains(key);
    if (!v) continue;
    if (!v->is_number()) return fail(path, "'" + std::string(key) + "' must be a number");
    const double d = v->to_number<double>();
    const bool lower = std::string_view(key).ends_with("inimum");
    const bool exclusive = key[0] == 'e';
    if (std::fabs(d) > double(kMaxNumberBound)) {
      return fail(path, "'" + std::string(key) + "' beyond +-1e18 is not supported");
    }
    if (integer) {
      const auto edge = int64_t(lower ? (exclusive ? std::floor(d) + 1 : std::ceil(d))
                                      : (exclusive ? std::ceil(d) - 1 : std::floor(d)));
      std::optional<int64_t>& slot = lower ? int_lo : int_hi;
      if (!slot || (lower ? edge > *slot : edge < *slot)) slot = edge;
      continue;
    }
    const NumberBound bound{d, exclusive};
    std::optional<NumberBound>& slot = lower ? lo : hi;
    const bool tighter = !slot || (lower ? d > slot->value : d < slot->value) || (d == slot->value && exclusive);
    if (tighter) slot = bound;
  }
  if (integer) {
    if (!int_lo && !int_hi) return syntax_.integer();
    return integer_range(b_, int_lo, int_hi);
  }
  if (!lo && !hi) return syntax_.number();
  auto e = number_range(b_, lo, hi);
  if (!e) return fail(path, e.error().message);
  return e;
}

Expected<Element> SchemaCompiler::compile_object(const json::object& s, const std::string& path, int depth) {
  const json::value* props_value = s.if_contains("properties");
  if (props_value && !props_value->is_object()) return fail(path, "'properties' must be an object");
  std::set<std::string, std::less<>> required;
  if (const json::value* r = s.if_contains("required")) {
    if (!r->is_array()) return fail(path, "'required' must be a list of strings");
    for (const json::value& name : r->get_array()) {
      if (!name.is_string()) return fail(path, "'required' must be a list of strings");
      required.emplace(name.get_string());
    }
  }
  // Additional members: their value's element, or none when forbidden.
  std::optional<Element> additional;
  const json::value* add_schema = s.if_contains("additionalProperties");
  if (add_schema) {
    if (!(add_schema->is_bool() && !add_schema->get_bool())) {
      auto e = compile(*add_schema, path + "/additionalProperties", depth + 1);
      if (!e) return e;
      additional = *e;
    }
  } else if (!(strict_ && props_value)) {
    additional = syntax_.value();
  }
  struct Member {
    std::string name;
    Element value;
    bool required;
  };
  std::vector<Member> members;
  std::vector<std::string> names;  // every listed name: additional keys differ from them
  if (props_value) {
    for (const auto& [name, sub] : props_value->get_object()) {
      names.emplace_back(name);
      const bool req = required.contains(name);
      if (sub.is_bool() && !sub.get_bool()) {
        if (req) return never();
        continue;  // may not appear
      }
      auto e = compile(sub, path + "/properties/" + pointer_token(name), depth + 1);
      if (!e) return e;
      members.push_back({std::string(name), *e, req});
    }
  }
  for (const std::string& name : required) {  // required, not listed: the additional schema's
    if (props_value && props_value->get_object().contains(name)) continue;
    if (!additional) return never();
    names.push_back(name);
    members.push_back({name, *additional, true});
  }
  const auto member_seq = [&](const Member& m) {
    Alternative alt = b_.literal(JsonSyntax::quoted(m.name));
    const Alternative c = syntax_.colon();
    alt.insert(alt.end(), c.begin(), c.end());
    alt.push_back(m.value);
    return alt;
  };
  Alternative extra;  // one additional member
  if (additional) {
    extra.push_back(names.empty() ? syntax_.string() : syntax_.key_not_in(names));
    const Alternative c = syntax_.colon();
    extra.insert(extra.end(), c.begin(), c.end());
    extra.push_back(*additional);
  }
  const auto with_comma = [&](const Alternative& alt) {
    Alternative out = syntax_.comma();
    out.insert(out.end(), alt.begin(), alt.end());
    return out;
  };
  // From the end backwards: rest(i) continues after some member was
  // written, with members i.. and then the additional ones; first(i) writes
  // the first member, from i on (none when it cannot: members i.. all
  // absent and no additional ones).
  Element rest = additional ? b_.star(with_comma(extra)) : nothing_more();
  std::optional<Element> first;
  if (additional) {
    Alternative alt = extra;
    alt.push_back(rest);
    first = b_.choice({std::move(alt)}, "members");
  }
  for (size_t i = members.size(); i-- > 0;) {
    const Alternative m = member_seq(members[i]);
    Alternative present = with_comma(m);
    present.push_back(rest);
    std::vector<Alternative> rest_alts{std::move(present)};
    if (!members[i].required) rest_alts.push_back({rest});
    Alternative first_present = m;
    first_present.push_back(rest);
    std::vector<Alternative> first_alts{std::move(first_present)};
    if (!members[i].required && first) first_alts.push_back({*first});
    rest = b_.choice(std::move(rest_alts), "members");
    first = b_.choice(std::move(first_alts), "members");
  }
  const bool none_required = std::none_of(members.begin(), members.end(), [](const Member& m) { return m.required; });
  std::vector<Alternative> alts;
  if (none_required) alts.push_back(syntax_.empty('{'));
  if (first) {
    Alternative full = syntax_.open('{');
    full.push_back(*first);
    const Alternative c = syntax_.close('}');
    full.insert(full.end(), c.begin(), c.end());
    alts.push_back(std::move(full));
  }
  return b_.choice(std::move(alts), "object");
}

Expected<Element> SchemaCompiler::compile_array(const json::object& s, const std::string& path, int depth) {
  // prefixItems and items (2020-12), or items as a list and additionalItems (draft 7).
  const json::value* prefix_value = s.if_contains("prefixItems");
  const json::value* items_value = s.if_contains("items");
  std::string prefix_key = "prefixItems", rest_key = "items";
  if (items_value && items_value->is_array()) {
    if (prefix_value) return fail(path, "'items' must be a schema beside 'prefixItems'");
    prefix_value = items_value;
    items_value = s.if_contains("additionalItems");
    prefix_key = "items";
    rest_key = "additionalItems";
  }
  if (prefix_value && !prefix_value->is_array()) return fail(path, "'prefixItems' must be a list");
  std::vector<Element> prefix;
  if (prefix_value) {
    for (size_t i = 0; i < prefix_value->get_array().size(); ++i) {
      auto e = compile(prefix_value->get_array()[i], path + "/" + prefix_key + "/" + std::to_string(i), depth + 1);
      if (!e) return e;
      prefix.push_back(*e);
    }
  }
  std::optional<Element> rest_item;
  if (!items_value) {
    rest_item = syntax_.value();
  } else if (!(items_value->is_bool() && !items_value->get_bool())) {
    auto e = compile(*items_value, path + "/" + rest_key, depth + 1);
    if (!e) return e;
    rest_item = *e;
  }
  auto min_items = count(s, "minItems", 0, path);
  if (!min_items) return min_items.error();
  auto max_items = count(s, "maxItems", -1, path);
  if (!max_items) return max_items.error();
  const auto k = int64_t(prefix.size());
  const int64_t min = *min_items;
  int64_t max = *max_items;
  if (!rest_item && (max < 0 || max > k)) max = k;
  if (max >= 0 && max < min) return never();
  // tail(j): the rest of the array after j >= 1 items.
  const auto comma_then = [&](Element e) {
    Alternative alt = syntax_.comma();
    alt.push_back(e);
    return alt;
  };
  // Items past max (when max < k) never come; past k, rest_item's. The
  // first item is written before tail(1), so the tail starts at 1 or more.
  const int64_t last = max >= 0 && max < k ? max : k;
  const int64_t base = std::max<int64_t>(last, 1);
  Element tail = last == k && rest_item
                     ? b_.repeat(comma_then(*rest_item), int32_t(std::max<int64_t>(0, min - base)),
                                 max < 0 ? -1 : int32_t(std::max<int64_t>(0, max - base)))
                     : nothing_more();
  for (int64_t j = base - 1; j >= 1; --j) {
    std::vector<Alternative> alts;
    if (j >= min) alts.push_back({});
    Alternative more = comma_then(prefix[size_t(j)]);
    more.push_back(tail);
    alts.push_back(std::move(more));
    tail = b_.choice(std::move(alts), "items");
  }
  std::vector<Alternative> alts;
  if (min == 0) alts.push_back(syntax_.empty('['));
  const std::optional<Element> first = k > 0 ? std::optional<Element>(prefix[0]) : rest_item;
  if (first && max != 0) {
    Alternative full = syntax_.open('[');
    full.push_back(*first);
    full.push_back(tail);
    const Alternative c = syntax_.close(']');
    full.insert(full.end(), c.begin(), c.end());
    alts.push_back(std::move(full));
  }
  if (alts.empty()) return never();
  return b_.choice(std::move(alts), "array");
}

}  // namespace

Expected<Element> add_json_schema(GrammarBuilder& b, const json::value& schema, const JsonSchemaOptions& options) {
  SchemaCompiler compiler(b, schema, options);
  return compiler.compile(schema, "#");
}

Expected<Grammar> grammar_from_json_schema(std::string_view schema_json, const JsonSchemaOptions& options) {
  boost::system::error_code ec;
  const json::value schema = json::parse(schema_json, ec);
  if (ec) return make_error(Errc::invalid_argument, "json_schema: the schema is not valid JSON: " + ec.message());
  GrammarBuilder b;
  const int32_t root = b.add_rule("root");
  auto element = add_json_schema(b, schema, options);
  if (!element) return element.error();
  b.add_alternative(root, {*element});
  auto g = std::move(b).build(root);
  if (!g) return make_error(Errc::invalid_argument, "json_schema: " + g.error().message);
  if (!matches_some_text(*g)) return make_error(Errc::invalid_argument, "json_schema: the schema matches no JSON value");
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
