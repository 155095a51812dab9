// Reading GGUF files (versions 2 and 3; version 1 is refused as unsupported).
//
// A GGUF file is a header (magic "GGUF", version, tensor count, metadata
// count), metadata key/value pairs, tensor descriptions (name, dims, ggml type,
// offset), padding to `general.alignment` (default 32), then the tensor data.
// parse_gguf checks every count, length and offset against the size of the
// input with overflow-safe arithmetic before using it, so corrupt or hostile
// input yields an Error naming the file and the problem, never a crash, a read
// out of bounds or an allocation larger than the input justifies.
//
// Tensors are not converted at parse time: tensor_to_f32 decodes one on demand
// (F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q5_K, Q6_K; other types give
// Errc::unsupported).
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "model/formats/gguf_types.hpp"
#include "base/status.hpp"

namespace conveyor {

struct GgufArray;

// One metadata value, keeping the type it is stored with so that it can be
// written back unchanged.
struct GgufValue {
  GgufValueType type = GgufValueType::uint32;
  uint64_t bits = 0;                        // numbers and bool: stored bytes, zero-extended
  std::string string;                       // when type == string
  std::shared_ptr<const GgufArray> array;   // when type == array (never null then)

  // Any integer type (not bool); nullopt for other types and for a uint64 above INT64_MAX.
  std::optional<int64_t> as_int() const;
  // float32 or float64.
  std::optional<double> as_float() const;
  std::optional<bool> as_bool() const;
  const std::string* as_string() const;   // null unless type == string
  const GgufArray* as_array() const;      // null unless type == array

  static GgufValue of_uint32(uint32_t v);
  static GgufValue of_int32(int32_t v);
  static GgufValue of_uint64(uint64_t v);
  static GgufValue of_float32(float v);
  static GgufValue of_bool(bool v);
  static GgufValue of_string(std::string v);
  static GgufValue of_array(GgufArray v);
  // A number or bool of any scalar type, given its stored bytes zero-extended.
  static GgufValue of_scalar(GgufValueType type, uint64_t bits);
};

// An array value: a count of elements of one type (arrays may nest).
struct GgufArray {
  GgufValueType elem_type = GgufValueType::uint8;
  std::vector<uint8_t> raw;          // numbers and bools, packed as stored
  std::vector<std::string> strings;  // when elem_type == string
  std::vector<GgufArray> arrays;     // when elem_type == array

  size_t size() const;
  std::optional<int64_t> int_at(size_t i) const;   // integer element types only
  std::optional<double> float_at(size_t i) const;  // float32 / float64 only
  uint64_t bits_at(size_t i) const;                // numbers and bools; i < size()

  static GgufArray of_strings(std::vector<std::string> v);
  static GgufArray of_float32(std::span<const float> v);
  static GgufArray of_int32(std::span<const int32_t> v);
  static GgufArray of_scalars(GgufValueType type, std::span<const uint64_t> bits);
};

bool operator==(const GgufArray& a, const GgufArray& b);
bool operator==(const GgufValue& a, const GgufValue& b);

struct GgufTensorInfo {
  std::string name;
  std::vector<uint64_t> dims;     // ne[0] first: the length of a row
  uint32_t type = 0;              // a GgmlType number known to ggml_type_traits
  uint64_t offset = 0;            // from the start of the data section
  uint64_t n_elements = 0;
  std::span<const uint8_t> data;  // the tensor's bytes, inside the parsed input
};

struct GgufFile {
  std::string name;               // what errors call the file
  uint32_t version = 0;
  uint64_t alignment = 32;
  uint64_t data_offset = 0;       // where the data section starts in the file
  std::vector<std::pair<std::string, GgufValue>> metadata;  // in file order
  std::vector<GgufTensorInfo> tensors;                      // in file order
  std::shared_ptr<const void> storage;  // keeps tensor data alive (read_gguf); null for parse_gguf
  bool mapped = false;                  // the data is a read-only file mapping (MappedFile::mapped)

  const GgufValue* find(std::string_view key) const;
  const GgufTensorInfo* find_tensor(std::string_view tensor_name) const;

  std::map<std::string, size_t, std::less<>> metadata_index;  // key -> position in metadata
  std::map<std::string, size_t, std::less<>> tensor_index;    // name -> position in tensors
};

// Arrays nested deeper than this are refused (bad_format).
inline constexpr int kMaxGgufArrayDepth = 8;

// Parses GGUF from memory. Tensor data views point into `bytes`, which must
// outlive the result. `name` is used in error messages.
Expected<GgufFile> parse_gguf(std::span<const uint8_t> bytes, const std::string& name);

// Parses an opened file; the result keeps it alive (storage) and says
// whether its bytes are a mapping (mapped).
class MappedFile;
Expected<GgufFile> parse_gguf(std::shared_ptr<const MappedFile> file);

// Maps the file at `path` and parses it; the result keeps the mapping alive.
Expected<GgufFile> read_gguf(const std::string& path);

// The tensor's values as float32. unsupported (naming the type) for types
// that are not convertible (is_convertible_type).
Expected<std::vector<float>> tensor_to_f32(const GgufFile& file, const GgufTensorInfo& tensor);

}  // namespace conveyor
