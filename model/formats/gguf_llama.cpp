#include "model/formats/gguf_llama.hpp"

#include <algorithm>
#include <cmath>
#include <cstdint>

#include "kernels/cpu/quant_matmul.hpp"
#include "model/formats/config_check.hpp"
#include "model/formats/gguf_metadata.hpp"

namespace conveyor {

using gguf_detail::get_array;
using gguf_detail::get_bool;
using gguf_detail::get_float;
using gguf_detail::get_int;
using gguf_detail::get_string;
using gguf_detail::metadata_error;

namespace {

constexpr int64_t kI32Max = INT32_MAX;
constexpr uint32_t kNoToken = UINT32_MAX;  // how llama.cpp writes "no such token"

Error file_error(const GgufFile& file, const std::string& problem, Errc code = Errc::bad_format) {
  return make_error(code, file.name + ": " + problem);
}

std::string shape_string(std::span<const uint64_t> dims) {
  std::string s = "[";
  for (size_t i = 0; i < dims.size(); ++i) s += (i ? ", " : "") + std::to_string(dims[i]);
  return s + "]";
}

// Dims with trailing 1s dropped: [64, 1] and [64] are the same shape.
std::vector<uint64_t> squeezed(std::vector<uint64_t> dims) {
  while (!dims.empty() && dims.back() == 1) dims.pop_back();
  return dims;
}

// What sets each architecture apart from `llama`; everything else (the
// tensor names, the metadata keys under the architecture's prefix) is shared.
struct Family {
  const char* architecture;
  RopeLayout rope_layout;  // llama.cpp permutes `llama` Q/K rows for adjacent pairs
  bool qkv_bias;
  bool qk_norm;
};

constexpr Family kFamilies[] = {
    {"llama", RopeLayout::adjacent_pairs, false, false},  // Llama 2/3.x, Mistral, SmolLM
    {"qwen2", RopeLayout::half_split, true, false},       // Qwen 2, Qwen 2.5
    {"qwen3", RopeLayout::half_split, false, true},       // Qwen 3 (dense)
};

const Family* find_family(std::string_view architecture) {
  for (const Family& f : kFamilies)
    if (architecture == f.architecture) return &f;
  return nullptr;
}

// RoPE scaling from <arch>.rope.scaling.* (and the older rope.scale_linear).
Status read_rope_scaling(const GgufFile& file, const std::string& arch, ModelConfig& c) {
  auto type = get_string(file, arch + ".rope.scaling.type", std::string("none"));
  if (!type) return type.error();
  auto factor = get_float(file, arch + ".rope.scaling.factor", 0.0);
  if (!factor) return factor.error();
  if (*factor == 0.0) {
    auto legacy = get_float(file, arch + ".rope.scale_linear", 0.0);
    if (!legacy) return legacy.error();
    factor = *legacy;
    if (*type == "none" && *legacy != 0.0 && *legacy != 1.0) type = std::string("linear");
  }
  if (*type == "none" || *factor == 1.0) return Status::ok();
  if (*type != "linear" && *type != "yarn")
    return metadata_error(file, arch + ".rope.scaling.type",
                          "is '" + *type + "': conveyor implements none, linear and yarn",
                          Errc::unsupported);
  if (*factor == 0.0)
    return metadata_error(file, arch + ".rope.scaling.factor",
                          "is missing, but rope.scaling.type is '" + *type + "'");
  c.rope_scaling = *type == "linear" ? RopeScaling::linear : RopeScaling::yarn;
  c.rope_scaling_factor = float(*factor);
  if (c.rope_scaling == RopeScaling::yarn) {
    auto original = get_int(file, arch + ".rope.scaling.original_context_length",
                            std::nullopt, 1, kI32Max);
    if (!original) return original.error();
    c.rope_original_context = int32_t(*original);
    struct FloatKey {
      const char* suffix;
      float* field;
    };
    for (const FloatKey& k : {FloatKey{".rope.scaling.attn_factor", &c.rope_attn_factor},
                              FloatKey{".rope.scaling.yarn_beta_fast", &c.yarn_beta_fast},
                              FloatKey{".rope.scaling.yarn_beta_slow", &c.yarn_beta_slow}}) {
      auto v = get_float(file, arch + k.suffix, double(*k.field));
      if (!v) return v.error();
      *k.field = float(*v);
    }
  }
  return Status::ok();
}

Expected<ModelConfig> read_config(const GgufFile& file) {
  auto arch = get_string(file, "general.architecture", std::nullopt);
  if (!arch) return arch.error();
  const Family* family = find_family(*arch);
  if (family == nullptr)
    return file_error(file,
                      "architecture '" + *arch +
                          "' is not supported (conveyor reads 'llama', 'qwen2' and 'qwen3')",
                      Errc::unsupported);
  const std::string& a = *arch;
  ModelConfig c;
  c.architecture = a;
  c.rope_layout = family->rope_layout;
  c.qkv_bias = family->qkv_bias;
  c.qk_norm = family->qk_norm;
  struct IntKey {
    std::string key;
    int32_t* field;
  };
  for (const IntKey& k : {IntKey{a + ".embedding_length", &c.dim},
                          IntKey{a + ".feed_forward_length", &c.hidden_dim},
                          IntKey{a + ".block_count", &c.n_layers},
                          IntKey{a + ".attention.head_count", &c.n_heads},
                          IntKey{a + ".context_length", &c.context_length}}) {
    auto v = get_int(file, k.key, std::nullopt, 1, kI32Max);
    if (!v) return v.error();
    *k.field = int32_t(*v);
  }
  auto experts = get_int(file, a + ".expert_count", 0, 0, kI32Max);
  if (!experts) return experts.error();
  if (*experts > 0)
    return metadata_error(file, a + ".expert_count",
                          "is " + std::to_string(*experts) +
                              ": mixture-of-experts models are not supported",
                          Errc::unsupported);
  auto kv = get_int(file, a + ".attention.head_count_kv", c.n_heads, 1, kI32Max);
  if (!kv) return kv.error();
  c.n_kv_heads = int32_t(*kv);
  // Qwen 3 heads are wider than dim / n_heads; key and value heads must agree.
  const int64_t default_head = c.dim % c.n_heads == 0 ? c.dim / c.n_heads : 0;
  auto key_length = get_int(file, a + ".attention.key_length", default_head, 1, kI32Max);
  if (!key_length) return key_length.error();
  auto value_length = get_int(file, a + ".attention.value_length", *key_length, 1, kI32Max);
  if (!value_length) return value_length.error();
  if (*value_length != *key_length)
    return metadata_error(file, a + ".attention.value_length",
                          "is " + std::to_string(*value_length) + ", but key_length is " +
                              std::to_string(*key_length) + ": not supported",
                          Errc::unsupported);
  c.head_size = *key_length == default_head ? 0 : int32_t(std::min<int64_t>(*key_length, 1 << 13));
  auto theta = get_float(file, a + ".rope.freq_base", 10000.0);
  if (!theta) return theta.error();
  c.rope_theta = float(*theta);
  auto eps = get_float(file, a + ".attention.layer_norm_rms_epsilon", 1e-5);
  if (!eps) return eps.error();
  c.rms_eps = float(*eps);
  auto rope_dim = get_int(file, a + ".rope.dimension_count", c.head_dim(), 0, kI32Max);
  if (!rope_dim) return rope_dim.error();
  c.rope_dim = *rope_dim == c.head_dim() ? 0 : int32_t(std::min<int64_t>(*rope_dim, 1 << 13));
  if (Status s = read_rope_scaling(file, a, c); !s) return s.error();

  // The vocabulary size is the embedding's row count; the token list and
  // <arch>.vocab_size, when present, must agree with it.
  const GgufTensorInfo* embd = file.find_tensor("token_embd.weight");
  if (embd == nullptr) return file_error(file, "missing tensor 'token_embd.weight'");
  if (embd->dims.size() < 2 || embd->dims[1] > uint64_t(kI32Max) || embd->dims[1] == 0)
    return file_error(file, "tensor 'token_embd.weight' has shape " + shape_string(embd->dims) +
                                ", expected [dim, vocab_size]");
  c.vocab_size = int32_t(embd->dims[1]);
  auto vocab_key = get_int(file, a + ".vocab_size", c.vocab_size, 1, kI32Max);
  if (!vocab_key) return vocab_key.error();
  if (*vocab_key != c.vocab_size)
    return metadata_error(file, a + ".vocab_size",
                          "is " + std::to_string(*vocab_key) + ", but token_embd.weight has " +
                              std::to_string(c.vocab_size) + " rows");
  c.tied_embeddings = file.find_tensor("output.weight") == nullptr;
  auto name = get_string(file, "general.name", std::string());
  if (!name) return name.error();
  c.name = name->empty() ? file.name : *name;

  if (Status s = check_config(c, file.name); !s) return s.error();
  return c;
}

// A matrix tensor as the forward pass takes it: float32 values when
// `dequantize` is set or the file stores F32, else the file's bytes in their
// encoding, kept alive by the file's storage.
Expected<WeightMatrix> load_matrix(const GgufFile& file, const GgufTensorInfo& t, bool dequantize) {
  WeightMatrix m;
  if (dequantize || GgmlType(t.type) == GgmlType::F32) {
    auto values = tensor_to_f32(file, t);
    if (!values) return values.error();
    m.values = std::move(values).value();
    return m;
  }
  m.type = WeightType(t.type);
  m.encoded = t.data;
  m.storage = file.storage;
  m.file_mapped = file.mapped;
  return m;
}

Expected<ModelWeights> read_weights(const GgufFile& file, const ModelConfig& c, bool dequantize) {
  const uint64_t d = c.dim, h = c.hidden_dim, kv = c.kv_dim(), v = c.vocab_size;
  const uint64_t q = uint64_t(c.q_dim()), hd = uint64_t(c.head_dim());
  ModelWeights w;
  struct Job {
    std::string name;
    std::vector<uint64_t> shape;
    std::vector<float>* norm = nullptr;  // a vector (norm, bias: always float32), or
    WeightMatrix* matrix = nullptr;      // a matrix
  };
  std::vector<Job> jobs = {{"token_embd.weight", {d, v}, nullptr, &w.token_embedding},
                           {"output_norm.weight", {d}, &w.final_norm}};
  if (!c.tied_embeddings) jobs.push_back({"output.weight", {d, v}, nullptr, &w.classifier});
  // Llama 3.1's frequency factors: one per rotated pair.
  if (file.find_tensor("rope_freqs.weight") != nullptr)
    jobs.push_back({"rope_freqs.weight", {uint64_t(c.rotary_dim() / 2)}, &w.rope_freq_factors});
  w.layers.resize(size_t(c.n_layers));
  for (int32_t i = 0; i < c.n_layers; ++i) {
    LayerWeights& l = w.layers[size_t(i)];
    const std::string p = "blk." + std::to_string(i) + ".";
    jobs.push_back({p + "attn_norm.weight", {d}, &l.attn_norm});
    jobs.push_back({p + "attn_q.weight", {d, q}, nullptr, &l.wq});
    jobs.push_back({p + "attn_k.weight", {d, kv}, nullptr, &l.wk});
    jobs.push_back({p + "attn_v.weight", {d, kv}, nullptr, &l.wv});
    jobs.push_back({p + "attn_output.weight", {q, d}, nullptr, &l.wo});
    jobs.push_back({p + "ffn_norm.weight", {d}, &l.ffn_norm});
    jobs.push_back({p + "ffn_gate.weight", {d, h}, nullptr, &l.w1});
    jobs.push_back({p + "ffn_down.weight", {h, d}, nullptr, &l.w2});
    jobs.push_back({p + "ffn_up.weight", {d, h}, nullptr, &l.w3});
    if (c.qkv_bias) {
      jobs.push_back({p + "attn_q.bias", {q}, &l.bq});
      jobs.push_back({p + "attn_k.bias", {kv}, &l.bk});
      jobs.push_back({p + "attn_v.bias", {kv}, &l.bv});
    }
    if (c.qk_norm) {
      jobs.push_back({p + "attn_q_norm.weight", {hd}, &l.q_norm});
      jobs.push_back({p + "attn_k_norm.weight", {hd}, &l.k_norm});
    }
  }
  // Check that every tensor exists with its shape and a type the forward pass
  // runs before loading any, so a bad file fails fast and without allocating.
  for (const Job& job : jobs) {
    const GgufTensorInfo* t = file.find_tensor(job.name);
    if (t == nullptr) return file_error(file, "missing tensor '" + job.name + "'");
    if (squeezed(t->dims) != squeezed(job.shape))
      return file_error(file, "tensor '" + job.name + "' has shape " + shape_string(t->dims) +
                                  ", expected " + shape_string(job.shape) +
                                  " from the model's metadata");
    const bool encoded = job.matrix && !dequantize && GgmlType(t->type) != GgmlType::F32;
    const bool runs = encoded ? kernels::is_weight_type(t->type)
                              : is_convertible_type(GgmlType(t->type));
    if (!runs)
      return file_error(file,
                        "tensor '" + job.name + "' has type " + ggml_type_description(t->type) +
                            ", which conveyor does not support",
                        Errc::unsupported);
    if (encoded && !kernels::quant_kernels_supported())
      return file_error(file,
                        "tensor '" + job.name + "' has type " + ggml_type_description(t->type) +
                            ": products on it need a CPU with AVX2, FMA and F16C, which this "
                            "one lacks (convert the file with --type f32)",
                        Errc::unsupported);
  }
  for (const Job& job : jobs) {
    const GgufTensorInfo& t = *file.find_tensor(job.name);
    if (job.norm) {
      auto values = tensor_to_f32(file, t);
      if (!values) return values.error();
      *job.norm = std::move(values).value();
    } else {
      auto m = load_matrix(file, t, dequantize);
      if (!m) return m.error();
      *job.matrix = std::move(m).value();
    }
  }
  for (float f : w.rope_freq_factors)
    if (!std::isfinite(f) || f <= 0.0f)
      return file_error(file, "tensor 'rope_freqs.weight' holds " + std::to_string(f) +
                                  ": RoPE frequency factors must be positive");
  return w;
}

// One integer token id key: -1 when absent or "none" (UINT32_MAX).
Expected<int32_t> token_id(const GgufFile& file, std::string_view key, size_t n_vocab) {
  auto id = get_int(file, key, -1, -1, UINT32_MAX);
  if (!id) return id.error();
  if (*id == -1 || *id == kNoToken) return -1;
  if (*id < 0 || uint64_t(*id) >= n_vocab)
    return metadata_error(file, key,
                          "is " + std::to_string(*id) + ", outside the vocabulary of " +
                              std::to_string(n_vocab) + " tokens");
  return int32_t(*id);
}

Status read_scores_and_types(const GgufFile& file, Vocabulary& vocab) {
  const size_t n = vocab.pieces.size();
  if (const GgufValue* v = file.find("tokenizer.ggml.scores")) {
    const GgufArray* a = v->as_array();
    if (a == nullptr || (a->elem_type != GgufValueType::float32 &&
                         a->elem_type != GgufValueType::float64))
      return metadata_error(file, "tokenizer.ggml.scores", "must be an array of float32");
    if (a->size() != n)
      return metadata_error(file, "tokenizer.ggml.scores",
                            "has " + std::to_string(a->size()) + " entries for " +
                                std::to_string(n) + " tokens");
    vocab.scores.resize(n);
    for (size_t i = 0; i < n; ++i) vocab.scores[i] = float(a->float_at(i).value_or(0.0));
  }
  if (const GgufValue* v = file.find("tokenizer.ggml.token_type")) {
    const GgufArray* a = v->as_array();
    if (a == nullptr || a->size() != n || (n > 0 && !a->int_at(0)))
      return metadata_error(file, "tokenizer.ggml.token_type",
                            "must be an array of one integer per token (" + std::to_string(n) +
                                ")");
    vocab.types.resize(n);
    for (size_t i = 0; i < n; ++i) {
      const int64_t t = a->int_at(i).value_or(-1);
      if (t < 0 || t > int64_t(TokenType::byte))
        return metadata_error(file, "tokenizer.ggml.token_type",
                              "has invalid type " + std::to_string(t) + " for token " +
                                  std::to_string(i));
      // 0 is llama.cpp's "undefined"; treat such tokens as normal text.
      vocab.types[i] = t == 0 ? TokenType::normal : TokenType(t);
    }
  }
  return Status::ok();
}

// Pieces of tokens that end generation besides the eos/eot/eom keys, as
// llama.cpp finds them by text (llama-vocab.cpp, special_eog_ids): chat
// formats' end-of-turn markers, and fill-in-the-middle padding, repository
// and file separators.
constexpr std::string_view kEndOfGenerationPieces[] = {
    "<|eot_id|>", "<|im_end|>", "<|end|>", "<|return|>", "<|call|>", "<|flush|>", "<|calls|>",
    "<end_of_turn>", "<|endoftext|>", "</s>", "<|eom_id|>", "<EOT>", "_<EOT>", "[EOT]", "[EOS]",
    "<|end_of_text|>", "<end_of_utterance>", "<eos>", "<turn|>", "<|tool_response>",
    "<\xEF\xBD\x9C" "end\xE2\x96\x81of\xE2\x96\x81sentence\xEF\xBD\x9C>",  // DeepSeek
    "[e~[",
    "<|fim_pad|>", "<fim-pad>", "<fim_pad>", "<PAD>", "[PAD]", "<|fim_repo|>", "<|repo_name|>",
    "<fim-repo>", "<REPO>", "<reponame>", "<|file_sep|>"};

// eos, eot and eom first (those present), then the added tokens (not normal
// text pieces) whose piece says they end generation, in id order, without
// repeats. Unlike llama.cpp, a normal piece that merely reads so does not end
// generation (Qwen's vocabulary learned "</s>" as text, id 128247). As in
// llama.cpp, "<|end|>" is not one when "<|return|>" and "<|call|>" (or
// "<|calls|>" and "<|flush|>") are (gpt-oss, Solar), nor "</s>" when
// "<|tool_response>" is (Gemma 4).
std::vector<int32_t> end_of_generation_ids(const Vocabulary* vocab,
                                           std::initializer_list<int32_t> keyed) {
  std::vector<int32_t> ids;
  const auto add = [&](int32_t id) {
    if (id >= 0 && std::find(ids.begin(), ids.end(), id) == ids.end()) ids.push_back(id);
  };
  for (int32_t id : keyed) add(id);
  if (vocab == nullptr) return ids;
  std::vector<std::pair<std::string_view, int32_t>> found;
  for (size_t id = 0; id < vocab->pieces.size(); ++id) {
    const TokenType type = vocab->types.empty() ? TokenType::control : vocab->types[id];
    if (type == TokenType::normal || type == TokenType::byte) continue;  // no types: trust the text
    for (std::string_view piece : kEndOfGenerationPieces)
      if (vocab->pieces[id] == piece) found.emplace_back(piece, int32_t(id));
  }
  const auto has = [&](std::string_view piece) {
    return std::any_of(found.begin(), found.end(), [&](const auto& f) { return f.first == piece; });
  };
  const bool drop_end = (has("<|return|>") && has("<|call|>")) || (has("<|calls|>") && has("<|flush|>"));
  const bool drop_eos_piece = has("<|tool_response>");
  for (const auto& [piece, id] : found) {
    if ((drop_end && piece == "<|end|>") || (drop_eos_piece && piece == "</s>")) continue;
    add(id);
  }
  return ids;
}

}  // namespace

Expected<GgufTokenizer> tokenizer_from_gguf(const GgufFile& file) {
  GgufTokenizer out;
  auto tmpl = get_string(file, "tokenizer.chat_template", std::string());
  if (!tmpl) return tmpl.error();
  out.chat_template = std::move(tmpl).value();
  auto model = get_string(file, "tokenizer.ggml.model", std::string("none"));
  if (!model) return model.error();
  const bool is_spm = *model == "llama", is_bpe = *model == "gpt2";
  if (!is_spm && !is_bpe && *model != "none" && *model != "no_vocab")
    return metadata_error(file, "tokenizer.ggml.model",
                          "is '" + *model + "': only 'llama' and 'gpt2' tokenizers are supported",
                          Errc::unsupported);

  Vocabulary vocab;
  if (is_spm || is_bpe) {
    auto tokens = get_array(file, "tokenizer.ggml.tokens", GgufValueType::string, true);
    if (!tokens) return tokens.error();
    vocab.pieces = (*tokens)->strings;
    if (vocab.pieces.empty())
      return metadata_error(file, "tokenizer.ggml.tokens", "is empty");
  }
  const size_t n_vocab = is_spm || is_bpe ? vocab.pieces.size() : size_t(INT32_MAX);
  auto bos = token_id(file, "tokenizer.ggml.bos_token_id", n_vocab);
  auto eos = token_id(file, "tokenizer.ggml.eos_token_id", n_vocab);
  auto unk = token_id(file, "tokenizer.ggml.unknown_token_id", n_vocab);
  auto eot = token_id(file, "tokenizer.ggml.eot_token_id", n_vocab);
  auto eom = token_id(file, "tokenizer.ggml.eom_token_id", n_vocab);
  for (auto* id : {&bos, &eos, &unk, &eot, &eom})
    if (!*id) return id->error();
  if (!is_spm && !is_bpe) {
    out.eos_ids = end_of_generation_ids(nullptr, {*eos, *eot, *eom});
    return out;
  }

  vocab.bos_id = *bos;
  vocab.eos_id = *eos;
  vocab.unk_id = *unk;
  if (Status s = read_scores_and_types(file, vocab); !s) return s.error();
  out.eos_ids = end_of_generation_ids(&vocab, {*eos, *eot, *eom});
  if (is_bpe) {
    // Which pre-tokenizer (Llama 3's, Qwen's, ...) splits text; none: GPT-2's.
    auto pre = get_string(file, "tokenizer.ggml.pre", std::string());
    if (!pre) return pre.error();
    vocab.pre = std::move(pre).value();
  }
  const bool bos_by_default = is_spm || bpe_adds_bos_by_default(vocab.pre);
  auto add_bos = get_bool(file, "tokenizer.ggml.add_bos_token", bos_by_default);
  if (!add_bos) return add_bos.error();
  vocab.add_bos = *add_bos;
  auto add_space = get_bool(file, "tokenizer.ggml.add_space_prefix", is_spm);
  if (!add_space) return add_space.error();
  vocab.add_space_prefix = *add_space;
  if (is_bpe) {
    auto merges = get_array(file, "tokenizer.ggml.merges", GgufValueType::string, true);
    if (!merges) return merges.error();
    vocab.merges = (*merges)->strings;
  }
  auto tokenizer = is_spm ? make_sentencepiece_tokenizer(vocab) : make_bpe_tokenizer(vocab);
  if (!tokenizer)
    return file_error(file, "tokenizer: " + tokenizer.error().message, tokenizer.error().code);
  out.tokenizer = std::shared_ptr<const Tokenizer>(std::move(tokenizer).value());
  out.vocabulary = std::move(vocab);
  out.model = *model;
  return out;
}

Expected<LoadedModel> llama_from_gguf(const GgufFile& file, bool dequantize) {
  auto config = read_config(file);
  if (!config) return config.error();
  auto tokenizer = tokenizer_from_gguf(file);
  if (!tokenizer) return tokenizer.error();
  if (tokenizer->vocabulary && tokenizer->vocabulary->pieces.size() != size_t(config->vocab_size))
    return metadata_error(file, "tokenizer.ggml.tokens",
                          "has " + std::to_string(tokenizer->vocabulary->pieces.size()) +
                              " tokens, but token_embd.weight has " +
                              std::to_string(config->vocab_size) + " rows");
  for (int32_t id : tokenizer->eos_ids)
    if (id >= config->vocab_size)
      return file_error(file, "end-of-sequence token " + std::to_string(id) +
                                  " is outside the vocabulary");
  auto weights = read_weights(file, *config, dequantize);
  if (!weights) return weights.error();
  LoadedModel m;
  m.config = std::move(config).value();
  m.weights = std::move(weights).value();
  m.tokenizer = std::move(tokenizer->tokenizer);
  m.vocabulary = std::move(tokenizer->vocabulary);
  m.tokenizer_model = std::move(tokenizer->model);
  m.eos_ids = std::move(tokenizer->eos_ids);
  m.chat_template = std::move(tokenizer->chat_template);
  m.source = file.name;
  return m;
}

}  // namespace conveyor
