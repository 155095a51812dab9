#include "model/forward/transformer.hpp"

#include <omp.h>
#include <sys/mman.h>

#include <algorithm>
#include <cassert>
#include <cstdlib>
#include <initializer_list>
#include <memory>
#include <utility>

#include "kernels/cpu/embedding.hpp"
#include "kernels/cpu/matmul.hpp"
#include "kernels/cpu/paged_attention.hpp"
#include "kernels/cpu/rmsnorm.hpp"
#include "kernels/cpu/rope.hpp"

namespace conveyor {

namespace {

// Weights packed for the kernels in kernels/cpu/matmul.hpp, on 64-byte
// boundaries so each panel row is one cache line.
class PackedMatrix {
 public:
  PackedMatrix() = default;
  // For matmul_packed: the rows of `parts` stacked on top of each other.
  static PackedMatrix stack(std::initializer_list<const std::vector<float>*> parts, int32_t cols) {
    std::vector<float> stacked;
    for (const std::vector<float>* p : parts) stacked.insert(stacked.end(), p->begin(), p->end());
    const int32_t rows = int32_t(stacked.size() / size_t(cols));
    PackedMatrix m(kernels::packed_matrix_floats(rows, cols));
    kernels::pack_matrix(stacked.data(), rows, cols, m.data_.get());
    return m;
  }
  // For matmul_packed_swiglu: gate and up, both [hidden, cols].
  static PackedMatrix gate_up(const std::vector<float>& gate, const std::vector<float>& up,
                              int32_t cols) {
    const int32_t hidden = int32_t(gate.size() / size_t(cols));
    PackedMatrix m(kernels::packed_gate_up_floats(hidden, cols));
    kernels::pack_gate_up(gate.data(), up.data(), hidden, cols, m.data_.get());
    return m;
  }
  const float* data() const { return data_.get(); }

 private:
  // Large matrices go on transparent huge pages: streaming weights through
  // 4 KiB pages costs a third of the read bandwidth (kernels/cpu/README.md).
  explicit PackedMatrix(size_t floats) {
    constexpr size_t kHuge = size_t(2) << 20;
    const size_t bytes = floats * sizeof(float);
    const size_t align = bytes >= kHuge ? kHuge : 64;
    const size_t rounded = (bytes + align - 1) / align * align;
    data_.reset(static_cast<float*>(std::aligned_alloc(align, rounded)));
    if (align == kHuge) madvise(data_.get(), rounded, MADV_HUGEPAGE);  // advice: failure is harmless
  }
  struct Free {
    void operator()(float* p) const { std::free(p); }
  };
  std::unique_ptr<float, Free> data_;
};

struct PackedLayer {
  std::vector<float> attn_norm, ffn_norm;  // [dim]
  PackedMatrix wqkv;  // [q_dim + 2 kv_dim, dim]: wq, wk, wv stacked
  PackedMatrix wo;    // [dim, q_dim]
  PackedMatrix w13;   // gate (w1) and up (w3), [hidden, dim] each, for matmul_packed_swiglu
  PackedMatrix w2;    // [dim, hidden]
};

template <class T>
void release(std::vector<T>& v) {
  std::vector<T>().swap(v);
}

template <class T>
T* grow(std::vector<T>& v, size_t n) {
  if (v.size() < n) v.resize(n);
  return v.data();
}

}  // namespace

struct Transformer::Impl {
  int n_threads = 1;
  std::vector<PackedLayer> layers;
  // Tied models keep only the packed embedding: the classifier reads it as a
  // matrix and the lookup gathers rows from it.
  PackedMatrix classifier;             // [vocab, dim]
  std::vector<float> token_embedding;  // [vocab, dim]; empty when tied
  std::vector<float> final_norm;       // [dim]
  std::vector<float> rope_table;       // [rope_positions][rotary_dim / 2][2]
  int32_t rope_positions = 0;

  // Scratch, grown to the largest batch seen and then reused.
  std::vector<float> x;        // [n_tokens, dim] residual stream
  std::vector<float> xn;       // [n_tokens, dim] normalized
  std::vector<float> qkv;      // [n_tokens, q_dim + 2 kv_dim]
  std::vector<float> attn;     // [n_tokens, q_dim]
  std::vector<float> ffn;      // [n_tokens, hidden]
  std::vector<float> final_x;  // [n_logit_rows, dim]
  std::vector<int32_t> positions;   // [n_tokens]
  std::vector<int32_t> logit_rows;  // [n_logit_rows] token index of each logits row
  kernels::AttentionWorkspace attention;
  ForwardProfile* profile = nullptr;

  void ensure_rope_table(const ModelConfig& c, int32_t n_positions) {
    if (n_positions <= rope_positions) return;
    rope_positions = std::max(n_positions, 2 * rope_positions);
    rope_table.resize(size_t(kernels::rope_table_floats(c.rotary_dim(), rope_positions)));
    kernels::rope_table(c.rope_theta, c.rotary_dim(), rope_positions, rope_table.data());
  }
};

Transformer::Transformer(ModelConfig config, ModelWeights weights, int n_threads)
    : config_(std::move(config)), impl_(new Impl) {
  assert(weights_match(config_, weights));
  Impl& m = *impl_;
  m.n_threads = n_threads > 0 ? n_threads : omp_get_max_threads();
  omp_set_num_threads(m.n_threads);
  const int32_t dim = config_.dim, hidden = config_.hidden_dim;
  const int32_t q_dim = config_.n_heads * config_.head_dim();
  m.layers.resize(size_t(config_.n_layers));
  for (int32_t l = 0; l < config_.n_layers; ++l) {
    LayerWeights& w = weights.layers[size_t(l)];
    PackedLayer& p = m.layers[size_t(l)];
    p.attn_norm = std::move(w.attn_norm);
    p.ffn_norm = std::move(w.ffn_norm);
    p.wqkv = PackedMatrix::stack({&w.wq, &w.wk, &w.wv}, dim);
    p.wo = PackedMatrix::stack({&w.wo}, q_dim);
    p.w13 = PackedMatrix::gate_up(w.w1, w.w3, dim);
    p.w2 = PackedMatrix::stack({&w.w2}, hidden);
    w = LayerWeights{};  // free the unpacked copy before packing the next layer
  }
  if (config_.tied_embeddings) {
    m.classifier = PackedMatrix::stack({&weights.token_embedding}, dim);
    release(weights.token_embedding);
  } else {
    m.classifier = PackedMatrix::stack({&weights.classifier}, dim);
    m.token_embedding = std::move(weights.token_embedding);
  }
  m.final_norm = std::move(weights.final_norm);
  m.ensure_rope_table(config_, std::max(config_.context_length, 1));
}

Transformer::~Transformer() { delete impl_; }

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
  const int32_t n = batch.num_tokens(), n_seqs = batch.num_seqs();
  const int32_t dim = c.dim, hidden = c.hidden_dim, hd = c.head_dim();
  const int32_t q_dim = c.n_heads * hd, kv_dim = c.kv_dim(), qkv_dim = q_dim + 2 * kv_dim;
  const float eps = c.rms_eps;

  float* x = grow(m.x, size_t(n) * dim);
  float* xn = grow(m.xn, size_t(n) * dim);
  float* qkv = grow(m.qkv, size_t(n) * qkv_dim);
  float* attn = grow(m.attn, size_t(n) * q_dim);
  float* ffn = grow(m.ffn, size_t(n) * hidden);
  int32_t* positions = grow(m.positions, size_t(n));
  m.logit_rows.clear();
  int32_t max_pos = 0;
  for (int32_t s = 0; s < n_seqs; ++s) {
    const int32_t begin = batch.seq_token_begin[s], end = batch.seq_token_begin[s + 1];
    for (int32_t t = begin; t < end; ++t) positions[t] = batch.seq_start_pos[s] + (t - begin);
    if (end > begin) max_pos = std::max(max_pos, positions[end - 1]);
    if (batch.want_logits[s] && end > begin) m.logit_rows.push_back(end - 1);
  }
  m.ensure_rope_table(c, max_pos + 1);

  PhaseClock clock(m.profile);
  if (m.profile) ++m.profile->calls;
  if (c.tied_embeddings)
    kernels::embedding_lookup_packed(m.classifier.data(), dim, batch.tokens.data(), n, x, dim);
  else
    kernels::embedding_lookup(m.token_embedding.data(), dim, batch.tokens.data(), n, x, dim);
  clock.mark(&ForwardProfile::embed);

  const kernels::SpanTable spans{n_seqs, batch.seq_token_begin.data(), batch.seq_start_pos.data(),
                                 batch.block_tables.data(), batch.block_table_begin.data()};
  const kernels::RopeStyle rope_style = c.rope_layout == RopeLayout::adjacent_pairs
                                            ? kernels::RopeStyle::adjacent_pairs
                                            : kernels::RopeStyle::half_split;
  const int64_t block_stride = int64_t(kv.shape().block_floats());

  for (int32_t l = 0; l < c.n_layers; ++l) {
    const PackedLayer& w = m.layers[size_t(l)];
    const kernels::PagedKvView cache{kv.keys(0, l), kv.values(0, l), block_stride, c.n_kv_heads,
                                     kv.shape().block_size, hd};
    // Attention block.
    kernels::rmsnorm(x, dim, n, dim, w.attn_norm.data(), eps, xn, dim);
    clock.mark(&ForwardProfile::norms);
    kernels::matmul_packed(xn, dim, n, w.wqkv.data(), qkv_dim, dim, qkv, qkv_dim);
    clock.mark(&ForwardProfile::matmul);
    // Queries and keys are adjacent in a qkv row: one call rotates both.
    kernels::rope_apply(qkv, qkv_dim, n, c.n_heads + c.n_kv_heads, hd, c.rotary_dim(), rope_style,
                        positions, m.rope_table.data());
    kernels::write_kv(qkv + q_dim, qkv + q_dim + kv_dim, qkv_dim, spans, cache);
    clock.mark(&ForwardProfile::norms);
    kernels::paged_attention(qkv, qkv_dim, c.n_heads, spans, cache, attn, q_dim, m.attention);
    clock.mark(&ForwardProfile::attention);
    kernels::matmul_packed(attn, q_dim, n, w.wo.data(), dim, q_dim, x, dim, /*accumulate=*/true);
    clock.mark(&ForwardProfile::matmul);
    // Feed-forward block.
    kernels::rmsnorm(x, dim, n, dim, w.ffn_norm.data(), eps, xn, dim);
    clock.mark(&ForwardProfile::norms);
    kernels::matmul_packed_swiglu(xn, dim, n, w.w13.data(), hidden, dim, ffn, hidden);
    kernels::matmul_packed(ffn, hidden, n, w.w2.data(), dim, hidden, x, dim, /*accumulate=*/true);
    clock.mark(&ForwardProfile::matmul);
  }

  // Final norm and classifier only for the rows that want logits.
  const int32_t rows = int32_t(m.logit_rows.size());
  float* final_x = grow(m.final_x, size_t(rows) * dim);
  for (int32_t r = 0; r < rows; ++r)
    kernels::rmsnorm(x + int64_t(m.logit_rows[size_t(r)]) * dim, dim, 1, dim,
                     m.final_norm.data(), eps, final_x + int64_t(r) * dim, dim);
  logits.resize(size_t(rows) * c.vocab_size);
  kernels::matmul_packed(final_x, dim, rows, m.classifier.data(), c.vocab_size, dim,
                         logits.data(), c.vocab_size);
  clock.mark(&ForwardProfile::logits);
}

}  // namespace conveyor
