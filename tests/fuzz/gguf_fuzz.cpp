// libFuzzer target: GGUF parsing and conversion of architecture `llama`
// (config, shapes, tensor decoding, tokenizer construction).
#include <cstddef>
#include <cstdint>
#include <span>

#include "model/formats/gguf_llama.hpp"
#include "model/formats/gguf_reader.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace conveyor;
  auto file = parse_gguf(std::span<const uint8_t>(data, size), "fuzz.gguf");
  if (!file) return 0;
  // Decode every convertible tensor, whatever the model conversion thinks.
  for (const GgufTensorInfo& t : file->tensors) {
    auto values = tensor_to_f32(*file, t);
    (void)values;
  }
  auto model = llama_from_gguf(*file);
  if (model && model->tokenizer) {
    const auto ids = model->tokenizer->encode("Hello, world", true);
    (void)model->tokenizer->decode(ids);
  }
  return 0;
}
