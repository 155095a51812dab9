// The tokenizer of a file in ../shared/models, for the tokenizer tests.
#pragma once

#include <filesystem>
#include <map>
#include <string>

#include "model/formats/gguf_llama.hpp"
#include "model/formats/gguf_reader.hpp"
#include "tests/shared_models.hpp"

namespace conveyor::test {

// Read once per file; null with `why` set when the file is missing or does
// not load.
inline const GgufTokenizer* shared_gguf_tokenizer(const std::string& name, std::string& why) {
  static std::map<std::string, GgufTokenizer> loaded;
  if (auto it = loaded.find(name); it != loaded.end()) return &it->second;
  const std::string path = shared_model_path(name);
  if (!std::filesystem::exists(path)) {
    why = "needs " + path;
    return nullptr;
  }
  auto file = read_gguf(path);
  if (!file) {
    why = file.error().message;
    return nullptr;
  }
  auto tok = tokenizer_from_gguf(*file);
  if (!tok) {
    why = tok.error().message;
    return nullptr;
  }
  return &loaded.emplace(name, std::move(tok).value()).first->second;
}

}  // namespace conveyor::test
