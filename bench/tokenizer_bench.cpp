// Encoding speed of the GGUF tokenizers in ../shared/models (or the files
// given as arguments) on about 1 MB of mixed text: English prose, code,
// numbers, Chinese, Russian, Hindi and emoji. Prints tokens/s and MB/s of the
// best of three runs, one thread.
//
//   tokenizer_bench [file.gguf ...]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <string>
#include <vector>

#include "model/formats/gguf_llama.hpp"
#include "model/formats/gguf_reader.hpp"

namespace {

std::string bench_text() {
  const char* parts[] = {
      "The quick brown fox jumps over the lazy dog. It's a sentence that we'll use, "
      "and they've used it for years; don't worry about it.\n\n",
      "def tokenize(text: str) -> list[int]:\n    return [ord(c) for c in text if c.isalnum()]\n",
      "for (int i = 0; i < n; ++i) {\n\tsum += a[i] * b[i];\n}\n",
      "Invoice 2024-0917: 1,234.56 EUR paid on 03/04/2025 at 14:05 (ref 998877665544).\n",
      "自然语言处理是人工智能的一个重要方向。今天天气很好，我们去公园散步吧。\n",
      "Обработка естественного языка — важная область искусственного интеллекта.\n",
      "प्राकृतिक भाषा प्रसंस्करण कृत्रिम बुद्धिमत्ता का एक क्षेत्र है।\n",
      "Emoji: 🦙🐍 👍🏽 👩‍💻 🇫🇷 — and {\"json\": [1, 2, 3], \"ok\": true}\n",
  };
  std::string text;
  while (text.size() < (1u << 20))
    for (const char* p : parts) text += p;
  return text;
}

}  // namespace

int main(int argc, char** argv) {
  std::vector<std::string> files;
  for (int i = 1; i < argc; ++i) files.push_back(argv[i]);
  if (files.empty())
    for (const char* name : {"tiny-llama3-q4_k_m.gguf", "tiny-qwen2-q4_k_m.gguf", "tiny-llama2-q4_0.gguf"})
      files.push_back(std::string(CONVEYOR_SHARED_MODELS) + "/" + name);
  const std::string text = bench_text();
  for (const std::string& path : files) {
    if (!std::filesystem::exists(path)) {
      std::printf("%s: missing, skipped\n", path.c_str());
      continue;
    }
    auto file = conveyor::read_gguf(path);
    if (!file) return std::fprintf(stderr, "%s\n", file.error().message.c_str()), 1;
    auto tok = conveyor::tokenizer_from_gguf(*file);
    if (!tok || !tok->tokenizer) return std::fprintf(stderr, "%s: no tokenizer\n", path.c_str()), 1;
    double best = 1e9;
    size_t tokens = 0;
    for (int run = 0; run < 3; ++run) {
      const auto t0 = std::chrono::steady_clock::now();
      tokens = tok->tokenizer->encode(text, true).size();
      best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count());
    }
    std::printf("%-28s %8zu tokens  %6.3f s  %9.0f tokens/s  %5.2f MB/s\n",
                std::filesystem::path(path).filename().c_str(), tokens, best, tokens / best,
                text.size() / best / 1e6);
  }
  return 0;
}
