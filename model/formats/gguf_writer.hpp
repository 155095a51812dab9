// Writing GGUF v3 files that conveyor's reader and llama.cpp both load.
//
// write_gguf exports a LoadedModel as architecture `llama`: the llama.* shape
// keys, the tensors under llama.cpp's names (Q and K in the adjacent-pairs RoPE
// layout that llama.cpp expects; a half_split model is permuted on the way
// out), and, when the model has a vocabulary, the tokenizer.ggml.* keys
// ("llama" SentencePiece, or "gpt2" when it has BPE merges). Norms are always
// F32 (as llama.cpp does); each matrix gets the type gguf_matrix_type chooses
// for options.file_type: one type for all, or llama.cpp's mix for q4_0,
// q4_k_m and q5_k_m.
//
// GgufBuilder is the general writer underneath: any metadata and tensors,
// including raw tensors of any type number (tests use it to craft odd files).
#pragma once

#include <atomic>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "model/formats/gguf_reader.hpp"
#include "model/formats/gguf_types.hpp"
#include "model/formats/loader.hpp"
#include "base/status.hpp"

namespace conveyor {

namespace gguf_detail {
class ByteSink;
}

// How a file stores its matrices, numbered as llama.cpp's llama_ftype (the
// file's general.file_type).
enum class GgufFileType : uint32_t {
  all_f32 = 0,
  f16 = 1,
  q4_0 = 2,     // Q4_0; output.weight Q6_K
  q8_0 = 7,
  q4_k_m = 15,  // Q4_K; Q6_K for output.weight and for attn_v and ffn_down in some layers
  q5_k_m = 17,  // Q5_K; Q6_K likewise
  q6_k = 18,
  bf16 = 32,
};

struct GgufWriteOptions {
  GgufFileType file_type = GgufFileType::all_f32;
  uint32_t alignment = 32;  // of the data section and of each tensor; a power of two
  // When it turns true (a signal handler may set it), writing stops: the
  // temporary file is removed, the target left as it was, and io_error
  // ("interrupted") returned.
  const std::atomic<bool>* stop = nullptr;
};

// "f32", "f16", "bf16", "q8_0", "q4_0", "q4_k_m", "q5_k_m", "q6_k" (any case);
// invalid_argument otherwise.
Expected<GgufFileType> parse_gguf_file_type(std::string_view name);
// The name parse_gguf_file_type takes ("q4_k_m"); "" for a number that is not
// a GgufFileType.
std::string_view gguf_file_type_name(GgufFileType type);

// The type that matrix `name` (llama.cpp's tensor name: "output.weight",
// "blk.3.attn_v.weight", ...), whose rows hold `row_length` values, is stored
// as in a llama model of shape `config` written as `file_type`: what
// llama.cpp's llama-quantize without an importance matrix chooses
// (llama_tensor_get_type). Where a row length does not fit the chosen type's
// blocks, llama.cpp falls back to Q5_0 (for Q4_K), Q5_1 (for Q5_K) or Q8_0
// (for Q6_K), then F16; conveyor encodes neither Q5_0 nor Q5_1, so Q4_K and
// Q5_K fall back to Q8_0 here (more bits, never less precise), and Q4_0 or
// Q8_0 to F16 (where llama.cpp refuses the tensor).
GgmlType gguf_matrix_type(GgufFileType file_type, const ModelConfig& config, std::string_view name,
                          uint64_t row_length);

// What GgufBuilder::write checks of `path` before writing, for callers
// that would rather fail before preparing the file: invalid_argument when
// it is a directory, device or pipe, io_error when it cannot be replaced.
Status check_gguf_output(const std::string& path);

// Writes `model` to `path` (through a temporary file renamed into place).
// invalid_argument when the weights do not match the config, are not float32
// (load with LoadOptions::dequantize) or the options are invalid; io_error
// naming the path when writing fails.
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
  // A tensor of `type` (a convertible type: F32, F16, BF16, Q8_0, Q4_0, Q4_K,
  // Q5_K, Q6_K) encoded from `values` at write time;
  // `values` must stay alive until then. dims: ne[0] (row length) first.
  void add_tensor(std::string name, std::vector<uint64_t> dims, GgmlType type,
                  std::span<const float> values);
  // A tensor given as its stored bytes, with any type number.
  void add_raw_tensor(std::string name, std::vector<uint64_t> dims, uint32_t type,
                      std::vector<uint8_t> bytes);

  // invalid_argument when a float tensor cannot be encoded as its type.
  Expected<std::vector<uint8_t>> to_bytes() const;
  // Writes the file beside `path` and renames it there when complete (a
  // symbolic link's target is written, the link kept; an existing file
  // keeps its permissions). invalid_argument when `path` is a directory,
  // device or pipe; io_error when it cannot be written or replaced, or
  // when `stop` turned true (GgufWriteOptions::stop).
  Status write(const std::string& path, const std::atomic<bool>* stop = nullptr) const;

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
