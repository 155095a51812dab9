#include "model/weights.hpp"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdint>

namespace conveyor {

int64_t ModelConfig::parameter_count() const {
  const int64_t d = dim, h = hidden_dim, kv = kv_dim(), q = q_dim();
  const int64_t per_layer = 2 * d + q * d + 2 * kv * d + d * q + 3 * h * d +
                            (qkv_bias ? q + 2 * kv : 0) + (qk_norm ? 2 * head_dim() : 0);
  const int64_t embed = int64_t{vocab_size} * d;
  return embed + n_layers * per_layer + d + (tied_embeddings ? 0 : embed);
}

size_t WeightMatrix::elements(int64_t in) const {
  if (type == WeightType::f32) return values.size();
  const size_t row = kernels::row_bytes(type, in);
  if (row == 0 || encoded.size() % row != 0) return 0;
  return encoded.size() / row * size_t(in);
}

void WeightMatrix::decode_row(int64_t row, int64_t in, float* out) const {
  if (type == WeightType::f32) {
    std::copy_n(values.data() + row * in, in, out);
    return;
  }
  kernels::dequantize_row(type, encoded.data() + size_t(row) * kernels::row_bytes(type, in), in,
                          out);
}

void WeightMatrix::release_pages() const {
  if (!file_mapped || encoded.empty()) return;
  const uintptr_t page = uintptr_t(sysconf(_SC_PAGESIZE));
  const uintptr_t begin = (uintptr_t(encoded.data()) + page - 1) / page * page;
  const uintptr_t end = (uintptr_t(encoded.data()) + encoded.size()) / page * page;
  if (end > begin) madvise(reinterpret_cast<void*>(begin), end - begin, MADV_DONTNEED);  // advice
}

namespace {

// FNV-1a, 64 bits.
struct Fingerprint {
  uint64_t h = 0xcbf29ce484222325ULL;
  void add(const void* data, size_t n) {
    const auto* p = static_cast<const uint8_t*>(data);
    for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 0x100000001b3ULL;
  }
  void add(uint64_t v) { add(&v, sizeof v); }
  void add(const std::vector<float>& v) {
    add(uint64_t(v.size()));
    add(v.data(), v.size() * sizeof(float));
  }
  void add(const WeightMatrix& m) {
    const auto* bytes = m.type == WeightType::f32 ? reinterpret_cast<const uint8_t*>(m.values.data()) : m.encoded.data();
    const size_t n = m.bytes();
    add(uint64_t(m.type));
    add(uint64_t(n));
    constexpr size_t kSample = 4096;
    if (n <= 3 * kSample) return add(bytes, n);
    add(bytes, kSample);
    add(bytes + (n - kSample) / 2, kSample);
    add(bytes + n - kSample, kSample);
  }
};

}  // namespace

uint64_t weights_fingerprint(const ModelWeights& w) {
  Fingerprint f;
  f.add(w.token_embedding);
  f.add(uint64_t(w.layers.size()));
  for (const LayerWeights& l : w.layers) {
    for (const WeightMatrix* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w1, &l.w2, &l.w3}) f.add(*m);
    for (const std::vector<float>* v : {&l.attn_norm, &l.ffn_norm, &l.bq, &l.bk, &l.bv, &l.q_norm, &l.k_norm}) f.add(*v);
  }
  f.add(w.final_norm);
  f.add(w.classifier);
  f.add(w.rope_freq_factors);
  return f.h;
}

std::vector<const WeightMatrix*> weight_matrices(const ModelWeights& w) {
  std::vector<const WeightMatrix*> all = {&w.token_embedding, &w.classifier};
  for (const LayerWeights& l : w.layers)
    for (const WeightMatrix* m : {&l.wq, &l.wk, &l.wv, &l.wo, &l.w1, &l.w2, &l.w3}) all.push_back(m);
  return all;
}

bool weights_match(const ModelConfig& c, const ModelWeights& w) {
  const size_t d = c.dim, h = c.hidden_dim, kv = c.kv_dim(), q = size_t(c.q_dim());
  const size_t embed = size_t(c.vocab_size) * d;
  const size_t hd = size_t(c.head_dim());
  if (!w.rope_freq_factors.empty() && w.rope_freq_factors.size() != size_t(c.rotary_dim() / 2))
    return false;
  if (w.token_embedding.elements(c.dim) != embed || w.final_norm.size() != d) return false;
  if (c.tied_embeddings ? !w.classifier.empty() : w.classifier.elements(c.dim) != embed)
    return false;
  if (w.layers.size() != size_t(c.n_layers)) return false;
  const int64_t q_in = int64_t(q);
  for (const LayerWeights& l : w.layers) {
    if (l.attn_norm.size() != d || l.ffn_norm.size() != d || l.wq.elements(d) != q * d ||
        l.wk.elements(d) != kv * d || l.wv.elements(d) != kv * d ||
        l.wo.elements(q_in) != d * q || l.w1.elements(d) != h * d ||
        l.w2.elements(c.hidden_dim) != d * h || l.w3.elements(d) != h * d)
      return false;
    if (c.qkv_bias ? (l.bq.size() != q || l.bk.size() != kv || l.bv.size() != kv)
                   : !(l.bq.empty() && l.bk.empty() && l.bv.empty()))
      return false;
    if (c.qk_norm ? (l.q_norm.size() != hd || l.k_norm.size() != hd)
                  : !(l.q_norm.empty() && l.k_norm.empty()))
      return false;
  }
  return true;
}

namespace {

// splitmix64: tiny, fast and good enough to fill weights reproducibly.
struct SplitMix {
  uint64_t state;
  uint64_t next() {
    uint64_t z = (state += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  float uniform() { return float(next() >> 40) * (1.0f / 16777216.0f); }  // [0, 1)
};

std::vector<float> random_matrix(SplitMix& rng, size_t rows, size_t cols) {
  std::vector<float> m(rows * cols);
  const float scale = 1.0f / std::sqrt(float(cols));
  for (float& x : m) x = (2.0f * rng.uniform() - 1.0f) * scale;
  return m;
}

}  // namespace

ModelWeights make_random_weights(const ModelConfig& c, uint64_t seed) {
  SplitMix rng{seed};
  const size_t d = c.dim, h = c.hidden_dim, kv = c.kv_dim(), q = size_t(c.q_dim());
  ModelWeights w;
  // Embeddings get unit-scale entries so activations start at a sensible size.
  w.token_embedding.values.resize(size_t(c.vocab_size) * d);
  for (float& x : w.token_embedding.values) x = 2.0f * rng.uniform() - 1.0f;
  w.layers.resize(c.n_layers);
  for (LayerWeights& l : w.layers) {
    l.attn_norm.assign(d, 1.0f);
    l.ffn_norm.assign(d, 1.0f);
    l.wq.values = random_matrix(rng, q, d);
    l.wk.values = random_matrix(rng, kv, d);
    l.wv.values = random_matrix(rng, kv, d);
    l.wo.values = random_matrix(rng, d, q);
    l.w1.values = random_matrix(rng, h, d);
    l.w2.values = random_matrix(rng, d, h);
    l.w3.values = random_matrix(rng, h, d);
    if (c.qkv_bias) {
      l.bq = random_matrix(rng, 1, q);
      l.bk = random_matrix(rng, 1, kv);
      l.bv = random_matrix(rng, 1, kv);
    }
    if (c.qk_norm) {  // around 1, so that the norms are not the identity
      l.q_norm.resize(size_t(c.head_dim()));
      l.k_norm.resize(size_t(c.head_dim()));
      for (float& x : l.q_norm) x = 0.5f + rng.uniform();
      for (float& x : l.k_norm) x = 0.5f + rng.uniform();
    }
  }
  w.final_norm.assign(d, 1.0f);
  if (!c.tied_embeddings) w.classifier.values = random_matrix(rng, c.vocab_size, d);
  return w;
}

}  // namespace conveyor
