// Each JSON type's keywords: enum and const, strings (lengths, pattern,
// format), numbers and integers (bounds), objects and arrays.
#include <cmath>
#include <optional>

#include "grammar/expr.hpp"
#include "grammar/json_number_range.hpp"
#include "grammar/json_schema_compiler.hpp"
#include "grammar/length_bound.hpp"
#include "grammar/regex.hpp"

namespace conveyor::grammar::detail {
namespace {

// The formats, as regular expressions over the string's characters (see
// the header for the standards they follow).
const std::map<std::string_view, std::string_view> kFormats = {
    {"date",
     R"((?:(?:[1-9]\d{3}|0[1-9]\d\d|00[1-9]\d|000[1-9])-(?:(?:0[13578]|1[02])-(?:0[1-9]|[12]\d|3[01])|(?:0[469]|11)-(?:0[1-9]|[12]\d|30)|02-(?:0[1-9]|1\d|2[0-8]))|(?:\d\d(?:0[48]|[2468][048]|[13579][26])|(?:0[48]|[2468][048]|[13579][26])00)-02-29))"},
    {"time",
     R"((?:[01]\d|2[0-3]):[0-5]\d:[0-5]\d(?:\.\d{1,9})?(?:[Zz]|[+-](?:[01]\d|2[0-3]):[0-5]\d))"},
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

}  // namespace

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
    const bool integral =
        v.is_int64() || v.is_uint64() || (v.is_double() && std::floor(v.get_double()) == v.get_double());
    const auto type = uint8_t(v.is_null()     ? kNull
                              : v.is_bool()   ? kBoolean
                              : v.is_object() ? kObject
                              : v.is_array()  ? kArray
                              : v.is_string() ? kString
                              : integral      ? kNumber | kInteger
                                              : kNumber);
    if (types & type) alts.push_back(syntax_.literal(v));
  }
  if (alts.empty()) return never();
  return b_.choice(std::move(alts), "enum");
}

Expected<Element> SchemaCompiler::compile_string(const json::object& s, const std::string& path) {
  const json::value* pattern = s.if_contains("pattern");
  const json::value* format = s.if_contains("format");
  auto min = count(s, "minLength", 0, path);
  if (!min) return min.error();
  auto max = count(s, "maxLength", -1, path);
  if (!max) return max.error();
  if (*max >= 0 && *max < *min) return never();
  const bool lengths = *min > 0 || *max >= 0;
  const Element quote = b_.byte('"');
  if (pattern || format) {
    // (regex, anchoring) of each: a pattern may match anywhere, a format is the whole string.
    std::vector<std::pair<std::string, RegexOptions::Anchoring>> regexes;
    if (pattern) {
      if (!pattern->is_string()) return fail(path, "'pattern' must be a string");
      regexes.emplace_back(std::string(pattern->get_string()), RegexOptions::Anchoring::search);
    }
    if (format) {
      if (!format->is_string()) return fail(path, "'format' must be a string");
      std::string regex = format_regex(format->get_string());
      if (regex.empty()) return fail(path, "format '" + std::string(format->get_string()) + "' is not supported");
      regexes.emplace_back(std::move(regex), RegexOptions::Anchoring::whole_string);
    }
    const auto compile = [&]() -> Expected<Element> {
      if (!lengths && regexes.size() == 1)
        return add_regex(b_, regexes[0].first, RegexOptions{regexes[0].second, TextForm::json_string});
      // Their common strings of an allowed length (grammar/length_bound.hpp).
      std::vector<Expr> exprs;
      for (const auto& [regex, anchoring] : regexes) {
        auto expr = regex_expr(regex, anchoring);
        if (!expr) return expr.error();
        exprs.push_back(std::move(*expr));
      }
      return add_bounded_regexes(b_, exprs, int32_t(*min), int32_t(*max), TextForm::json_string);
    };
    auto body = compile();
    if (!body) {
      const char* keyword = pattern && format ? "pattern and format" : pattern ? "pattern" : "format";
      return fail(path, std::string(keyword) + ": " + body.error().message);
    }
    return b_.choice({{quote, *body, quote}}, "string");
  }
  if (!lengths) return syntax_.string();
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
    return integer_range(syntax_.digits(), int_lo, int_hi);
  }
  if (!lo && !hi) return syntax_.number();
  auto e = number_range(syntax_.digits(), lo, hi);
  if (!e) return fail(path, e.error().message);
  return e;
}

Expected<Element> SchemaCompiler::compile_object(const json::object& s, const std::string& path, int depth) {
  const json::value* props_value = s.if_contains("properties");
  if (props_value && !props_value->is_object()) return fail(path, "'properties' must be an object");
  std::set<std::string, std::less<>> required;
  std::vector<std::string> required_order;  // as listed, without repeats
  if (const json::value* r = s.if_contains("required")) {
    if (!r->is_array()) return fail(path, "'required' must be a list of strings");
    for (const json::value& name : r->get_array()) {
      if (!name.is_string()) return fail(path, "'required' must be a list of strings");
      if (required.emplace(name.get_string()).second) required_order.emplace_back(name.get_string());
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
  for (const std::string& name : required_order) {  // required, not listed: the additional schema's, in this order
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

}  // namespace conveyor::grammar::detail
