#include "model/formats/gguf_metadata.hpp"

namespace conveyor::gguf_detail {

Error metadata_error(const GgufFile& file, std::string_view key, const std::string& problem,
                     Errc code) {
  return make_error(code, file.name + ": metadata '" + std::string(key) + "' " + problem);
}

namespace {

std::string found(const GgufValue& v) { return "found " + value_type_name(uint32_t(v.type)); }

}  // namespace

Expected<int64_t> get_int(const GgufFile& file, std::string_view key,
                          std::optional<int64_t> fallback, int64_t min, int64_t max) {
  const GgufValue* v = file.find(key);
  if (v == nullptr) {
    if (fallback) return *fallback;
    return metadata_error(file, key, "is missing");
  }
  const std::optional<int64_t> x = v->as_int();
  if (!x) {
    if (v->type == GgufValueType::uint64)
      return metadata_error(file, key, "is out of range: " + std::to_string(v->bits));
    return metadata_error(file, key, "must be an integer, " + found(*v));
  }
  if (*x < min || *x > max)
    return metadata_error(file, key,
                          "is out of range: " + std::to_string(*x) + " (expected " +
                              std::to_string(min) + " to " + std::to_string(max) + ")");
  return *x;
}

Expected<double> get_float(const GgufFile& file, std::string_view key,
                           std::optional<double> fallback) {
  const GgufValue* v = file.find(key);
  if (v == nullptr) {
    if (fallback) return *fallback;
    return metadata_error(file, key, "is missing");
  }
  if (std::optional<double> f = v->as_float()) return *f;
  if (std::optional<int64_t> i = v->as_int()) return double(*i);
  return metadata_error(file, key, "must be a number, " + found(*v));
}

Expected<bool> get_bool(const GgufFile& file, std::string_view key, std::optional<bool> fallback) {
  const GgufValue* v = file.find(key);
  if (v == nullptr) {
    if (fallback) return *fallback;
    return metadata_error(file, key, "is missing");
  }
  if (std::optional<bool> b = v->as_bool()) return *b;
  return metadata_error(file, key, "must be a bool, " + found(*v));
}

Expected<std::string> get_string(const GgufFile& file, std::string_view key,
                                 std::optional<std::string> fallback) {
  const GgufValue* v = file.find(key);
  if (v == nullptr) {
    if (fallback) return *fallback;
    return metadata_error(file, key, "is missing");
  }
  if (const std::string* s = v->as_string()) return *s;
  return metadata_error(file, key, "must be a string, " + found(*v));
}

Expected<const GgufArray*> get_array(const GgufFile& file, std::string_view key,
                                     GgufValueType elem, bool required) {
  const GgufValue* v = file.find(key);
  if (v == nullptr) {
    if (!required) return static_cast<const GgufArray*>(nullptr);
    return metadata_error(file, key, "is missing");
  }
  const GgufArray* a = v->as_array();
  if (a == nullptr) return metadata_error(file, key, "must be an array, " + found(*v));
  if (a->elem_type != elem)
    return metadata_error(file, key,
                          "must be an array of " + value_type_name(uint32_t(elem)) +
                              ", found an array of " + value_type_name(uint32_t(a->elem_type)));
  return a;
}

}  // namespace conveyor::gguf_detail
