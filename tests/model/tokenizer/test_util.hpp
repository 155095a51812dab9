// Helpers shared by the tokenizer tests.
#pragma once

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "model/tokenizer/tokenizer.hpp"
#include "tests/shared_models.hpp"

namespace conveyor::test {

inline std::string shared_model(const std::string& name) {
  return shared_model_path(name);
}

inline std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream file(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(file), std::istreambuf_iterator<char>()};
}

// An independent UTF-8 validator (decodes and range-checks each code point),
// so the tests do not trust the library's own checker.
inline bool valid_utf8(std::string_view s) {
  size_t i = 0;
  while (i < s.size()) {
    const auto b = static_cast<uint8_t>(s[i]);
    size_t n = 0;
    uint32_t cp = 0;
    if (b < 0x80) { n = 1; cp = b; }
    else if ((b & 0xE0) == 0xC0) { n = 2; cp = b & 0x1F; }
    else if ((b & 0xF0) == 0xE0) { n = 3; cp = b & 0x0F; }
    else if ((b & 0xF8) == 0xF0) { n = 4; cp = b & 0x07; }
    else return false;
    if (i + n > s.size()) return false;
    for (size_t k = 1; k < n; ++k) {
      const auto c = static_cast<uint8_t>(s[i + k]);
      if ((c & 0xC0) != 0x80) return false;
      cp = (cp << 6) | (c & 0x3F);
    }
    static constexpr uint32_t kMin[] = {0, 0, 0x80, 0x800, 0x10000};
    if (cp < kMin[n] || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return false;
    i += n;
  }
  return true;
}

// Declares `var`, the Llama 2 tokenizer from ../shared/models; skips the test
// when the file is missing and fails it when the file does not load.
#define CONVEYOR_LLAMA2_TOKENIZER_OR_SKIP(var)                                          \
  const std::string var##_path = ::conveyor::test::shared_model("llama2-tokenizer.bin"); \
  if (!std::filesystem::exists(var##_path)) GTEST_SKIP() << "needs " << var##_path;      \
  auto var##_loaded = ::conveyor::load_llama2c_tokenizer(var##_path, 32000);             \
  ASSERT_TRUE(var##_loaded) << var##_loaded.error().message;                             \
  const ::conveyor::Tokenizer& var = **var##_loaded

}  // namespace conveyor::test
