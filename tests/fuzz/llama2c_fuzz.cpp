// libFuzzer target: llama2.c checkpoint parsing.
#include <cstddef>
#include <cstdint>
#include <span>

#include "model/formats/llama2c.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace conveyor;
  auto model = parse_llama2c(std::span<const uint8_t>(data, size), "fuzz.bin");
  if (model && !weights_match(model->config, model->weights)) __builtin_trap();
  return 0;
}
