#include "model/formats/gguf_reader.hpp"

#include <cstring>

#include "model/formats/mapped_file.hpp"
#include "model/formats/tensor_convert.hpp"

namespace conveyor {

namespace {

constexpr uint32_t kGgufMagic = 0x46554747;  // "GGUF" read as a little-endian uint32
constexpr uint32_t kMaxDims = 4;             // GGML_MAX_DIMS
// The fewest bytes one metadata pair or tensor description can occupy, used to
// refuse counts that the rest of the file cannot possibly hold.
constexpr uint64_t kMinKvBytes = 8 + 4 + 1;         // key length, type, 1-byte value
constexpr uint64_t kMinTensorInfoBytes = 8 + 4 + 4 + 8;  // name length, n_dims, type, offset
constexpr uint64_t kMinArrayHeaderBytes = 4 + 8;    // element type, count

bool mul_overflows(uint64_t a, uint64_t b, uint64_t* out) {
  return __builtin_mul_overflow(a, b, out);
}

class Parser {
 public:
  Parser(std::span<const uint8_t> bytes, const std::string& name) : bytes_(bytes), name_(name) {}

  Expected<GgufFile> run();

 private:
  Error fail(std::string what, Errc code = Errc::bad_format) const {
    return make_error(code, name_ + ": " + what);
  }
  Error truncated(const std::string& what) const {
    return fail("truncated: the file ends (at " + std::to_string(bytes_.size()) +
                " bytes) inside " + what + " at offset " + std::to_string(pos_));
  }
  uint64_t remaining() const { return bytes_.size() - pos_; }

  bool take(void* dst, size_t n) {
    if (n > remaining()) return false;
    if (n > 0) std::memcpy(dst, bytes_.data() + pos_, n);
    pos_ += n;
    return true;
  }
  template <class T>
  bool take(T& v) {
    return take(&v, sizeof v);
  }
  bool take_string(std::string& s) {
    uint64_t len = 0;
    const size_t start = pos_;
    if (!take(len)) return false;
    if (len > remaining()) {
      pos_ = start;
      return false;
    }
    s.assign(reinterpret_cast<const char*>(bytes_.data() + pos_), size_t(len));
    pos_ += size_t(len);
    return true;
  }

  Status read_header(GgufFile& file, uint64_t& n_tensors, uint64_t& n_kv);
  Status read_metadata(GgufFile& file, uint64_t n_kv);
  Status read_value(GgufValueType type, GgufValue& value, const std::string& key, int depth);
  Status read_array(GgufArray& array, const std::string& key, int depth);
  Status read_alignment(GgufFile& file);
  Status read_tensor_infos(GgufFile& file, uint64_t n_tensors);
  Status read_tensor_info(GgufTensorInfo& t, uint64_t index, uint64_t alignment);
  Status place_tensor_data(GgufFile& file);

  std::span<const uint8_t> bytes_;
  const std::string& name_;
  size_t pos_ = 0;
};

Expected<GgufFile> Parser::run() {
  GgufFile file;
  file.name = name_;
  uint64_t n_tensors = 0, n_kv = 0;
  if (Status s = read_header(file, n_tensors, n_kv); !s) return s.error();
  if (Status s = read_metadata(file, n_kv); !s) return s.error();
  if (Status s = read_alignment(file); !s) return s.error();
  if (Status s = read_tensor_infos(file, n_tensors); !s) return s.error();
  if (Status s = place_tensor_data(file); !s) return s.error();
  return file;
}

Status Parser::read_header(GgufFile& file, uint64_t& n_tensors, uint64_t& n_kv) {
  uint32_t magic = 0;
  if (!take(magic)) return truncated("the magic number");
  if (magic != kGgufMagic) {
    char shown[5] = {};
    std::memcpy(shown, &magic, 4);
    for (char& c : shown)
      if (c != 0 && (c < 32 || c > 126)) c = '?';
    return fail("not a GGUF file (magic is \"" + std::string(shown) + "\", expected \"GGUF\")");
  }
  if (!take(file.version)) return truncated("the version");
  if (file.version == 1)
    return fail("GGUF version 1 is not supported (re-convert the model with a current llama.cpp)",
                Errc::unsupported);
  if (file.version != 2 && file.version != 3) {
    std::string hint;
    if (file.version == 0x02000000u || file.version == 0x03000000u) hint = " (a big-endian file?)";
    return fail("GGUF version " + std::to_string(file.version) + " is not supported" + hint,
                Errc::unsupported);
  }
  if (!take(n_tensors)) return truncated("the tensor count");
  if (!take(n_kv)) return truncated("the metadata count");
  // Each tensor description and each pair takes some bytes: a count larger
  // than the rest of the file could hold is corrupt, and must not drive a loop
  // or an allocation.
  if (n_tensors > remaining() / kMinTensorInfoBytes)
    return fail("tensor count " + std::to_string(n_tensors) + " is impossible for a file of " +
                std::to_string(bytes_.size()) + " bytes");
  if (n_kv > remaining() / kMinKvBytes)
    return fail("metadata count " + std::to_string(n_kv) + " is impossible for a file of " +
                std::to_string(bytes_.size()) + " bytes");
  return Status::ok();
}

Status Parser::read_metadata(GgufFile& file, uint64_t n_kv) {
  for (uint64_t i = 0; i < n_kv; ++i) {
    std::string key;
    if (!take_string(key)) return truncated("the key of metadata pair " + std::to_string(i));
    uint32_t type = 0;
    if (!take(type)) return truncated("the type of metadata key '" + key + "'");
    if (!is_known_value_type(type))
      return fail("metadata key '" + key + "' has unknown value type " + std::to_string(type));
    GgufValue value;
    if (Status s = read_value(GgufValueType(type), value, key, 0); !s) return s;
    if (file.metadata_index.count(key) != 0) return fail("duplicate metadata key '" + key + "'");
    file.metadata_index.emplace(key, file.metadata.size());
    file.metadata.emplace_back(std::move(key), std::move(value));
  }
  return Status::ok();
}

Status Parser::read_value(GgufValueType type, GgufValue& value, const std::string& key,
                          int depth) {
  value.type = type;
  if (type == GgufValueType::string) {
    if (!take_string(value.string)) return truncated("the string value of '" + key + "'");
    return Status::ok();
  }
  if (type == GgufValueType::array) {
    GgufArray array;
    if (Status s = read_array(array, key, depth + 1); !s) return s;
    value.array = std::make_shared<const GgufArray>(std::move(array));
    return Status::ok();
  }
  if (!take(&value.bits, scalar_size(type))) return truncated("the value of '" + key + "'");
  return Status::ok();
}

Status Parser::read_array(GgufArray& array, const std::string& key, int depth) {
  if (depth > kMaxGgufArrayDepth)
    return fail("array '" + key + "' is nested more than " + std::to_string(kMaxGgufArrayDepth) +
                " deep");
  uint32_t elem_type = 0;
  uint64_t count = 0;
  if (!take(elem_type) || !take(count)) return truncated("the array header of '" + key + "'");
  if (!is_known_value_type(elem_type))
    return fail("array '" + key + "' has unknown element type " + std::to_string(elem_type));
  array.elem_type = GgufValueType(elem_type);
  const uint64_t elem_bytes = array.elem_type == GgufValueType::string  ? 8
                              : array.elem_type == GgufValueType::array ? kMinArrayHeaderBytes
                                                                        : scalar_size(array.elem_type);
  if (count > remaining() / elem_bytes)
    return fail("array '" + key + "' claims " + std::to_string(count) + " elements of type " +
                value_type_name(elem_type) + ", more than the remaining " +
                std::to_string(remaining()) + " bytes can hold (truncated or corrupt)");
  if (array.elem_type == GgufValueType::string) {
    array.strings.resize(size_t(count));
    for (uint64_t i = 0; i < count; ++i)
      if (!take_string(array.strings[i]))
        return truncated("element " + std::to_string(i) + " of array '" + key + "'");
  } else if (array.elem_type == GgufValueType::array) {
    array.arrays.resize(size_t(count));
    for (uint64_t i = 0; i < count; ++i)
      if (Status s = read_array(array.arrays[i], key, depth + 1); !s) return s;
  } else {
    array.raw.resize(size_t(count * elem_bytes));
    if (!take(array.raw.data(), array.raw.size()))
      return truncated("the elements of array '" + key + "'");
  }
  return Status::ok();
}

Status Parser::read_alignment(GgufFile& file) {
  const GgufValue* v = file.find("general.alignment");
  if (v == nullptr) return Status::ok();
  const std::optional<int64_t> a = v->as_int();
  if (!a || *a <= 0 || *a > (int64_t{1} << 30) || (*a & (*a - 1)) != 0)
    return fail("general.alignment must be a power of two integer, got " +
                (a ? std::to_string(*a) : "a " + value_type_name(uint32_t(v->type))));
  file.alignment = uint64_t(*a);
  return Status::ok();
}

Status Parser::read_tensor_infos(GgufFile& file, uint64_t n_tensors) {
  for (uint64_t i = 0; i < n_tensors; ++i) {
    GgufTensorInfo t;
    if (Status s = read_tensor_info(t, i, file.alignment); !s) return s;
    if (file.tensor_index.count(t.name) != 0) return fail("duplicate tensor '" + t.name + "'");
    file.tensor_index.emplace(t.name, file.tensors.size());
    file.tensors.push_back(std::move(t));
  }
  return Status::ok();
}

Status Parser::read_tensor_info(GgufTensorInfo& t, uint64_t index, uint64_t alignment) {
  if (!take_string(t.name)) return truncated("the name of tensor " + std::to_string(index));
  const std::string what = "tensor '" + t.name + "'";
  uint32_t n_dims = 0;
  if (!take(n_dims)) return truncated("the dimension count of " + what);
  if (n_dims > kMaxDims)
    return fail(what + " has " + std::to_string(n_dims) + " dimensions (at most " +
                std::to_string(kMaxDims) + ")");
  t.dims.resize(n_dims);
  t.n_elements = 1;
  for (uint32_t d = 0; d < n_dims; ++d) {
    if (!take(t.dims[d])) return truncated("the dimensions of " + what);
    if (t.dims[d] > uint64_t(INT64_MAX) || mul_overflows(t.n_elements, t.dims[d], &t.n_elements) ||
        t.n_elements > uint64_t(INT64_MAX))
      return fail(what + " has absurd dimensions (element count overflows)");
  }
  if (!take(t.type)) return truncated("the type of " + what);
  const GgmlTypeTraits traits = ggml_type_traits(t.type);
  if (traits.name == nullptr) return fail(what + " has unknown type " + std::to_string(t.type));
  const uint64_t row = t.dims.empty() ? 1 : t.dims[0];
  if (row % traits.block_size != 0)
    return fail(what + " has rows of " + std::to_string(row) + " elements, not a multiple of the " +
                traits.name + " block size " + std::to_string(traits.block_size));
  if (!take(t.offset)) return truncated("the data offset of " + what);
  if (t.offset % alignment != 0)
    return fail(what + " has data offset " + std::to_string(t.offset) +
                ", not a multiple of the alignment " + std::to_string(alignment));
  return Status::ok();
}

Status Parser::place_tensor_data(GgufFile& file) {
  const uint64_t pos = pos_;
  if (pos > UINT64_MAX - (file.alignment - 1)) return fail("header too large");
  file.data_offset = (pos + file.alignment - 1) / file.alignment * file.alignment;
  const uint64_t size = bytes_.size();
  const uint64_t data_size = size > file.data_offset ? size - file.data_offset : 0;
  // Like llama.cpp, require the tensors to be laid out one after the other in
  // file order, each padded to the alignment: a description whose type or
  // shape was corrupted then shows as an offset mismatch.
  uint64_t expected_offset = 0;
  for (GgufTensorInfo& t : file.tensors) {
    const GgmlTypeTraits traits = ggml_type_traits(t.type);
    uint64_t n_bytes = 0;
    if (mul_overflows(t.n_elements / traits.block_size, traits.type_size, &n_bytes) ||
        n_bytes > UINT64_MAX - file.alignment)
      return fail("tensor '" + t.name + "' is absurdly large (" + std::to_string(t.n_elements) +
                  " elements)");
    if (t.offset != expected_offset)
      return fail("tensor '" + t.name + "' has data offset " + std::to_string(t.offset) +
                  ", expected " + std::to_string(expected_offset) +
                  " (tensors must follow each other in order; a corrupt type or shape?)");
    const uint64_t padded = (n_bytes + file.alignment - 1) / file.alignment * file.alignment;
    if (padded > UINT64_MAX - expected_offset) return fail("tensor data section is absurdly large");
    expected_offset += padded;
    if (t.offset > data_size || n_bytes > data_size - t.offset)
      return fail("tensor '" + t.name + "' data (" + std::to_string(n_bytes) +
                  " bytes at data offset " + std::to_string(t.offset) +
                  ") lies outside the file (data section of " + std::to_string(data_size) +
                  " bytes starting at " + std::to_string(file.data_offset) +
                  "); is the file truncated?");
    t.data = bytes_.subspan(size_t(file.data_offset + t.offset), size_t(n_bytes));
  }
  return Status::ok();
}

}  // namespace

Expected<GgufFile> parse_gguf(std::span<const uint8_t> bytes, const std::string& name) {
  return Parser(bytes, name).run();
}

Expected<GgufFile> parse_gguf(std::shared_ptr<const MappedFile> mapped) {
  Expected<GgufFile> file = parse_gguf(mapped->bytes(), mapped->path());
  if (file) {
    file->mapped = mapped->mapped();
    file->storage = std::move(mapped);
  }
  return file;
}

Expected<GgufFile> read_gguf(const std::string& path) {
  Expected<std::shared_ptr<const MappedFile>> mapped = MappedFile::open(path);
  if (!mapped) return mapped.error();
  return parse_gguf(std::move(mapped).value());
}

Expected<std::vector<float>> tensor_to_f32(const GgufFile& file, const GgufTensorInfo& t) {
  if (!is_convertible_type(GgmlType(t.type)))
    return make_error(Errc::unsupported, file.name + ": tensor '" + t.name + "' has type " +
                                             ggml_type_description(t.type) +
                                             ", which conveyor cannot load (supported: F32, "
                                             "F16, BF16, Q8_0, Q4_0, Q4_K, Q5_K, Q6_K)");
  std::vector<float> values(size_t(t.n_elements));
  if (!decode_to_f32(GgmlType(t.type), t.data, values))
    return make_error(Errc::bad_format, file.name + ": tensor '" + t.name +
                                            "' has a data size that does not match its shape");
  return values;
}

}  // namespace conveyor
