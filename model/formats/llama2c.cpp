#include "model/formats/llama2c.hpp"

#include <cstring>

#include "model/formats/config_check.hpp"
#include "model/formats/mapped_file.hpp"

namespace conveyor {

namespace {

constexpr size_t kHeaderBytes = 7 * 4;
constexpr int32_t kExportMagic = 0x616b3432;  // "ak42": llama2.c's later export versions

Error format_error(const std::string& name, const std::string& problem) {
  return make_error(Errc::bad_format, name + ": " + problem);
}

std::string describe(const ModelConfig& c) {
  return "dim " + std::to_string(c.dim) + ", hidden_dim " + std::to_string(c.hidden_dim) +
         ", n_layers " + std::to_string(c.n_layers) + ", n_heads " + std::to_string(c.n_heads) +
         ", n_kv_heads " + std::to_string(c.n_kv_heads) + ", vocab_size " +
         std::to_string(c.vocab_size) + (c.tied_embeddings ? " shared" : " unshared") +
         ", seq_len " + std::to_string(c.context_length);
}

// Copies consecutive float32 arrays out of the checkpoint body.
class FloatCursor {
 public:
  explicit FloatCursor(const uint8_t* p) : p_(p) {}
  void read(std::vector<float>& dst, size_t n) {
    dst.resize(n);
    if (n > 0) std::memcpy(dst.data(), p_, n * sizeof(float));
    p_ += n * sizeof(float);
  }
  void skip(size_t n) { p_ += n * sizeof(float); }

 private:
  const uint8_t* p_;
};

}  // namespace

Expected<LoadedModel> parse_llama2c(std::span<const uint8_t> bytes, const std::string& name) {
  if (bytes.size() < kHeaderBytes)
    return format_error(name, "too short for a llama2.c header (" + std::to_string(bytes.size()) +
                                  " bytes, need 28)");
  int32_t h[7];
  std::memcpy(h, bytes.data(), kHeaderBytes);
  if (h[0] == kExportMagic)
    return make_error(Errc::unsupported,
                      name + ": llama2.c export version " + std::to_string(h[1]) +
                          " is not supported (use the legacy format of export.py --version 0)");
  ModelConfig c;
  c.name = name;
  c.dim = h[0];
  c.hidden_dim = h[1];
  c.n_layers = h[2];
  c.n_heads = h[3];
  c.n_kv_heads = h[4];
  c.tied_embeddings = h[5] > 0;
  c.vocab_size = h[5] == INT32_MIN ? 0 : (h[5] < 0 ? -h[5] : h[5]);
  c.context_length = h[6];
  c.rope_theta = 10000.0f;
  c.rms_eps = 1e-5f;
  c.rope_layout = RopeLayout::adjacent_pairs;
  if (Status s = check_config(c, name + " (llama2.c header)"); !s) return s.error();

  // check_config bounds every field (dim <= 2^16, hidden <= 2^20, layers <=
  // 2^12, vocab and seq_len <= 2^24), so these products fit easily in 64 bits.
  const uint64_t d = uint64_t(c.dim), hd = uint64_t(c.hidden_dim), L = uint64_t(c.n_layers);
  const uint64_t kv = uint64_t(c.kv_dim()), v = uint64_t(c.vocab_size);
  const uint64_t rope_table = uint64_t(c.context_length) * uint64_t(c.head_dim()) / 2;
  const uint64_t floats = v * d + L * (d + d * d + 2 * kv * d + d * d + d + 3 * hd * d) + d +
                          2 * rope_table + (c.tied_embeddings ? 0 : v * d);
  const uint64_t expected = kHeaderBytes + floats * sizeof(float);
  if (bytes.size() != expected)
    return format_error(name, "file has " + std::to_string(bytes.size()) + " bytes, but its header (" +
                                  describe(c) + ") implies " + std::to_string(expected) +
                                  (bytes.size() < expected ? "; truncated?"
                                                           : "; not a llama2.c checkpoint?"));

  LoadedModel m;
  m.config = c;
  ModelWeights& w = m.weights;
  FloatCursor in(bytes.data() + kHeaderBytes);
  in.read(w.token_embedding.values, v * d);
  w.layers.resize(L);
  const uint64_t q = uint64_t(c.n_heads) * c.head_dim();
  // Each tensor is stored for all layers before the next tensor begins.
  for (LayerWeights& l : w.layers) in.read(l.attn_norm, d);
  for (LayerWeights& l : w.layers) in.read(l.wq.values, q * d);
  for (LayerWeights& l : w.layers) in.read(l.wk.values, kv * d);
  for (LayerWeights& l : w.layers) in.read(l.wv.values, kv * d);
  for (LayerWeights& l : w.layers) in.read(l.wo.values, d * q);
  for (LayerWeights& l : w.layers) in.read(l.ffn_norm, d);
  for (LayerWeights& l : w.layers) in.read(l.w1.values, hd * d);
  for (LayerWeights& l : w.layers) in.read(l.w2.values, d * hd);
  for (LayerWeights& l : w.layers) in.read(l.w3.values, hd * d);
  in.read(w.final_norm, d);
  in.skip(2 * rope_table);
  if (!c.tied_embeddings) in.read(w.classifier.values, v * d);

  for (int32_t id : {1, 2})
    if (id < c.vocab_size) m.eos_ids.push_back(id);
  m.source = name;
  return m;
}

Expected<Vocabulary> parse_llama2c_vocabulary(std::span<const uint8_t> bytes, int32_t vocab_size,
                                              const std::string& name) {
  if (vocab_size < 3 || vocab_size > (1 << 24))
    return make_error(Errc::invalid_argument,
                      name + ": vocabulary size " + std::to_string(vocab_size) + " is out of range");
  // A token takes at least 8 bytes (score and length): refuse before reserving.
  if (bytes.size() < 4 || (bytes.size() - 4) / 8 < size_t(vocab_size))
    return format_error(name, "too short for " + std::to_string(vocab_size) + " tokens (" +
                                  std::to_string(bytes.size()) + " bytes)");
  Vocabulary vocab;
  vocab.pieces.reserve(size_t(vocab_size));
  vocab.scores.reserve(size_t(vocab_size));
  size_t pos = 4;  // after max_token_length
  for (int32_t id = 0; id < vocab_size; ++id) {
    float score;
    int32_t length;
    if (bytes.size() - pos < 8)
      return format_error(name, "truncated at token " + std::to_string(id));
    std::memcpy(&score, bytes.data() + pos, 4);
    std::memcpy(&length, bytes.data() + pos + 4, 4);
    pos += 8;
    if (length < 0 || size_t(length) > bytes.size() - pos)
      return format_error(name, "token " + std::to_string(id) + " has invalid length " +
                                    std::to_string(length));
    std::string piece(reinterpret_cast<const char*>(bytes.data() + pos), size_t(length));
    pos += size_t(length);
    if (id == 1 && piece == "\n<s>\n") {
      piece = "<s>";
    } else if (id == 2 && piece == "\n</s>\n") {
      piece = "</s>";
    } else {
      std::string spelled;
      for (char ch : piece) spelled += ch == ' ' ? std::string("\xE2\x96\x81") : std::string(1, ch);
      piece = std::move(spelled);
    }
    vocab.pieces.push_back(std::move(piece));
    vocab.scores.push_back(score);
  }
  vocab.unk_id = 0;
  vocab.bos_id = 1;
  vocab.eos_id = 2;
  vocab.add_bos = true;
  vocab.add_space_prefix = true;
  return vocab;
}

Status attach_llama2c_tokenizer(LoadedModel& model, const std::string& path) {
  auto file = MappedFile::open(path);
  if (!file) return file.error();
  const std::span<const uint8_t> bytes = (*file)->bytes();
  auto vocab = parse_llama2c_vocabulary(bytes, model.config.vocab_size, path);
  if (!vocab) return vocab.error();
  auto tokenizer = parse_llama2c_tokenizer(bytes, model.config.vocab_size, path);
  if (!tokenizer) return tokenizer.error();
  model.tokenizer = std::shared_ptr<const Tokenizer>(std::move(tokenizer).value());
  model.vocabulary = std::move(vocab).value();
  model.tokenizer_model = "llama";
  return Status::ok();
}

Expected<LoadedModel> load_llama2c(const std::string& path, const std::string& tokenizer_path) {
  auto file = MappedFile::open(path);
  if (!file) return file.error();
  auto model = parse_llama2c((*file)->bytes(), path);
  if (!model) return model.error();
  if (!tokenizer_path.empty())
    if (Status s = attach_llama2c_tokenizer(*model, tokenizer_path); !s) return s.error();
  return model;
}

}  // namespace conveyor
