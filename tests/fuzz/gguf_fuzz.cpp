// libFuzzer target: GGUF parsing and conversion of architecture `llama`
// (config, shapes, tensor decoding, tokenizer construction, and one forward
// step of small models on their weights as stored).
#include <cstddef>
#include <cstdint>
#include <span>

#include "model/formats/gguf_llama.hpp"
#include "model/formats/gguf_reader.hpp"
#include "backends/cpu/transformer.hpp"

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
  // Small models run one step on their weights as stored: the repacking and
  // the quantized products must take any bits a file holds.
  if (model && model->config.parameter_count() < (1 << 20) && model->config.vocab_size > 1) {
    const ModelConfig c = model->config;
    Transformer t(c, std::move(model->weights), 1);
    KvCache kv(KvCacheShape::for_model(c, 16, 1));
    const int32_t tokens[2] = {0, 1};
    const int32_t table[1] = {0};
    ForwardBatch batch;
    batch.add_sequence(std::span(tokens, c.context_length > 1 ? 2 : 1), 0, table, true);
    std::vector<float> logits;
    t.forward(batch, kv, logits);
  }
  return 0;
}
