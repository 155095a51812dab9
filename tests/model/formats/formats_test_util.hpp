// Helpers shared by the model/formats tests.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <unistd.h>

#include "model/formats/loader.hpp"
#include "model/weights.hpp"
#include "tests/shared_models.hpp"

namespace conveyor::test {

// Path of a file in ../shared/models, or "" when it is not there.
inline std::string shared_model(const std::string& name) {
  const std::string path = shared_model_path(name);
  return std::filesystem::exists(path) ? path : std::string();
}

#define CONVEYOR_REQUIRE_MODEL(var, file)                                             \
  const std::string var = ::conveyor::test::shared_model(file);                      \
  if (var.empty()) GTEST_SKIP() << "shared model file " << (file) << " not found in " \
                                << CONVEYOR_SHARED_MODELS

inline std::vector<uint8_t> read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

inline void write_bytes(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
}

// A fresh directory under the system temp dir, removed with the object.
class TempDir {
 public:
  TempDir() {
    const auto* info = ::testing::UnitTest::GetInstance()->current_test_info();
    static int counter = 0;
    path_ = std::filesystem::temp_directory_path() /
            ("conveyor_formats_" + std::string(info->test_suite_name()) + "_" + info->name() +
             "_" + std::to_string(::getpid()) + "_" + std::to_string(counter++));
    std::filesystem::create_directories(path_);
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string file(const std::string& name) const { return (path_ / name).string(); }

 private:
  std::filesystem::path path_;
};

// A small random Llama (GQA, untied classifier unless told otherwise) with a
// SentencePiece-style vocabulary of `vocab` pieces.
inline LoadedModel small_model(bool tied = false, int32_t vocab = 300) {
  LoadedModel m;
  ModelConfig& c = m.config;
  c.name = "small";
  c.dim = 64;
  c.hidden_dim = 96;
  c.n_layers = 2;
  c.n_heads = 4;
  c.n_kv_heads = 2;
  c.vocab_size = vocab;
  c.context_length = 128;
  c.rope_theta = 500000.0f;
  c.rms_eps = 1e-6f;
  c.tied_embeddings = tied;
  m.weights = make_random_weights(c, 1234);
  // Norms that are not all 1, so a mix-up between them shows.
  for (size_t i = 0; i < m.weights.final_norm.size(); ++i) m.weights.final_norm[i] = 0.5f + i * 0.01f;
  Vocabulary v;
  static const char* hex = "0123456789ABCDEF";
  v.pieces = {"<unk>", "<s>", "</s>"};
  for (int b = 0; b < 256; ++b) v.pieces.push_back(std::string("<0x") + hex[b >> 4] + hex[b & 15] + ">");
  for (int i = int(v.pieces.size()); i < vocab; ++i) v.pieces.push_back("\xE2\x96\x81w" + std::to_string(i));
  v.scores.resize(v.pieces.size());
  for (size_t i = 0; i < v.scores.size(); ++i) v.scores[i] = -float(i);
  v.types.assign(v.pieces.size(), TokenType::normal);
  v.types[0] = TokenType::unknown;
  v.types[1] = v.types[2] = TokenType::control;
  for (int b = 0; b < 256; ++b) v.types[3 + b] = TokenType::byte;
  v.unk_id = 0;
  v.bos_id = 1;
  v.eos_id = 2;
  m.vocabulary = v;
  m.eos_ids = {2};
  m.chat_template = "{{ messages }}";
  return m;
}

// sqrt(Σ (y - x)² / Σ x²): y's error relative to the reference x, over all values.
inline double rms_relative_error(const std::vector<float>& x, const std::vector<float>& y) {
  double err = 0, ref = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    err += (double(y[i]) - x[i]) * (double(y[i]) - x[i]);
    ref += double(x[i]) * x[i];
  }
  return std::sqrt(err / ref);
}

}  // namespace conveyor::test
