#include "http/api_key_file.hpp"

#include <fstream>
#include <set>
#include <sstream>
#include <toml++/toml.h>

namespace conveyor::http {
namespace {

Error invalid(const std::string& message) { return make_error(Errc::invalid_argument, message); }

bool usable_as_bearer_token(const std::string& key) {
  if (key.empty()) return false;
  for (char c : key)
    if (c <= ' ' || c > '~') return false;  // printable ASCII, no spaces: it goes in a header as it is
  return true;
}

// A limit of 1 or more, or 0 when absent.
Status read_limit(const toml::table& entry, const char* field, const std::string& where, int64_t& out) {
  const toml::node* n = entry.get(field);
  if (!n) return Status::ok();
  const auto v = n->value<int64_t>();
  if (!n->is_integer() || !v || *v < 1)
    return invalid(where + "." + field + " must be an integer of 1 or more (leave it out for no limit)");
  out = *v;
  return Status::ok();
}

Expected<ApiKeySpec> read_entry(const toml::node& node, size_t index, const std::string& where) {
  const toml::table* entry = node.as_table();
  if (!entry) return invalid(where + " must be a table");
  for (const auto& [field, value] : *entry) {
    const std::string_view f = field.str();
    if (f != "key" && f != "name" && f != "max_concurrent" && f != "tokens_per_minute")
      return invalid(where + ": unknown field '" + std::string(f) +
                     "' (known: key, name, max_concurrent, tokens_per_minute)");
  }
  ApiKeySpec spec;
  const toml::node* key = entry->get("key");
  if (!key) return invalid(where + ": 'key' is missing");
  if (!key->is_string()) return invalid(where + ".key must be a string");
  spec.key = *key->value<std::string>();
  if (!usable_as_bearer_token(spec.key))
    return invalid(where + ".key must be printable ASCII without spaces, and not empty");
  spec.name = "key-" + std::to_string(index + 1);
  if (const toml::node* name = entry->get("name")) {
    if (!name->is_string() || name->value<std::string>()->empty()) return invalid(where + ".name must be a non-empty string");
    spec.name = *name->value<std::string>();
  }
  if (Status s = read_limit(*entry, "max_concurrent", where, spec.max_concurrent); !s) return s.error();
  if (Status s = read_limit(*entry, "tokens_per_minute", where, spec.tokens_per_minute); !s) return s.error();
  return spec;
}

}  // namespace

Expected<std::vector<ApiKeySpec>> parse_api_key_file(std::string_view toml_text, const std::string& source) {
  toml::table root;
  try {
    root = toml::parse(toml_text, source);
  } catch (const toml::parse_error& e) {
    std::ostringstream msg;
    msg << source << ": " << e.description() << " (line " << e.source().begin.line << ")";
    return invalid(msg.str());
  }
  for (const auto& [name, value] : root) {
    if (name.str() != "key") return invalid(source + ": unknown key '" + std::string(name.str()) + "' (only [[key]] tables)");
  }
  const toml::array* entries = root["key"].as_array();
  if (!entries || entries->empty())
    return invalid(source + ": no [[key]] entries (a key file without keys would refuse every request)");
  std::vector<ApiKeySpec> keys;
  std::set<std::string> seen_keys, seen_names;
  for (size_t i = 0; i < entries->size(); ++i) {
    const std::string where = source + ": key[" + std::to_string(i) + "]";
    auto spec = read_entry((*entries)[i], i, where);
    if (!spec) return spec.error();
    if (!seen_names.insert(spec->name).second) return invalid(where + ": the name '" + spec->name + "' is taken");
    if (!seen_keys.insert(spec->key).second)
      return invalid(where + " ('" + spec->name + "'): the same key is given twice");
    keys.push_back(std::move(spec).value());
  }
  return keys;
}

Expected<std::vector<ApiKeySpec>> load_api_key_file(const std::string& path) {
  std::ifstream in(path);
  if (!in) return make_error(Errc::io_error, "cannot open '" + path + "'");
  std::stringstream text;
  text << in.rdbuf();
  if (in.bad()) return make_error(Errc::io_error, "cannot read '" + path + "'");
  return parse_api_key_file(text.str(), path);
}

Expected<std::vector<ApiKeySpec>> api_keys_of(const ServerOptions& o) {
  std::vector<ApiKeySpec> keys;
  if (!o.api_key.empty()) keys.push_back(ApiKeySpec{o.api_key, "--api-key", 0, 0});
  if (o.api_key_file.empty()) return keys;
  auto file = load_api_key_file(o.api_key_file);
  if (!file) return file.error();
  for (ApiKeySpec& k : *file) {
    if (k.key == o.api_key)
      return invalid(o.api_key_file + ": the key of '" + k.name + "' is the --api-key key too");
    keys.push_back(std::move(k));
  }
  return keys;
}

}  // namespace conveyor::http
