// load_model: dispatch on the spec to the embedded default, a dummy config,
// a GGUF file or a llama2.c checkpoint.
#include "model/formats/loader.hpp"

#include <cstring>
#include <new>

#include "model/formats/dummy.hpp"
#include "model/formats/gguf_llama.hpp"
#include "model/formats/gguf_reader.hpp"
#include "model/formats/llama2c.hpp"
#include "model/formats/mapped_file.hpp"

namespace conveyor {

namespace {

// "dir/stories260K.bin" -> "stories260K".
std::string stem(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  std::string base = slash == std::string::npos ? path : path.substr(slash + 1);
  const size_t dot = base.find_last_of('.');
  if (dot != std::string::npos && dot > 0) base.resize(dot);
  return base;
}

bool looks_like_gguf(const std::string& path, std::span<const uint8_t> bytes) {
  if (bytes.size() >= 4 && std::memcmp(bytes.data(), "GGUF", 4) == 0) return true;
  return path.size() >= 5 && path.compare(path.size() - 5, 5, ".gguf") == 0;
}

Expected<LoadedModel> load_file(const std::string& path, const LoadOptions& options) {
  auto file = MappedFile::open(path);
  if (!file) return file.error();
  if (looks_like_gguf(path, (*file)->bytes())) {
    if (!options.tokenizer_path.empty())
      return make_error(Errc::invalid_argument,
                        path + ": a GGUF file carries its own tokenizer; a separate tokenizer "
                               "file is only for llama2.c checkpoints and dummy models");
    auto gguf = parse_gguf(*file);  // quantized matrices point into the mapping
    if (!gguf) return gguf.error();
    auto model = llama_from_gguf(*gguf, options.dequantize);
    if (!model) return model.error();
    if (gguf->find("general.name") == nullptr) model->config.name = stem(path);
    return model;
  }
  auto model = parse_llama2c((*file)->bytes(), path);
  if (!model) return model.error();
  model->config.name = stem(path);
  if (!options.tokenizer_path.empty())
    if (Status s = attach_llama2c_tokenizer(*model, options.tokenizer_path); !s) return s.error();
  return model;
}

}  // namespace

Expected<LoadedModel> load_model(std::string_view spec, const LoadOptions& options) {
  try {
    if (spec.empty()) return embedded_default_model();
    if (spec.starts_with("dummy:")) return load_dummy(spec.substr(6), options);
    return load_file(std::string(spec), options);
  } catch (const std::bad_alloc&) {
    return make_error(Errc::invalid_argument,
                      std::string(spec) + ": not enough memory to hold the model's weights");
  }
}

}  // namespace conveyor
