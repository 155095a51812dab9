#include "backends/cpu/transformer.hpp"

#include <omp.h>
#include <sys/mman.h>

#include <algorithm>
#include <cassert>
#include <cstdlib>
#include <initializer_list>
#include <memory>
#include <utility>

#include "kernels/cpu/paged_attention.hpp"
#include "kernels/cpu/rmsnorm.hpp"
#include "kernels/cpu/rope.hpp"
#include "kernels/cpu/swiglu.hpp"
#include "backends/cpu/linear.hpp"
#include "model/rope_scaling.hpp"

namespace conveyor {

namespace {

// One layer's weights packed for their products. wq, wk and wv run as one
// product and gate and up as one fused SwiGLU product when each group shares
// a type (a Q4_K_M file may store attn_v or a ffn matrix as Q6_K: those then
// run as separate products, wq and wk still as one: a separate product of
// wk's few rows ran at a quarter of the compute peak at batch 16).
struct PackedLayer {
  std::vector<float> attn_norm, ffn_norm;  // [dim]
  std::vector<Linear> qkv;  // [q_dim + 2 kv_dim, dim] in one to three parts, in column order
  std::vector<float> qkv_bias;        // [q_dim + 2 kv_dim], or empty
  std::vector<float> q_norm, k_norm;  // [head_dim] each, or empty
  Linear wo;                // [dim, q_dim]
  Linear w13;               // gate (w1) and up (w3) fused; or, when their types differ,
  Linear w1, w3;            // each [hidden, dim]
  Linear w2;                // [dim, hidden]
};

// x[t][i] += bias[i] for n rows of `cols` values.
void add_bias(float* x, int64_t ldx, int32_t n, const float* bias, int32_t cols) {
  for (int32_t t = 0; t < n; ++t) {
    float* row = x + t * ldx;
#pragma omp simd
    for (int32_t i = 0; i < cols; ++i) row[i] += bias[i];
  }
}

template <class T>
T* grow(std::vector<T>& v, size_t n) {
  if (v.size() < n) v.resize(n);
  return v.data();
}

}  // namespace

// Scratch, grown to the largest batch seen and then reused.
struct Transformer::Workspace {
  std::vector<float> x;        // [n_tokens, dim] residual stream
  std::vector<float> xn;       // [n_tokens, dim] normalized
  std::vector<float> qkv;      // [n_tokens, q_dim + 2 kv_dim]
  std::vector<float> attn;     // [n_tokens, q_dim]
  std::vector<float> ffn;      // [n_tokens, hidden]
  std::vector<float> up;       // [n_tokens, hidden], when gate and up run apart
  std::vector<int32_t> positions;  // [n_tokens]
  kernels::AttentionWorkspace attention;
  kernels::QuantScratch quant;
};

void Transformer::WorkspaceDeleter::operator()(Workspace* ws) const { delete ws; }

Transformer::WorkspacePtr Transformer::make_workspace() const { return WorkspacePtr(new Workspace); }

struct Transformer::Impl {
  int n_threads = 1;
  std::vector<PackedLayer> layers;
  // Tied models keep only the packed embedding: the classifier reads it as a
  // matrix and the lookup gathers rows from it. Untied, the embedding stays as
  // loaded (for a GGUF file, its encoded rows in the mapped file, so only the
  // rows of tokens seen are ever read).
  Linear classifier;            // [vocab, dim]
  WeightMatrix token_embedding;  // [vocab, dim]; empty when tied
  std::vector<float> final_norm;       // [dim]
  RopeFrequencies rope;                // per-pair frequencies after the model's scaling
  std::vector<float> rope_table;       // [rope_positions][rotary_dim / 2][2]
  int32_t rope_positions = 0;

  Workspace scratch;            // forward()'s
  std::vector<float> final_x;   // [n_logit_rows, dim]
  std::vector<int32_t> logit_rows;  // [n_logit_rows] token index of each logits row
  ForwardProfile* profile = nullptr;

  // x[t] = the embedding row of tokens[t]. A packed (tied) row is a strided
  // gather, one value per 64-byte line, and an encoded one a decode: spread
  // long prompts over the threads.
  void embed(const ModelConfig& c, const int32_t* tokens, int32_t n, float* x) const {
#pragma omp parallel for schedule(static) if (n >= 64)
    for (int32_t t = 0; t < n; ++t) {
      if (c.tied_embeddings)
        classifier.row(tokens[t], x + int64_t(t) * c.dim);
      else
        token_embedding.decode_row(tokens[t], c.dim, x + int64_t(t) * c.dim);
    }
  }

  void ensure_rope_table(const ModelConfig& c, int32_t n_positions) {
    if (n_positions <= rope_positions) return;
    rope_positions = std::max(n_positions, 2 * rope_positions);
    rope_table.resize(size_t(kernels::rope_table_floats(c.rotary_dim(), rope_positions)));
    kernels::rope_table(rope.pair_freqs, rope.scale, rope_positions, rope_table.data());
  }
};

Transformer::Transformer(ModelConfig config, ModelWeights weights, int n_threads)
    : config_(std::move(config)), impl_(new Impl) {
  assert(weights_match(config_, weights));
  Impl& m = *impl_;
  m.n_threads = n_threads > 0 ? n_threads : omp_get_max_threads();
  omp_set_num_threads(m.n_threads);
  const int32_t dim = config_.dim, hidden = config_.hidden_dim;
  const int32_t q_dim = config_.q_dim();
  m.layers.resize(size_t(config_.n_layers));
  for (int32_t l = 0; l < config_.n_layers; ++l) {
    LayerWeights& w = weights.layers[size_t(l)];
    PackedLayer& p = m.layers[size_t(l)];
    p.attn_norm = std::move(w.attn_norm);
    p.ffn_norm = std::move(w.ffn_norm);
    if (config_.qkv_bias) {
      p.qkv_bias = std::move(w.bq);
      p.qkv_bias.insert(p.qkv_bias.end(), w.bk.begin(), w.bk.end());
      p.qkv_bias.insert(p.qkv_bias.end(), w.bv.begin(), w.bv.end());
    }
    p.q_norm = std::move(w.q_norm);
    p.k_norm = std::move(w.k_norm);
    if (same_type({&w.wq, &w.wk, &w.wv})) {
      p.qkv.push_back(Linear::stack({&w.wq, &w.wk, &w.wv}, dim));
    } else if (same_type({&w.wq, &w.wk})) {  // Q4_K_M's layers with attn_v as Q6_K
      p.qkv.push_back(Linear::stack({&w.wq, &w.wk}, dim));
      p.qkv.push_back(Linear::stack({&w.wv}, dim));
    } else if (same_type({&w.wk, &w.wv})) {
      p.qkv.push_back(Linear::stack({&w.wq}, dim));
      p.qkv.push_back(Linear::stack({&w.wk, &w.wv}, dim));
    } else {
      for (const WeightMatrix* part : {&w.wq, &w.wk, &w.wv}) p.qkv.push_back(Linear::stack({part}, dim));
    }
    p.wo = Linear::stack({&w.wo}, q_dim);
    if (same_type({&w.w1, &w.w3})) {
      p.w13 = Linear::gate_up(w.w1, w.w3, dim);
    } else {
      p.w1 = Linear::stack({&w.w1}, dim);
      p.w3 = Linear::stack({&w.w3}, dim);
    }
    p.w2 = Linear::stack({&w.w2}, hidden);
    for (const WeightMatrix* m : {&w.wq, &w.wk, &w.wv, &w.wo, &w.w1, &w.w2, &w.w3}) m->release_pages();
    w = LayerWeights{};  // free the unpacked copy before packing the next layer
  }
  if (config_.tied_embeddings) {
    m.classifier = Linear::stack({&weights.token_embedding}, dim);
    weights.token_embedding.release_pages();
  } else {
    m.classifier = Linear::stack({&weights.classifier}, dim);
    weights.classifier.release_pages();
    m.token_embedding = std::move(weights.token_embedding);
  }
  m.final_norm = std::move(weights.final_norm);
  m.rope = rope_frequencies(config_, weights.rope_freq_factors);
  m.ensure_rope_table(config_, std::max(config_.context_length, 1));
}

Transformer::~Transformer() { delete impl_; }

size_t Transformer::weight_bytes() const {
  size_t bytes = impl_->classifier.bytes();
  for (const PackedLayer& l : impl_->layers) {
    for (const Linear& part : l.qkv) bytes += part.bytes();
    bytes += l.wo.bytes() + l.w13.bytes() + l.w1.bytes() + l.w3.bytes() + l.w2.bytes();
  }
  return bytes;
}

void Transformer::set_profile(ForwardProfile* profile) { impl_->profile = profile; }

namespace {

// Adds the time since the last mark to a profile field (when profiling).
class PhaseClock {
 public:
  explicit PhaseClock(ForwardProfile* p) : p_(p), last_(p ? omp_get_wtime() : 0.0) {}
  void mark(double ForwardProfile::*field) {
    if (!p_) return;
    const double now = omp_get_wtime();
    p_->*field += now - last_;
    last_ = now;
  }

 private:
  ForwardProfile* p_;
  double last_;
};

}  // namespace

void Transformer::forward(const ForwardBatch& batch, KvCache& kv, std::vector<float>& logits) {
  Impl& m = *impl_;
  const ModelConfig& c = config_;
  omp_set_num_threads(m.n_threads);
  int32_t max_pos = 0;
  m.logit_rows.clear();
  for (int32_t s = 0; s < batch.num_seqs(); ++s) {
    const int32_t begin = batch.seq_token_begin[s], end = batch.seq_token_begin[s + 1];
    if (end > begin) max_pos = std::max(max_pos, batch.seq_start_pos[s] + (end - 1 - begin));
    for (int32_t r = std::max(begin, end - int32_t(batch.want_logits[s])); r < end; ++r) m.logit_rows.push_back(r);
  }
  m.ensure_rope_table(c, max_pos + 1);
  run_layers(batch, kv, m.scratch, m.profile);

  // Final norm and classifier only for the rows that want logits.
  PhaseClock clock(m.profile);
  const int32_t dim = c.dim, rows = int32_t(m.logit_rows.size());
  float* final_x = grow(m.final_x, size_t(rows) * dim);
  for (int32_t r = 0; r < rows; ++r)
    kernels::rmsnorm(m.scratch.x.data() + int64_t(m.logit_rows[size_t(r)]) * dim, dim, 1, dim,
                     m.final_norm.data(), c.rms_eps, final_x + int64_t(r) * dim, dim);
  logits.resize(size_t(rows) * c.vocab_size);
  m.classifier.apply(final_x, dim, rows, logits.data(), c.vocab_size, false, m.scratch.quant);
  clock.mark(&ForwardProfile::logits);
}

void Transformer::logits_of(std::span<const int32_t> rows, std::vector<float>& logits) {
  Impl& m = *impl_;
  const ModelConfig& c = config_;
  omp_set_num_threads(m.n_threads);
  const int32_t dim = c.dim, n = int32_t(rows.size());
  float* final_x = grow(m.final_x, size_t(n) * dim);
  for (int32_t r = 0; r < n; ++r)
    kernels::rmsnorm(m.scratch.x.data() + int64_t(rows[size_t(r)]) * dim, dim, 1, dim, m.final_norm.data(),
                     c.rms_eps, final_x + int64_t(r) * dim, dim);
  logits.resize(size_t(n) * c.vocab_size);
  m.classifier.apply(final_x, dim, n, logits.data(), c.vocab_size, false, m.scratch.quant);
}

void Transformer::hidden_states(const ForwardBatch& batch, KvCache& kv, Workspace& ws,
                                std::vector<float>& hidden) const {
  const Impl& m = *impl_;
  omp_set_num_threads(m.n_threads);
  // The RoPE table covers the context (built at construction); only
  // forward() grows it, so it is read here, never written.
  run_layers(batch, kv, ws, nullptr);
  const int32_t n = batch.num_tokens(), dim = config_.dim;
  hidden.resize(size_t(n) * dim);
  kernels::rmsnorm(ws.x.data(), dim, n, dim, m.final_norm.data(), config_.rms_eps, hidden.data(), dim);
}

void Transformer::run_layers(const ForwardBatch& batch, KvCache& kv, Workspace& ws,
                             ForwardProfile* profile) const {
  const Impl& m = *impl_;
  const ModelConfig& c = config_;
  const int32_t n = batch.num_tokens(), n_seqs = batch.num_seqs();
  const int32_t dim = c.dim, hidden = c.hidden_dim, hd = c.head_dim();
  const int32_t q_dim = c.q_dim(), kv_dim = c.kv_dim(), qkv_dim = q_dim + 2 * kv_dim;
  const float eps = c.rms_eps;

  float* x = grow(ws.x, size_t(n) * dim);
  float* xn = grow(ws.xn, size_t(n) * dim);
  float* qkv = grow(ws.qkv, size_t(n) * qkv_dim);
  float* attn = grow(ws.attn, size_t(n) * q_dim);
  float* ffn = grow(ws.ffn, size_t(n) * hidden);
  int32_t* positions = grow(ws.positions, size_t(n));
  for (int32_t s = 0; s < n_seqs; ++s) {
    const int32_t begin = batch.seq_token_begin[s], end = batch.seq_token_begin[s + 1];
    for (int32_t t = begin; t < end; ++t) positions[t] = batch.seq_start_pos[s] + (t - begin);
  }

  PhaseClock clock(profile);
  if (profile) ++profile->calls;
  m.embed(c, batch.tokens.data(), n, x);
  clock.mark(&ForwardProfile::embed);

  const kernels::SpanTable spans{n_seqs,
                                 batch.seq_token_begin.data(),
                                 batch.seq_start_pos.data(),
                                 batch.block_tables.data(),
                                 batch.block_table_begin.data(),
                                 batch.seq_prompt_len.size() == size_t(n_seqs) ? batch.seq_prompt_len.data() : nullptr};
  const kernels::RopeStyle rope_style = c.rope_layout == RopeLayout::adjacent_pairs
                                            ? kernels::RopeStyle::adjacent_pairs
                                            : kernels::RopeStyle::half_split;
  const int64_t block_stride = int64_t(kv.shape().block_elems());

  for (int32_t l = 0; l < c.n_layers; ++l) {
    const PackedLayer& w = m.layers[size_t(l)];
    const kernels::PagedKvView cache{kv.keys(0, l), kv.values(0, l), block_stride, c.n_kv_heads,
                                     kv.shape().block_size, hd, kv.dtype()};
    // Attention block.
    kernels::rmsnorm(x, dim, n, dim, w.attn_norm.data(), eps, xn, dim);
    clock.mark(&ForwardProfile::norms);
    for (int32_t part = 0, col = 0; part < int32_t(w.qkv.size()); col += w.qkv[size_t(part)].rows(), ++part)
      w.qkv[size_t(part)].apply(xn, dim, n, qkv + col, qkv_dim, false, ws.quant);
    clock.mark(&ForwardProfile::matmul);
    if (!w.qkv_bias.empty()) add_bias(qkv, qkv_dim, n, w.qkv_bias.data(), qkv_dim);
    if (!w.q_norm.empty()) {  // every query head, then every key head, of each token
      for (int32_t t = 0; t < n; ++t) {
        float* row = qkv + int64_t(t) * qkv_dim;
        kernels::rmsnorm(row, hd, c.n_heads, hd, w.q_norm.data(), eps, row, hd);
        kernels::rmsnorm(row + q_dim, hd, c.n_kv_heads, hd, w.k_norm.data(), eps, row + q_dim, hd);
      }
    }
    // Queries and keys are adjacent in a qkv row: one call rotates both.
    kernels::rope_apply(qkv, qkv_dim, n, c.n_heads + c.n_kv_heads, hd, c.rotary_dim(), rope_style,
                        positions, m.rope_table.data());
    kernels::write_kv(qkv + q_dim, qkv + q_dim + kv_dim, qkv_dim, spans, cache);
    clock.mark(&ForwardProfile::norms);
    kernels::paged_attention(qkv, qkv_dim, c.n_heads, spans, cache, attn, q_dim, ws.attention);
    clock.mark(&ForwardProfile::attention);
    w.wo.apply(attn, q_dim, n, x, dim, /*accumulate=*/true, ws.quant);
    clock.mark(&ForwardProfile::matmul);
    // Feed-forward block.
    kernels::rmsnorm(x, dim, n, dim, w.ffn_norm.data(), eps, xn, dim);
    clock.mark(&ForwardProfile::norms);
    if (w.w13.rows() > 0) {
      w.w13.apply_swiglu(xn, dim, n, ffn, hidden, ws.quant);
    } else {
      float* up = grow(ws.up, size_t(n) * hidden);
      w.w1.apply(xn, dim, n, ffn, hidden, false, ws.quant);
      w.w3.apply(xn, dim, n, up, hidden, false, ws.quant);
      kernels::swiglu(ffn, up, hidden, n, hidden, ffn, hidden);
    }
    w.w2.apply(ffn, hidden, n, x, dim, /*accumulate=*/true, ws.quant);
    clock.mark(&ForwardProfile::matmul);
  }
}

}  // namespace conveyor
