// Writing GGUF v3 files that conveyor's reader and llama.cpp both load.
//
// write_gguf exports a LoadedModel as architecture `llama`: the llama.* shape
// keys, the tensors under llama.cpp's names (Q and K in the adjacent-pairs RoPE
// layout that llama.cpp expects; a half_split model is permuted on the way
// out), and, when the model has a vocabulary, the tokenizer.ggml.* keys
// ("llama" SentencePiece, or "gpt2" when it has BPE merges). Matrices are
// stored as options.tensor_type; norms always as F32 (as llama.cpp does), and
// a Q8_0 matrix whose rows are not a multiple of 32 falls back to F16.
//
// GgufBuilder is the general writer underneath: any metadata and tensors,
// including raw tensors of any type number (tests use it to craft odd files).
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "model/formats/gguf_reader.hpp"
#include "model/formats/gguf_types.hpp"
#include "model/formats/loader.hpp"
#include "model/status.hpp"

namespace conveyor {

namespace gguf_detail {
class ByteSink;
}

struct GgufWriteOptions {
  GgmlType tensor_type = GgmlType::F32;  // F32, F16, BF16 or Q8_0, for the matrices
  uint32_t alignment = 32;               // of the data section and of each tensor; a power of two
};

// "f32", "f16", "bf16", "q8_0" (any case) to the type; invalid_argument otherwise.
Expected<GgmlType> parse_gguf_tensor_type(std::string_view name);

// Writes `model` to `path` (through a temporary file renamed into place).
// invalid_argument when the weights do not match the config or the options are
// invalid; io_error naming the path when writing fails.
Status write_gguf(const LoadedModel& model, const std::string& path,
                  const GgufWriteOptions& options = {});

// The same file, in memory.
Expected<std::vector<uint8_t>> serialize_gguf(const LoadedModel& model,
                                              const GgufWriteOptions& options = {});

class GgufBuilder {
 public:
  explicit GgufBuilder(uint32_t alignment = 32) : alignment_(alignment) {}

  uint32_t version = 3;  // written as is (tests write other versions)

  void add(std::string key, GgufValue value) {
    metadata_.emplace_back(std::move(key), std::move(value));
  }
  // A tensor of `type` (F32/F16/BF16/Q8_0) encoded from `values` at write time;
  // `values` must stay alive until then. dims: ne[0] (row length) first.
  void add_tensor(std::string name, std::vector<uint64_t> dims, GgmlType type,
                  std::span<const float> values);
  // A tensor given as its stored bytes, with any type number.
  void add_raw_tensor(std::string name, std::vector<uint64_t> dims, uint32_t type,
                      std::vector<uint8_t> bytes);

  // invalid_argument when a float tensor cannot be encoded as its type.
  Expected<std::vector<uint8_t>> to_bytes() const;
  Status write(const std::string& path) const;

 private:
  struct Tensor {
    std::string name;
    std::vector<uint64_t> dims;
    uint32_t type = 0;
    std::span<const float> values;  // float tensors
    std::vector<uint8_t> raw;       // raw tensors
    bool is_raw = false;
    uint64_t n_bytes = 0;           // stored size
  };
  Status emit(gguf_detail::ByteSink& sink) const;

  uint32_t alignment_;
  std::vector<std::pair<std::string, GgufValue>> metadata_;
  std::vector<Tensor> tensors_;
};

}  // namespace conveyor
