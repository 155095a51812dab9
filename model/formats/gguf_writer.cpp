// write_gguf: a LoadedModel as a GGUF file of architecture `llama`.
#include "model/formats/gguf_writer.hpp"

#include <algorithm>
#include <cctype>

#include "model/formats/tensor_convert.hpp"

namespace conveyor {

namespace {

// ggml's GGML_QNT_VERSION, which llama.cpp stores as general.quantization_version.
constexpr uint32_t kQuantizationVersion = 2;

constexpr std::pair<GgufFileType, std::string_view> kFileTypeNames[] = {
    {GgufFileType::all_f32, "f32"}, {GgufFileType::f16, "f16"},
    {GgufFileType::bf16, "bf16"},   {GgufFileType::q8_0, "q8_0"},
    {GgufFileType::q4_0, "q4_0"},   {GgufFileType::q4_k_m, "q4_k_m"},
    {GgufFileType::q5_k_m, "q5_k_m"}, {GgufFileType::q6_k, "q6_k"},
};

// The type of most matrices (llama.cpp's default_type for the ftype).
GgmlType base_type(GgufFileType t) {
  switch (t) {
    case GgufFileType::all_f32: return GgmlType::F32;
    case GgufFileType::f16: return GgmlType::F16;
    case GgufFileType::bf16: return GgmlType::BF16;
    case GgufFileType::q8_0: return GgmlType::Q8_0;
    case GgufFileType::q4_0: return GgmlType::Q4_0;
    case GgufFileType::q4_k_m: return GgmlType::Q4_K;
    case GgufFileType::q5_k_m: return GgmlType::Q5_K;
    case GgufFileType::q6_k: return GgmlType::Q6_K;
  }
  return GgmlType::F32;
}

bool fits(GgmlType type, uint64_t row_length) {
  return row_length % ggml_type_traits(uint32_t(type)).block_size == 0;
}

// The layer of "blk.N.<...>", or -1.
int32_t layer_of(std::string_view name) {
  if (!name.starts_with("blk.")) return -1;
  int32_t layer = 0;
  size_t i = 4;
  if (i >= name.size() || !std::isdigit(uint8_t(name[i]))) return -1;
  for (; i < name.size() && std::isdigit(uint8_t(name[i])); ++i) layer = layer * 10 + (name[i] - '0');
  return i < name.size() && name[i] == '.' ? layer : -1;
}

// Token types for a vocabulary that has none, by llama.cpp's conventions.
std::vector<int32_t> token_types(const Vocabulary& v) {
  std::vector<int32_t> types(v.pieces.size(), int32_t(TokenType::normal));
  for (size_t i = 0; i < v.pieces.size(); ++i) {
    const std::string& p = v.pieces[i];
    if (!v.types.empty()) {
      types[i] = int32_t(v.types[i]);
    } else if (int32_t(i) == v.unk_id) {
      types[i] = int32_t(TokenType::unknown);
    } else if (int32_t(i) == v.bos_id || int32_t(i) == v.eos_id) {
      types[i] = int32_t(TokenType::control);
    } else if (p.size() == 6 && p.starts_with("<0x") && p.back() == '>' &&
               std::isxdigit(uint8_t(p[3])) && std::isxdigit(uint8_t(p[4]))) {
      types[i] = int32_t(TokenType::byte);
    }
  }
  return types;
}

void add_tokenizer(GgufBuilder& b, const LoadedModel& m) {
  if (!m.chat_template.empty())
    b.add("tokenizer.chat_template", GgufValue::of_string(m.chat_template));
  const int32_t first_eos = m.eos_ids.empty() ? -1 : m.eos_ids.front();
  if (!m.vocabulary) {
    b.add("tokenizer.ggml.model", GgufValue::of_string("no_vocab"));
    if (first_eos >= 0) b.add("tokenizer.ggml.eos_token_id", GgufValue::of_uint32(first_eos));
    return;
  }
  const Vocabulary& v = *m.vocabulary;
  const bool bpe = m.tokenizer_model.empty() ? !v.merges.empty() : m.tokenizer_model == "gpt2";
  b.add("tokenizer.ggml.model", GgufValue::of_string(bpe ? "gpt2" : "llama"));
  b.add("tokenizer.ggml.tokens", GgufValue::of_array(GgufArray::of_strings(v.pieces)));
  if (!v.scores.empty())
    b.add("tokenizer.ggml.scores", GgufValue::of_array(GgufArray::of_float32(v.scores)));
  b.add("tokenizer.ggml.token_type", GgufValue::of_array(GgufArray::of_int32(token_types(v))));
  if (bpe) {
    b.add("tokenizer.ggml.merges", GgufValue::of_array(GgufArray::of_strings(v.merges)));
    b.add("tokenizer.ggml.pre", GgufValue::of_string(v.pre.empty() ? "gpt-2" : v.pre));
  }
  if (v.bos_id >= 0) b.add("tokenizer.ggml.bos_token_id", GgufValue::of_uint32(v.bos_id));
  const int32_t eos = v.eos_id >= 0 ? v.eos_id : first_eos;
  if (eos >= 0) b.add("tokenizer.ggml.eos_token_id", GgufValue::of_uint32(eos));
  if (v.unk_id >= 0) b.add("tokenizer.ggml.unknown_token_id", GgufValue::of_uint32(v.unk_id));
  // An end-of-sequence id besides eos (chat models' end-of-turn) is stored as eot.
  for (int32_t id : m.eos_ids)
    if (id != eos && id >= 0) {
      b.add("tokenizer.ggml.eot_token_id", GgufValue::of_uint32(id));
      break;
    }
  b.add("tokenizer.ggml.add_bos_token", GgufValue::of_bool(v.add_bos));
  b.add("tokenizer.ggml.add_space_prefix", GgufValue::of_bool(v.add_space_prefix));
}

// Rows of a [n_heads * head_dim, dim] Q or K matrix reordered from the
// half_split RoPE layout to adjacent pairs: within each head, output rows
// (2i, 2i+1) are input rows (i, i + head_dim/2). This is llama.cpp's
// conversion permute.
std::vector<float> to_adjacent_pairs(const std::vector<float>& w, int32_t n_heads,
                                     int32_t head_dim, int32_t dim) {
  std::vector<float> out(w.size());
  const size_t half = size_t(head_dim) / 2, row = size_t(dim);
  for (size_t h = 0; h < size_t(n_heads); ++h)
    for (size_t i = 0; i < half; ++i)
      for (size_t k = 0; k < 2; ++k) {
        const size_t src = h * head_dim + i + k * half, dst = h * head_dim + 2 * i + k;
        std::copy_n(w.data() + src * row, row, out.data() + dst * row);
      }
  return out;
}

// Builds the file's description; `permuted` owns re-laid-out Q/K matrices
// that the builder's tensors point into.
Expected<GgufBuilder> build(const LoadedModel& m, const GgufWriteOptions& o,
                            std::vector<std::vector<float>>& permuted) {
  const ModelConfig& c = m.config;
  if (m.vocabulary && !m.tokenizer_model.empty() && m.tokenizer_model != "llama" &&
      m.tokenizer_model != "gpt2")
    return make_error(Errc::unsupported, "model '" + c.name + "': tokenizer model '" +
                                             m.tokenizer_model + "' cannot be written");
  if (gguf_file_type_name(o.file_type).empty())
    return make_error(Errc::invalid_argument,
                      "GGUF file type " + std::to_string(uint32_t(o.file_type)) +
                          " cannot be written (f32, f16, bf16, q8_0, q4_0, q4_k_m, q5_k_m, q6_k)");
  if (c.n_heads <= 0 || c.head_dim() <= 0 || !weights_match(c, m.weights))
    return make_error(Errc::invalid_argument,
                      "model '" + c.name + "': weights do not match the config");
  // The encoders take float rows: matrices still in their file's encoding
  // (a model loaded without LoadOptions::dequantize) would be written empty.
  const std::vector<const WeightMatrix*> matrices = weight_matrices(m.weights);
  if (std::any_of(matrices.begin(), matrices.end(), [](const WeightMatrix* w) { return w->type != WeightType::f32; }))
    return make_error(Errc::invalid_argument,
                      "model '" + c.name + "': its matrices are held in their file's encoding; "
                      "the writer encodes from float32 (load it with LoadOptions::dequantize)");
  // GGUF `llama` stores Q and K for adjacent pairs; qwen2 and qwen3 as they are (half split).
  const std::string& arch = c.architecture;
  const bool llama = arch == "llama";
  if (!llama && arch != "qwen2" && arch != "qwen3")
    return make_error(Errc::unsupported,
                      "model '" + c.name + "': architecture '" + arch + "' cannot be written");
  if (!llama && c.rope_layout != RopeLayout::half_split)
    return make_error(Errc::unsupported, "model '" + c.name + "': " + arch +
                                             " files rotate half-split pairs");
  const bool permute = llama && c.rope_layout == RopeLayout::half_split;
  if (permute && c.rotary_dim() != c.head_dim())
    return make_error(Errc::unsupported,
                      "model '" + c.name + "': partial RoPE in the half_split layout cannot be "
                      "written as GGUF llama");

  GgufBuilder b(o.alignment);
  b.add("general.architecture", GgufValue::of_string(arch));
  b.add("general.name", GgufValue::of_string(c.name));
  b.add("general.alignment", GgufValue::of_uint32(o.alignment));
  b.add("general.file_type", GgufValue::of_uint32(uint32_t(o.file_type)));
  b.add("general.quantization_version", GgufValue::of_uint32(kQuantizationVersion));
  const std::string k = arch + ".";
  b.add(k + "vocab_size", GgufValue::of_uint32(c.vocab_size));
  b.add(k + "context_length", GgufValue::of_uint32(c.context_length));
  b.add(k + "embedding_length", GgufValue::of_uint32(c.dim));
  b.add(k + "feed_forward_length", GgufValue::of_uint32(c.hidden_dim));
  b.add(k + "block_count", GgufValue::of_uint32(c.n_layers));
  b.add(k + "attention.head_count", GgufValue::of_uint32(c.n_heads));
  b.add(k + "attention.head_count_kv", GgufValue::of_uint32(c.n_kv_heads));
  if (c.head_size > 0) {
    b.add(k + "attention.key_length", GgufValue::of_uint32(c.head_size));
    b.add(k + "attention.value_length", GgufValue::of_uint32(c.head_size));
  }
  b.add(k + "rope.freq_base", GgufValue::of_float32(c.rope_theta));
  b.add(k + "rope.dimension_count", GgufValue::of_uint32(c.rotary_dim()));
  if (c.rope_scaling != RopeScaling::none) {
    const bool yarn = c.rope_scaling == RopeScaling::yarn;
    b.add(k + "rope.scaling.type", GgufValue::of_string(yarn ? "yarn" : "linear"));
    b.add(k + "rope.scaling.factor", GgufValue::of_float32(c.rope_scaling_factor));
    if (yarn) {
      b.add(k + "rope.scaling.original_context_length",
            GgufValue::of_uint32(c.rope_original_context));
      b.add(k + "rope.scaling.attn_factor", GgufValue::of_float32(c.rope_attn_factor));
      b.add(k + "rope.scaling.yarn_beta_fast", GgufValue::of_float32(c.yarn_beta_fast));
      b.add(k + "rope.scaling.yarn_beta_slow", GgufValue::of_float32(c.yarn_beta_slow));
    }
  }
  b.add(k + "attention.layer_norm_rms_epsilon", GgufValue::of_float32(c.rms_eps));
  add_tokenizer(b, m);

  const uint64_t d = c.dim, h = c.hidden_dim, kv = c.kv_dim(), v = c.vocab_size;
  const uint64_t q = uint64_t(c.q_dim());
  auto matrix = [&](const std::string& name, uint64_t cols, uint64_t rows,
                    const std::vector<float>& w) {
    b.add_tensor(name, {cols, rows}, gguf_matrix_type(o.file_type, c, name, cols), w);
  };
  auto norm = [&](const std::string& name, const std::vector<float>& w) {
    b.add_tensor(name, {uint64_t(w.size())}, GgmlType::F32, w);  // norms, biases: always F32
  };
  auto rope_rows = [&](const std::vector<float>& w, int32_t heads) -> const std::vector<float>& {
    if (!permute) return w;
    permuted.push_back(to_adjacent_pairs(w, heads, c.head_dim(), c.dim));
    return permuted.back();
  };
  permuted.reserve(size_t(2 * c.n_layers));  // keeps references stable
  matrix("token_embd.weight", d, v, m.weights.token_embedding.values);
  norm("output_norm.weight", m.weights.final_norm);
  if (!c.tied_embeddings) matrix("output.weight", d, v, m.weights.classifier.values);
  if (!m.weights.rope_freq_factors.empty()) norm("rope_freqs.weight", m.weights.rope_freq_factors);
  for (int32_t i = 0; i < c.n_layers; ++i) {
    const LayerWeights& l = m.weights.layers[size_t(i)];
    const std::string p = "blk." + std::to_string(i) + ".";
    norm(p + "attn_norm.weight", l.attn_norm);
    matrix(p + "attn_q.weight", d, q, rope_rows(l.wq.values, c.n_heads));
    matrix(p + "attn_k.weight", d, kv, rope_rows(l.wk.values, c.n_kv_heads));
    matrix(p + "attn_v.weight", d, kv, l.wv.values);
    matrix(p + "attn_output.weight", q, d, l.wo.values);
    norm(p + "ffn_norm.weight", l.ffn_norm);
    matrix(p + "ffn_gate.weight", d, h, l.w1.values);
    matrix(p + "ffn_down.weight", h, d, l.w2.values);
    matrix(p + "ffn_up.weight", d, h, l.w3.values);
    if (c.qkv_bias) {
      norm(p + "attn_q.bias", l.bq);
      norm(p + "attn_k.bias", l.bk);
      norm(p + "attn_v.bias", l.bv);
    }
    if (c.qk_norm) {
      norm(p + "attn_q_norm.weight", l.q_norm);
      norm(p + "attn_k_norm.weight", l.k_norm);
    }
  }
  return b;
}

}  // namespace

Expected<GgufFileType> parse_gguf_file_type(std::string_view name) {
  std::string lower(name);
  for (char& ch : lower) ch = char(std::tolower(uint8_t(ch)));
  for (const auto& [type, type_name] : kFileTypeNames)
    if (lower == type_name) return type;
  return make_error(Errc::invalid_argument,
                    "unknown GGUF file type '" + std::string(name) +
                        "' (expected f32, f16, bf16, q8_0, q4_0, q4_k_m, q5_k_m or q6_k)");
}

std::string_view gguf_file_type_name(GgufFileType type) {
  for (const auto& [t, type_name] : kFileTypeNames)
    if (t == type) return type_name;
  return {};
}

// llama.cpp's llama_tensor_get_type (src/llama-quant.cpp) for the file types
// above and a dense llama model. Its per-layer counters equal the layer
// number, because llama-quantize visits tensors sorted by layer.
GgmlType gguf_matrix_type(GgufFileType file_type, const ModelConfig& c, std::string_view name,
                          uint64_t row_length) {
  GgmlType type = base_type(file_type);
  const bool quantized = type == GgmlType::Q8_0 || type == GgmlType::Q4_0 ||
                         type == GgmlType::Q4_K || type == GgmlType::Q5_K || type == GgmlType::Q6_K;
  if (!quantized) return type;  // llama.cpp mixes types only when quantizing
  const bool k_m = file_type == GgufFileType::q4_k_m || file_type == GgufFileType::q5_k_m;
  const int32_t n = c.n_layers, layer = layer_of(name);
  // Layers that get more bits in the _M mixes: the first and last eighth,
  // and every third in between.
  const bool more_bits =
      layer >= 0 && (layer < n / 8 || layer >= 7 * n / 8 || (layer - n / 8) % 3 == 2);
  auto ends_with = [&](std::string_view suffix) { return name.ends_with(suffix); };
  if (name == "output.weight" || (c.tied_embeddings && name == "token_embd.weight")) {
    // The classifier (or the embedding that doubles as it): Q6_K, or Q8_0
    // when its rows do not fit the file's own type.
    if (!fits(type, row_length))
      type = GgmlType::Q8_0;
    else if (type != GgmlType::Q8_0)
      type = GgmlType::Q6_K;
  } else if (name == "token_embd.weight") {
    // The file's type.
  } else if (ends_with("attn_v.weight")) {
    if (k_m && more_bits) type = GgmlType::Q6_K;
    // llama.cpp's 70B rule (80 layers with grouped-query attention): the
    // value matrix is 8x smaller than the query's, so Q4_K becomes Q5_K.
    if (n == 80 && c.n_heads != c.n_kv_heads && type == GgmlType::Q4_K) type = GgmlType::Q5_K;
  } else if (ends_with("ffn_down.weight")) {
    if (k_m && more_bits) type = GgmlType::Q6_K;
  }
  if (!fits(type, row_length)) {
    switch (type) {
      case GgmlType::Q4_K:  // llama.cpp: Q5_0
      case GgmlType::Q5_K:  // llama.cpp: Q5_1
      case GgmlType::Q6_K: type = GgmlType::Q8_0; break;
      default: type = GgmlType::F16; break;
    }
    if (!fits(type, row_length)) type = GgmlType::F16;
  }
  return type;
}

Status write_gguf(const LoadedModel& model, const std::string& path,
                  const GgufWriteOptions& options) {
  std::vector<std::vector<float>> permuted;
  auto builder = build(model, options, permuted);
  if (!builder) return builder.error();
  return builder->write(path, options.stop);
}

Expected<std::vector<uint8_t>> serialize_gguf(const LoadedModel& model,
                                              const GgufWriteOptions& options) {
  std::vector<std::vector<float>> permuted;
  auto builder = build(model, options, permuted);
  if (!builder) return builder.error();
  return builder->to_bytes();
}

}  // namespace conveyor
