#include "grammar/json_schema_merge.hpp"

#include <algorithm>
#include <string>

namespace conveyor::grammar {
namespace {

namespace json = boost::json;

Error refuse(std::string what) { return make_error(Errc::invalid_argument, "allOf: " + std::move(what)); }

json::value all_of(const json::value& a, const json::value& b) {
  return json::object{{"allOf", json::array{a, b}}};
}

json::array type_list(const json::value& t) {
  if (t.is_array()) return t.get_array();
  return json::array{t};
}

bool has_type(const json::array& types, std::string_view name) {
  return std::any_of(types.begin(), types.end(),
                     [&](const json::value& v) { return v.is_string() && v.get_string() == name; });
}

json::value intersect_types(const json::value& a, const json::value& b) {
  const json::array ta = type_list(a), tb = type_list(b);
  json::array out;
  for (const json::value& t : ta) {
    if (!t.is_string()) continue;
    if (has_type(tb, t.get_string())) out.push_back(t);
    else if (t.get_string() == "number" && has_type(tb, "integer")) out.push_back("integer");
    else if (t.get_string() == "integer" && has_type(tb, "number")) out.push_back("integer");
  }
  return out;
}

json::array enum_values(const json::object& o) {
  if (const json::value* c = o.if_contains("const")) return json::array{*c};
  if (const json::value* e = o.if_contains("enum"); e && e->is_array()) return e->get_array();
  return {};
}

bool numeric_less(const json::value& x, const json::value& y) { return x.to_number<double>() < y.to_number<double>(); }

bool is_lower_bound(std::string_view k) {
  return k == "minimum" || k == "exclusiveMinimum" || k == "minLength" || k == "minItems";
}

bool is_upper_bound(std::string_view k) {
  return k == "maximum" || k == "exclusiveMaximum" || k == "maxLength" || k == "maxItems";
}

bool is_annotation(std::string_view k) {
  return k == "title" || k == "description" || k == "$comment" || k == "examples" || k == "default" ||
         k == "deprecated" || k == "readOnly" || k == "writeOnly" || k == "$schema" || k == "$id" ||
         k == "$defs" || k == "definitions";
}

json::array branches(const json::object& o) {
  if (const json::value* v = o.if_contains("anyOf"); v && v->is_array()) return v->get_array();
  if (const json::value* v = o.if_contains("oneOf"); v && v->is_array()) return v->get_array();
  return {};
}

}  // namespace

Expected<json::value> merge_schemas(const json::value& a, const json::value& b) {
  if (a.is_bool() && a.get_bool()) return b;
  if (b.is_bool() && b.get_bool()) return a;
  if (a.is_bool() || b.is_bool()) return json::value(false);
  if (!a.is_object() || !b.is_object()) return refuse("a schema must be an object or a boolean");
  const json::object& oa = a.get_object();
  const json::object& ob = b.get_object();
  json::object out = oa;
  const auto additional = [](const json::object& o) -> json::value {
    const json::value* v = o.if_contains("additionalProperties");
    return v ? *v : json::value(true);
  };
  for (const auto& [key, vb] : ob) {
    const json::value* va = oa.if_contains(key);
    if (key == "properties" || key == "additionalProperties") continue;  // below, with both sides
    if (!va) {
      out[key] = vb;
      continue;
    }
    if (*va == vb || is_annotation(key)) continue;
    if (key == "type") {
      out[key] = intersect_types(*va, vb);
    } else if (key == "required") {
      if (!va->is_array() || !vb.is_array()) return refuse("'required' must be a list");
      json::array r = va->get_array();
      for (const json::value& name : vb.get_array()) {
        if (std::find(r.begin(), r.end(), name) == r.end()) r.push_back(name);
      }
      out[key] = std::move(r);
    } else if (key == "items") {
      out[key] = all_of(*va, vb);
    } else if (key == "allOf") {
      if (!va->is_array() || !vb.is_array()) return refuse("'allOf' must be a list");
      json::array all = va->get_array();
      all.insert(all.end(), vb.get_array().begin(), vb.get_array().end());
      out[key] = std::move(all);
    } else if (is_lower_bound(key) || is_upper_bound(key)) {
      if (!va->is_number() || !vb.is_number()) return refuse("'" + std::string(key) + "' must be a number");
      const bool b_tighter = is_lower_bound(key) ? numeric_less(*va, vb) : numeric_less(vb, *va);
      if (b_tighter) out[key] = vb;
    } else if (key != "enum" && key != "const" && key != "anyOf" && key != "oneOf") {
      return refuse("'" + std::string(key) + "' differs between the schemas");
    }
  }
  // enum and const: the values in both.
  if ((oa.contains("enum") || oa.contains("const")) && (ob.contains("enum") || ob.contains("const"))) {
    json::array both;
    const json::array vb = enum_values(ob);
    for (const json::value& v : enum_values(oa)) {
      if (std::find(vb.begin(), vb.end(), v) != vb.end()) both.push_back(v);
    }
    out.erase("const");
    out["enum"] = std::move(both);
  }
  // anyOf / oneOf on both sides: the pairs.
  const json::array ba = branches(oa), bb = branches(ob);
  if (!ba.empty() && !bb.empty()) {
    if (ba.size() * bb.size() > 64) return refuse("more than 64 pairs of anyOf/oneOf branches");
    json::array pairs;
    for (const json::value& x : ba) {
      for (const json::value& y : bb) pairs.push_back(all_of(x, y));
    }
    out.erase("oneOf");
    out["anyOf"] = std::move(pairs);
  }
  // properties: each name under both schemas' say.
  const json::value* pa = oa.if_contains("properties");
  const json::value* pb = ob.if_contains("properties");
  if (pa || pb || oa.contains("additionalProperties") || ob.contains("additionalProperties")) {
    if ((pa && !pa->is_object()) || (pb && !pb->is_object())) return refuse("'properties' must be an object");
    const json::object empty;
    const json::object& props_a = pa ? pa->get_object() : empty;
    const json::object& props_b = pb ? pb->get_object() : empty;
    const json::value add_a = additional(oa), add_b = additional(ob);
    json::object props;
    for (const auto& [name, s] : props_a) {
      const json::value* other = props_b.if_contains(name);
      props[name] = other ? all_of(s, *other) : (add_b == json::value(true) ? s : all_of(s, add_b));
    }
    for (const auto& [name, s] : props_b) {
      if (!props_a.contains(name)) props[name] = add_a == json::value(true) ? s : all_of(s, add_a);
    }
    if (pa || pb) out["properties"] = std::move(props);
    if (add_a != json::value(true) || add_b != json::value(true)) {
      out["additionalProperties"] = add_a == add_b ? add_a : all_of(add_a, add_b);
    }
  }
  return json::value(std::move(out));
}

}  // namespace conveyor::grammar
