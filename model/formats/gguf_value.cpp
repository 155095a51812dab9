// GgufValue and GgufArray: typed access to metadata values.
#include <cstring>

#include "model/formats/gguf_reader.hpp"

namespace conveyor {

namespace {

bool is_integer_type(GgufValueType t) {
  switch (t) {
    case GgufValueType::uint8:
    case GgufValueType::int8:
    case GgufValueType::uint16:
    case GgufValueType::int16:
    case GgufValueType::uint32:
    case GgufValueType::int32:
    case GgufValueType::uint64:
    case GgufValueType::int64:
      return true;
    default:
      return false;
  }
}

// Interprets zero-extended stored bytes as a signed 64-bit integer.
std::optional<int64_t> bits_as_int(GgufValueType t, uint64_t bits) {
  switch (t) {
    case GgufValueType::uint8: return int64_t(uint8_t(bits));
    case GgufValueType::int8: return int64_t(int8_t(uint8_t(bits)));
    case GgufValueType::uint16: return int64_t(uint16_t(bits));
    case GgufValueType::int16: return int64_t(int16_t(uint16_t(bits)));
    case GgufValueType::uint32: return int64_t(uint32_t(bits));
    case GgufValueType::int32: return int64_t(int32_t(uint32_t(bits)));
    case GgufValueType::uint64:
      if (bits > uint64_t(INT64_MAX)) return std::nullopt;
      return int64_t(bits);
    case GgufValueType::int64: return int64_t(bits);
    default: return std::nullopt;
  }
}

std::optional<double> bits_as_float(GgufValueType t, uint64_t bits) {
  if (t == GgufValueType::float32) {
    float f;
    const uint32_t b = uint32_t(bits);
    std::memcpy(&f, &b, 4);
    return double(f);
  }
  if (t == GgufValueType::float64) {
    double d;
    std::memcpy(&d, &bits, 8);
    return d;
  }
  return std::nullopt;
}

}  // namespace

std::optional<int64_t> GgufValue::as_int() const {
  if (!is_integer_type(type)) return std::nullopt;
  return bits_as_int(type, bits);
}

std::optional<double> GgufValue::as_float() const { return bits_as_float(type, bits); }

std::optional<bool> GgufValue::as_bool() const {
  if (type != GgufValueType::boolean) return std::nullopt;
  return bits != 0;
}

const std::string* GgufValue::as_string() const {
  return type == GgufValueType::string ? &string : nullptr;
}

const GgufArray* GgufValue::as_array() const {
  return type == GgufValueType::array ? array.get() : nullptr;
}

GgufValue GgufValue::of_scalar(GgufValueType t, uint64_t b) {
  GgufValue v;
  v.type = t;
  v.bits = b;
  return v;
}

GgufValue GgufValue::of_uint32(uint32_t x) { return of_scalar(GgufValueType::uint32, x); }
GgufValue GgufValue::of_int32(int32_t x) { return of_scalar(GgufValueType::int32, uint32_t(x)); }
GgufValue GgufValue::of_uint64(uint64_t x) { return of_scalar(GgufValueType::uint64, x); }
GgufValue GgufValue::of_bool(bool x) { return of_scalar(GgufValueType::boolean, x ? 1 : 0); }

GgufValue GgufValue::of_float32(float x) {
  uint32_t b;
  std::memcpy(&b, &x, 4);
  return of_scalar(GgufValueType::float32, b);
}

GgufValue GgufValue::of_string(std::string x) {
  GgufValue v;
  v.type = GgufValueType::string;
  v.string = std::move(x);
  return v;
}

GgufValue GgufValue::of_array(GgufArray x) {
  GgufValue v;
  v.type = GgufValueType::array;
  v.array = std::make_shared<const GgufArray>(std::move(x));
  return v;
}

size_t GgufArray::size() const {
  if (elem_type == GgufValueType::string) return strings.size();
  if (elem_type == GgufValueType::array) return arrays.size();
  const uint32_t s = scalar_size(elem_type);
  return s ? raw.size() / s : 0;
}

uint64_t GgufArray::bits_at(size_t i) const {
  const uint32_t s = scalar_size(elem_type);
  uint64_t b = 0;
  if (s != 0 && (i + 1) * s <= raw.size()) std::memcpy(&b, raw.data() + i * s, s);
  return b;
}

std::optional<int64_t> GgufArray::int_at(size_t i) const {
  if (!is_integer_type(elem_type) || i >= size()) return std::nullopt;
  return bits_as_int(elem_type, bits_at(i));
}

std::optional<double> GgufArray::float_at(size_t i) const {
  if (i >= size()) return std::nullopt;
  return bits_as_float(elem_type, bits_at(i));
}

GgufArray GgufArray::of_strings(std::vector<std::string> v) {
  GgufArray a;
  a.elem_type = GgufValueType::string;
  a.strings = std::move(v);
  return a;
}

GgufArray GgufArray::of_float32(std::span<const float> v) {
  GgufArray a;
  a.elem_type = GgufValueType::float32;
  a.raw.resize(v.size() * 4);
  if (!v.empty()) std::memcpy(a.raw.data(), v.data(), a.raw.size());
  return a;
}

GgufArray GgufArray::of_int32(std::span<const int32_t> v) {
  GgufArray a;
  a.elem_type = GgufValueType::int32;
  a.raw.resize(v.size() * 4);
  if (!v.empty()) std::memcpy(a.raw.data(), v.data(), a.raw.size());
  return a;
}

GgufArray GgufArray::of_scalars(GgufValueType t, std::span<const uint64_t> bits) {
  GgufArray a;
  a.elem_type = t;
  const uint32_t s = scalar_size(t);
  a.raw.resize(bits.size() * s);
  for (size_t i = 0; i < bits.size(); ++i) std::memcpy(a.raw.data() + i * s, &bits[i], s);
  return a;
}

bool operator==(const GgufArray& a, const GgufArray& b) {
  return a.elem_type == b.elem_type && a.raw == b.raw && a.strings == b.strings &&
         a.arrays == b.arrays;
}

bool operator==(const GgufValue& a, const GgufValue& b) {
  if (a.type != b.type || a.bits != b.bits || a.string != b.string) return false;
  if (!a.array || !b.array) return a.array == b.array;
  return *a.array == *b.array;
}

const GgufValue* GgufFile::find(std::string_view key) const {
  const auto it = metadata_index.find(key);
  return it == metadata_index.end() ? nullptr : &metadata[it->second].second;
}

const GgufTensorInfo* GgufFile::find_tensor(std::string_view tensor_name) const {
  const auto it = tensor_index.find(tensor_name);
  return it == tensor_index.end() ? nullptr : &tensors[it->second];
}

}  // namespace conveyor
