// The forward pass of backends/cpu/transformer.cpp on a device (cuda_forward.hpp).
#include "backends/cuda/cuda_forward.hpp"

#include <algorithm>
#include <initializer_list>

#include "kernels/cpu/rope.hpp"
#include "kernels/cuda/kernels.hpp"
#include "model/bf16_pack.hpp"
#include "model/rope_scaling.hpp"

namespace conveyor::cuda {

namespace {

template <class T>
void upload(DeviceBuffer& dst, const std::vector<T>& host) {
  dst.reserve(std::max<size_t>(host.size() * sizeof(T), 16));
  if (!host.empty()) check(cudaMemcpy(dst.get(), host.data(), host.size() * sizeof(T), cudaMemcpyHostToDevice), "upload");
}

}  // namespace

DeviceModel::DeviceModel(const ModelConfig& config, ModelWeights& w) : c(config) {
  const int32_t dim = c.dim;
  auto bf16 = [&](DeviceBuffer& dst, std::initializer_list<const WeightMatrix*> parts, int64_t cols) {
    const std::vector<uint16_t> packed = pack_bf16(parts, cols);
    upload(dst, packed);
    bytes += int64_t(packed.size() * 2);
    for (const WeightMatrix* m : parts) m->release_pages();
  };
  auto f32 = [&](DeviceBuffer& dst, const std::vector<float>& v) {
    upload(dst, v);
    bytes += int64_t(v.size() * sizeof(float));
  };
  layers.resize(size_t(c.n_layers));
  for (int32_t l = 0; l < c.n_layers; ++l) {
    LayerWeights& lw = w.layers[size_t(l)];
    DeviceLayer& d = layers[size_t(l)];
    f32(d.attn_norm, lw.attn_norm);
    f32(d.ffn_norm, lw.ffn_norm);
    bf16(d.qkv, {&lw.wq, &lw.wk, &lw.wv}, dim);
    if (c.qkv_bias) {
      std::vector<float> bias = lw.bq;
      bias.insert(bias.end(), lw.bk.begin(), lw.bk.end());
      bias.insert(bias.end(), lw.bv.begin(), lw.bv.end());
      f32(d.qkv_bias, bias);
      d.bias = true;
    }
    if (!lw.q_norm.empty()) {
      f32(d.q_norm, lw.q_norm);
      f32(d.k_norm, lw.k_norm);
      d.qk_norm = true;
    }
    bf16(d.wo, {&lw.wo}, c.q_dim());
    bf16(d.w13, {&lw.w1, &lw.w3}, dim);
    bf16(d.w2, {&lw.w2}, c.hidden_dim);
    lw = LayerWeights{};
  }
  f32(final_norm, w.final_norm);
  if (c.tied_embeddings) {
    bf16(classifier, {&w.token_embedding}, dim);
  } else {
    bf16(classifier, {&w.classifier}, dim);
    bf16(embedding, {&w.token_embedding}, dim);
  }
  const RopeFrequencies freqs = rope_frequencies(c, w.rope_freq_factors);
  const int32_t positions = std::max(c.context_length, 1);
  std::vector<float> table(size_t(kernels::rope_table_floats(c.rotary_dim(), positions)));
  kernels::rope_table(freqs.pair_freqs, freqs.scale, positions, table.data());
  upload(rope, table);
}

StepInts::StepInts(const ForwardBatch& b, int32_t rows, size_t n_pairs, size_t n_fills) {
  const size_t n = size_t(b.num_tokens()), s = size_t(b.num_seqs());
  tokens = 0;
  token_begin = tokens + n;
  start_pos = token_begin + s + 1;
  tables = start_pos + s;
  table_begin = tables + b.block_tables.size();
  positions = table_begin + s + 1;
  logit_rows = positions + n;
  pairs = logit_rows + size_t(rows);
  fills = pairs + 2 * n_pairs;
  total = fills + 2 * n_fills;
}

void StepInts::put(const ForwardBatch& b, int32_t* h) const {
  auto copy = [&](size_t at, const std::vector<int32_t>& v) { std::copy(v.begin(), v.end(), h + at); };
  copy(tokens, b.tokens);
  copy(token_begin, b.seq_token_begin);
  copy(start_pos, b.seq_start_pos);
  copy(tables, b.block_tables);
  copy(table_begin, b.block_table_begin);
  for (int32_t s = 0, r = 0; s < b.num_seqs(); ++s) {
    const int32_t begin = b.seq_token_begin[s], end = b.seq_token_begin[s + 1];
    for (int32_t t = begin; t < end; ++t) h[positions + size_t(t)] = b.seq_start_pos[s] + (t - begin);
    if (end > begin)  // a verify span's last want_logits positions, else its last one
      for (int32_t t = end - std::min(int32_t(b.want_logits[s]), end - begin); t < end; ++t) h[logit_rows + size_t(r++)] = t;
  }
}

Forward::Forward(std::shared_ptr<const DeviceModel> model, cudaStream_t stream, cublasHandle_t blas)
    : m_(std::move(model)), stream_(stream), blas_(blas) {}

int32_t Forward::xb_width() const { return std::max({m_->c.dim, m_->c.q_dim(), m_->c.hidden_dim}); }

namespace {
// What reserve() gives each buffer, in bytes.
struct Sizes {
  size_t x, xb, qkv, attn, gate_up, ffn, final_x, logits, attention_ws;
};
Sizes sizes_for(const ModelConfig& c, int32_t xb_width, int32_t tokens, int32_t rows, int32_t max_context) {
  const size_t f = sizeof(float), n = size_t(std::max(tokens, 1)), r = size_t(std::max(rows, 1));
  Sizes s;
  s.x = n * c.dim * f;
  s.xb = n * size_t(xb_width) * 2;
  s.qkv = n * size_t(c.q_dim() + 2 * c.kv_dim()) * f;
  s.attn = n * c.q_dim() * f;
  s.gate_up = n * 2 * c.hidden_dim * f;
  s.ffn = n * c.hidden_dim * f;
  s.final_x = r * c.dim * f;
  s.logits = r * c.vocab_size * f;
  s.attention_ws = size_t(
      kernels::cuda::paged_attention_workspace_bytes(int32_t(n), c.n_heads, c.head_dim(), std::max(max_context, 1)));
  return s;
}
}  // namespace

bool Forward::fits(int32_t tokens, int32_t rows, int32_t max_context) const {
  const Sizes s = sizes_for(m_->c, xb_width(), tokens, rows, max_context);
  return s.x <= x_.bytes() && s.x <= xn_.bytes() && s.xb <= xb_.bytes() && s.qkv <= qkv_.bytes() &&
         s.attn <= attn_.bytes() && s.gate_up <= gate_up_.bytes() && s.ffn <= ffn_.bytes() &&
         s.final_x <= final_x_.bytes() && s.logits <= logits_.bytes() && s.attention_ws <= attention_ws_.bytes();
}

void Forward::reserve(int32_t tokens, int32_t rows, int32_t max_context) {
  const Sizes s = sizes_for(m_->c, xb_width(), tokens, rows, max_context);
  x_.reserve(s.x);
  xn_.reserve(s.x);
  xb_.reserve(s.xb);
  qkv_.reserve(s.qkv);
  attn_.reserve(s.attn);
  gate_up_.reserve(s.gate_up);
  ffn_.reserve(s.ffn);
  final_x_.reserve(s.final_x);
  logits_.reserve(s.logits);
  attention_ws_.reserve(s.attention_ws);
}

void Forward::gemm(const DeviceBuffer& w, int32_t out, int32_t in, const uint16_t* xin, int32_t n, float* y,
                   int64_t ldy, bool accumulate) {
  const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  // Column-major: yᵀ[out, n] = W[in, out]ᵀ · xᵀ[in, n].
  check(cublasGemmEx(blas_, CUBLAS_OP_T, CUBLAS_OP_N, out, n, in, &alpha, w.get(), CUDA_R_16BF, in, xin, CUDA_R_16BF,
                     in, &beta, y, CUDA_R_32F, int(ldy), CUBLAS_COMPUTE_32F, CUBLAS_GEMM_DEFAULT),
        "cublasGemmEx");
}

void Forward::run(const ForwardBatch& batch, const int32_t* d, const StepInts& at, int32_t max_context, int32_t rows,
                  KvCache& kv) {
  namespace k = kernels::cuda;
  const ModelConfig& c = m_->c;
  const int32_t n = batch.num_tokens(), dim = c.dim, hidden = c.hidden_dim, hd = c.head_dim();
  const int32_t q_dim = c.q_dim(), kv_dim = c.kv_dim(), qkv_dim = q_dim + 2 * kv_dim;
  const float eps = c.rms_eps;
  float* fx = x_.get<float>();
  float* fxn = xn_.get<float>();
  uint16_t* bx = xb_.get<uint16_t>();
  float* fqkv = qkv_.get<float>();
  float* fattn = attn_.get<float>();
  float* fgu = gate_up_.get<float>();
  float* fffn = ffn_.get<float>();
  const int32_t* positions = d + at.positions;
  const kernels::SpanTable spans{batch.num_seqs(), d + at.token_begin, d + at.start_pos, d + at.tables,
                                 d + at.table_begin};
  const kernels::RopeStyle style = c.rope_layout == RopeLayout::adjacent_pairs ? kernels::RopeStyle::adjacent_pairs
                                                                               : kernels::RopeStyle::half_split;
  const int64_t block_stride = int64_t(kv.shape().block_elems());
  const uint16_t* table = (c.tied_embeddings ? m_->classifier : m_->embedding).get<uint16_t>();

  check(k::embedding_gather(table, dim, d + at.tokens, n, fx, stream_), "embedding_gather");
  for (int32_t l = 0; l < c.n_layers; ++l) {
    const DeviceLayer& w = m_->layers[size_t(l)];
    const kernels::PagedKvView cache{kv.keys(0, l), kv.values(0, l), block_stride, c.n_kv_heads,
                                     kv.shape().block_size, hd, kv.dtype()};
    check(k::rmsnorm(fx, dim, n, dim, w.attn_norm.get<float>(), eps, fxn, dim, stream_), "rmsnorm");
    check(k::to_bf16(fxn, dim, n, dim, bx, dim, stream_), "to_bf16");
    gemm(w.qkv, qkv_dim, dim, bx, n, fqkv, qkv_dim, false);
    if (w.bias) check(k::add_bias(fqkv, qkv_dim, n, qkv_dim, w.qkv_bias.get<float>(), stream_), "add_bias");
    if (w.qk_norm) {
      check(k::head_rmsnorm(fqkv, qkv_dim, n, c.n_heads, hd, w.q_norm.get<float>(), eps, stream_), "q_norm");
      check(k::head_rmsnorm(fqkv + q_dim, qkv_dim, n, c.n_kv_heads, hd, w.k_norm.get<float>(), eps, stream_),
            "k_norm");
    }
    check(k::rope_apply(fqkv, qkv_dim, n, c.n_heads + c.n_kv_heads, hd, c.rotary_dim(), style, positions,
                        m_->rope.get<float>(), stream_),
          "rope_apply");
    check(k::write_kv(fqkv + q_dim, fqkv + q_dim + kv_dim, qkv_dim, n, spans, cache, stream_), "write_kv");
    check(k::paged_attention(fqkv, qkv_dim, n, c.n_heads, spans, cache, max_context, fattn, q_dim,
                             attention_ws_.get(), stream_),
          "paged_attention");
    check(k::to_bf16(fattn, q_dim, n, q_dim, bx, q_dim, stream_), "to_bf16");
    gemm(w.wo, dim, q_dim, bx, n, fx, dim, true);
    check(k::rmsnorm(fx, dim, n, dim, w.ffn_norm.get<float>(), eps, fxn, dim, stream_), "rmsnorm");
    check(k::to_bf16(fxn, dim, n, dim, bx, dim, stream_), "to_bf16");
    gemm(w.w13, 2 * hidden, dim, bx, n, fgu, 2 * hidden, false);
    check(k::swiglu(fgu, fgu + hidden, 2 * hidden, n, hidden, fffn, hidden, stream_), "swiglu");
    check(k::to_bf16(fffn, hidden, n, hidden, bx, hidden, stream_), "to_bf16");
    gemm(w.w2, dim, hidden, bx, n, fx, dim, true);
  }
  if (rows > 0) classify(d + at.logit_rows, rows);
}

void Forward::classify(const int32_t* d_rows, int32_t n) {
  namespace k = kernels::cuda;
  const ModelConfig& c = m_->c;
  float* ffinal = final_x_.get<float>();
  uint16_t* bx = xb_.get<uint16_t>();
  check(k::gather_rows(x_.get<float>(), c.dim, d_rows, n, c.dim, ffinal, c.dim, stream_), "gather_rows");
  check(k::rmsnorm(ffinal, c.dim, n, c.dim, m_->final_norm.get<float>(), c.rms_eps, ffinal, c.dim, stream_),
        "rmsnorm");
  check(k::to_bf16(ffinal, c.dim, n, c.dim, bx, c.dim, stream_), "to_bf16");
  gemm(m_->classifier, c.vocab_size, c.dim, bx, n, logits_.get<float>(), c.vocab_size, false);
}

void Forward::final_norm(int32_t n) {
  const ModelConfig& c = m_->c;
  check(kernels::cuda::rmsnorm(x_.get<float>(), c.dim, n, c.dim, m_->final_norm.get<float>(), c.rms_eps,
                               xn_.get<float>(), c.dim, stream_),
        "rmsnorm");
}

}  // namespace conveyor::cuda
