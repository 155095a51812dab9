// libFuzzer target: tokenizers built from untrusted files.
//
// The first byte picks the source:
//   even: a llama2.c tokenizer file (the next two bytes give the vocabulary
//         size), parsed by parse_llama2c_tokenizer and by the formats
//         vocabulary reader;
//   odd:  a GGUF file whose tokenizer.ggml.* metadata builds a tokenizer.
// Whatever tokenizer results then encodes text (a fixed string and part of
// the input) as plain text and with special tokens parsed (verbatim ranges
// taken from the input), and decodes ids, including out-of-range ones. A text
// that is verbatim as a whole must encode as plain text does.
#include <cstddef>
#include <cstdint>
#include <span>
#include <string_view>

#include "model/formats/gguf_llama.hpp"
#include "model/formats/gguf_reader.hpp"
#include "model/formats/llama2c.hpp"
#include "model/tokenizer/tokenizer.hpp"

namespace {

void exercise(const conveyor::Tokenizer& t, std::span<const uint8_t> input) {
  const std::string_view text(reinterpret_cast<const char*>(input.data()),
                              input.size() < 256 ? input.size() : 256);
  for (std::string_view s :
       {std::string_view("Hello world \xE2\x96\x81 <s>\n\xF0\x9F\x98\x80<|im_start|></s>"), text}) {
    const std::vector<int32_t> ids = t.encode(s, true);
    for (int32_t id : ids)
      if (id < 0 || id >= t.vocab_size()) __builtin_trap();  // ids must be in range
    (void)t.decode(ids);

    std::vector<conveyor::TextRange> verbatim;
    for (size_t i = 0; i + 1 < input.size() && verbatim.size() < 4; i += 2)
      verbatim.push_back({input[i], size_t(input[i]) + input[i + 1] % 64});
    const std::vector<int32_t> special =
        t.encode(s, {.add_bos = true, .parse_special = true, .verbatim = verbatim});
    for (int32_t id : special)
      if (id < 0 || id >= t.vocab_size()) __builtin_trap();
    (void)t.decode(special);
    const conveyor::TextRange all{0, s.size()};
    if (t.encode(s, {.add_bos = true, .parse_special = true, .verbatim = {&all, 1}}) != ids)
      __builtin_trap();  // nothing is parsed inside a verbatim range
  }
  std::vector<int32_t> odd = {-1, 0, 1, t.vocab_size() - 1, t.vocab_size(), INT32_MAX};
  (void)t.decode(odd);
  for (int32_t id : odd) {
    (void)t.token_bytes(id);
    (void)t.piece(id);
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace conveyor;
  if (size < 3) return 0;
  const std::span<const uint8_t> rest(data + 3, size - 3);
  if ((data[0] & 1) == 0) {
    const int32_t vocab = int32_t(data[1] | (data[2] << 8));
    auto vocabulary = parse_llama2c_vocabulary(rest, vocab, "fuzz-tokenizer.bin");
    (void)vocabulary;
    auto tokenizer = parse_llama2c_tokenizer(rest, vocab, "fuzz-tokenizer.bin");
    if (tokenizer) exercise(**tokenizer, rest);
    return 0;
  }
  const std::span<const uint8_t> gguf(data + 1, size - 1);
  auto file = parse_gguf(gguf, "fuzz.gguf");
  if (!file) return 0;
  auto tokenizer = tokenizer_from_gguf(*file);
  if (tokenizer && tokenizer->tokenizer) exercise(*tokenizer->tokenizer, gguf);
  return 0;
}
