// A plain, unpaged Llama forward pass for tests: one sequence, one token at a
// time, dense KV history, naive loops in double precision. Written from the
// architecture's definition, sharing no code with conveyor's kernels.
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <vector>

#include "model/config.hpp"
#include "model/weights.hpp"

namespace conveyor::testing {

class ReferenceModel {
 public:
  ReferenceModel(const ModelConfig& config, const ModelWeights& weights)
      : c_(config), w_(weights), keys_(size_t(config.n_layers)), values_(size_t(config.n_layers)) {}

  // Feeds the next token (at position = tokens fed so far); returns its logits.
  std::vector<float> step(int32_t token) {
    const int32_t dim = c_.dim, hd = c_.head_dim(), kv_dim = c_.kv_dim();
    const int32_t q_dim = c_.n_heads * hd, pos = pos_++;
    std::vector<double> x(dim);
    for (int32_t i = 0; i < dim; ++i) x[i] = w_.token_embedding.values[size_t(token) * dim + i];
    for (int32_t l = 0; l < c_.n_layers; ++l) {
      const LayerWeights& L = w_.layers[size_t(l)];
      std::vector<double> xn = rmsnorm(x, L.attn_norm);
      std::vector<double> q = matvec(L.wq.values, xn, q_dim), k = matvec(L.wk.values, xn, kv_dim),
                          v = matvec(L.wv.values, xn, kv_dim);
      if (c_.qkv_bias) {  // Qwen 2
        for (int32_t i = 0; i < q_dim; ++i) q[size_t(i)] += L.bq[size_t(i)];
        for (int32_t i = 0; i < kv_dim; ++i) k[size_t(i)] += L.bk[size_t(i)], v[size_t(i)] += L.bv[size_t(i)];
      }
      if (c_.qk_norm) {  // Qwen 3: each head normalized on its own
        for (int32_t h = 0; h < c_.n_heads; ++h) head_norm(&q[size_t(h) * hd], L.q_norm);
        for (int32_t h = 0; h < c_.n_kv_heads; ++h) head_norm(&k[size_t(h) * hd], L.k_norm);
      }
      for (int32_t h = 0; h < c_.n_heads; ++h) rope(&q[size_t(h) * hd], pos);
      for (int32_t h = 0; h < c_.n_kv_heads; ++h) rope(&k[size_t(h) * hd], pos);
      keys_[size_t(l)].insert(keys_[size_t(l)].end(), k.begin(), k.end());
      values_[size_t(l)].insert(values_[size_t(l)].end(), v.begin(), v.end());
      std::vector<double> att(q_dim);
      const int32_t group = c_.n_heads / c_.n_kv_heads;
      for (int32_t h = 0; h < c_.n_heads; ++h) {
        const int32_t kvh = h / group;
        std::vector<double> score(size_t(pos) + 1);
        double mx = -1e300;
        for (int32_t p = 0; p <= pos; ++p) {
          double s = 0.0;
          for (int32_t d = 0; d < hd; ++d)
            s += q[size_t(h) * hd + d] * keys_[size_t(l)][size_t(p) * kv_dim + kvh * hd + d];
          score[size_t(p)] = s / std::sqrt(double(hd));
          mx = std::max(mx, score[size_t(p)]);
        }
        double sum = 0.0;
        for (double& s : score) sum += (s = std::exp(s - mx));
        for (int32_t p = 0; p <= pos; ++p)
          for (int32_t d = 0; d < hd; ++d)
            att[size_t(h) * hd + d] +=
                score[size_t(p)] / sum * values_[size_t(l)][size_t(p) * kv_dim + kvh * hd + d];
      }
      std::vector<double> o = matvec(L.wo.values, att, dim);
      for (int32_t i = 0; i < dim; ++i) x[i] += o[i];
      xn = rmsnorm(x, L.ffn_norm);
      std::vector<double> gate = matvec(L.w1.values, xn, c_.hidden_dim), up = matvec(L.w3.values, xn, c_.hidden_dim);
      for (int32_t i = 0; i < c_.hidden_dim; ++i)
        gate[i] = gate[i] / (1.0 + std::exp(-gate[i])) * up[i];
      std::vector<double> down = matvec(L.w2.values, gate, dim);
      for (int32_t i = 0; i < dim; ++i) x[i] += down[i];
    }
    const std::vector<double> xf = rmsnorm(x, w_.final_norm);
    const std::vector<double> logits =
        matvec(c_.tied_embeddings ? w_.token_embedding.values : w_.classifier.values, xf, c_.vocab_size);
    return std::vector<float>(logits.begin(), logits.end());
  }

 private:
  std::vector<double> rmsnorm(const std::vector<double>& x, const std::vector<float>& weight) const {
    double ss = 0.0;
    for (double v : x) ss += v * v;
    const double inv = 1.0 / std::sqrt(ss / double(x.size()) + c_.rms_eps);
    std::vector<double> out(x.size());
    for (size_t i = 0; i < x.size(); ++i) out[i] = x[i] * inv * weight[i];
    return out;
  }

  void head_norm(double* head, const std::vector<float>& weight) const {
    const std::vector<double> x(head, head + weight.size());
    const std::vector<double> y = rmsnorm(x, weight);
    std::copy(y.begin(), y.end(), head);
  }

  // W [rows, x.size()] times x.
  static std::vector<double> matvec(const std::vector<float>& w, const std::vector<double>& x,
                                    int32_t rows) {
    std::vector<double> y(size_t(rows), 0.0);
    for (int32_t r = 0; r < rows; ++r)
      for (size_t i = 0; i < x.size(); ++i) y[size_t(r)] += w[size_t(r) * x.size() + i] * x[i];
    return y;
  }

  void rope(double* head, int32_t pos) const {
    const int32_t rot = c_.rotary_dim(), half = rot / 2;
    for (int32_t i = 0; i < half; ++i) {
      double freq = std::pow(double(c_.rope_theta), -2.0 * i / rot);
      if (!w_.rope_freq_factors.empty()) freq /= w_.rope_freq_factors[size_t(i)];  // Llama 3.1
      if (c_.rope_scaling == RopeScaling::linear) freq /= c_.rope_scaling_factor;
      const double angle = pos * freq;
      const bool adjacent = c_.rope_layout == RopeLayout::adjacent_pairs;
      double& a = head[adjacent ? 2 * i : i];
      double& b = head[adjacent ? 2 * i + 1 : i + half];
      const double a0 = a, b0 = b;
      a = a0 * std::cos(angle) - b0 * std::sin(angle);
      b = a0 * std::sin(angle) + b0 * std::cos(angle);
    }
  }

  const ModelConfig& c_;
  const ModelWeights& w_;
  int32_t pos_ = 0;
  std::vector<std::vector<double>> keys_, values_;  // [layer][pos * kv_dim]
};

}  // namespace conveyor::testing
