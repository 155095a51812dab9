// write_gguf: a LoadedModel as a GGUF file of architecture `llama`.
#include "model/formats/gguf_writer.hpp"

#include <algorithm>
#include <cctype>

#include "model/formats/tensor_convert.hpp"

namespace conveyor {

namespace {

// llama.cpp's general.file_type (llama_ftype) for a model stored as `type`.
uint32_t file_type(GgmlType type) {
  switch (type) {
    case GgmlType::F16: return 1;
    case GgmlType::Q8_0: return 7;
    case GgmlType::BF16: return 32;
    default: return 0;
  }
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
    b.add("tokenizer.ggml.pre", GgufValue::of_string("gpt-2"));
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
  if (!is_convertible_type(o.tensor_type))
    return make_error(Errc::invalid_argument, "GGUF tensor type " +
                                                  ggml_type_description(uint32_t(o.tensor_type)) +
                                                  " cannot be written (F32, F16, BF16, Q8_0)");
  if (c.n_heads <= 0 || c.dim % c.n_heads != 0 || !weights_match(c, m.weights))
    return make_error(Errc::invalid_argument,
                      "model '" + c.name + "': weights do not match the config");
  const bool permute = c.rope_layout == RopeLayout::half_split;
  if (permute && c.rotary_dim() != c.head_dim())
    return make_error(Errc::unsupported,
                      "model '" + c.name + "': partial RoPE in the half_split layout cannot be "
                      "written as GGUF llama");

  GgufBuilder b(o.alignment);
  b.add("general.architecture", GgufValue::of_string("llama"));
  b.add("general.name", GgufValue::of_string(c.name));
  b.add("general.alignment", GgufValue::of_uint32(o.alignment));
  b.add("general.file_type", GgufValue::of_uint32(file_type(o.tensor_type)));
  b.add("llama.vocab_size", GgufValue::of_uint32(c.vocab_size));
  b.add("llama.context_length", GgufValue::of_uint32(c.context_length));
  b.add("llama.embedding_length", GgufValue::of_uint32(c.dim));
  b.add("llama.feed_forward_length", GgufValue::of_uint32(c.hidden_dim));
  b.add("llama.block_count", GgufValue::of_uint32(c.n_layers));
  b.add("llama.attention.head_count", GgufValue::of_uint32(c.n_heads));
  b.add("llama.attention.head_count_kv", GgufValue::of_uint32(c.n_kv_heads));
  b.add("llama.rope.freq_base", GgufValue::of_float32(c.rope_theta));
  b.add("llama.rope.dimension_count", GgufValue::of_uint32(c.rotary_dim()));
  b.add("llama.attention.layer_norm_rms_epsilon", GgufValue::of_float32(c.rms_eps));
  add_tokenizer(b, m);

  const uint64_t d = c.dim, h = c.hidden_dim, kv = c.kv_dim(), v = c.vocab_size;
  const uint64_t q = uint64_t(c.n_heads) * c.head_dim();
  auto matrix = [&](const std::string& name, uint64_t cols, uint64_t rows,
                    const std::vector<float>& w) {
    GgmlType type = o.tensor_type;
    if (type == GgmlType::Q8_0 && cols % kQ8_0BlockSize != 0) type = GgmlType::F16;
    b.add_tensor(name, {cols, rows}, type, w);
  };
  auto norm = [&](const std::string& name, const std::vector<float>& w) {
    b.add_tensor(name, {d}, GgmlType::F32, w);
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
  }
  return b;
}

}  // namespace

Expected<GgmlType> parse_gguf_tensor_type(std::string_view name) {
  std::string lower(name);
  for (char& ch : lower) ch = char(std::tolower(uint8_t(ch)));
  if (lower == "f32") return GgmlType::F32;
  if (lower == "f16") return GgmlType::F16;
  if (lower == "bf16") return GgmlType::BF16;
  if (lower == "q8_0") return GgmlType::Q8_0;
  return make_error(Errc::invalid_argument, "unknown GGUF tensor type '" + std::string(name) +
                                                "' (expected f32, f16, bf16 or q8_0)");
}

Status write_gguf(const LoadedModel& model, const std::string& path,
                  const GgufWriteOptions& options) {
  std::vector<std::vector<float>> permuted;
  auto builder = build(model, options, permuted);
  if (!builder) return builder.error();
  return builder->write(path);
}

Expected<std::vector<uint8_t>> serialize_gguf(const LoadedModel& model,
                                              const GgufWriteOptions& options) {
  std::vector<std::vector<float>> permuted;
  auto builder = build(model, options, permuted);
  if (!builder) return builder.error();
  return builder->to_bytes();
}

}  // namespace conveyor
