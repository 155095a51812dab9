// Drives a Transformer the way the engine does, for tests: sequences own block
// tables grown from a shuffled free list (so tables are not contiguous and
// sequences interleave), prompts run in chunks, and every sequence with
// unprocessed tokens joins each step.
#pragma once

#include <algorithm>
#include <cstdint>
#include <numeric>
#include <random>
#include <vector>

#include "model/batch.hpp"
#include "backends/cpu/transformer.hpp"
#include "model/kv_cache.hpp"

namespace conveyor::testing {

class PagedDriver {
 public:
  struct Row {
    int32_t seq;  // index from add()
    int32_t pos;  // position of the token these logits follow
    std::vector<float> logits;
  };

  PagedDriver(Transformer& model, int32_t block_size, int32_t n_blocks, uint32_t seed,
              KvDtype dtype = KvDtype::f32)
      : model_(model),
        cache_(KvCacheShape::for_model(model.config(), block_size, n_blocks, dtype)),
        block_size_(block_size) {
    free_.resize(size_t(n_blocks));
    std::iota(free_.begin(), free_.end(), 0);
    std::shuffle(free_.begin(), free_.end(), std::mt19937(seed));
  }

  // A sequence whose first `prompt_len` tokens are its prompt (-1: all
  // given here); the rest, and what append() adds, count as generated
  // (ForwardBatch::seq_prompt_len).
  int32_t add(std::vector<int32_t> tokens, int32_t prompt_len = -1) {
    const int32_t prompt = prompt_len < 0 ? int32_t(tokens.size()) : prompt_len;
    seqs_.push_back({std::move(tokens), prompt, 0, {}});
    return int32_t(seqs_.size() - 1);
  }
  void append(int32_t seq, int32_t token) { seqs_[size_t(seq)].tokens.push_back(token); }
  const std::vector<int32_t>& tokens(int32_t seq) const { return seqs_[size_t(seq)].tokens; }
  bool pending() const {
    for (const Seq& s : seqs_)
      if (s.done < int32_t(s.tokens.size())) return true;
    return false;
  }

  // One forward call: each sequence with unprocessed tokens brings up to
  // `chunk` of them. Logits come back for spans that reach the sequence's last
  // known token, or for every span when `logits_every_span`.
  std::vector<Row> step(int32_t chunk, bool logits_every_span = false) {
    batch_.clear();
    std::vector<std::pair<int32_t, int32_t>> wanted;  // (seq, pos) per logits row
    for (size_t i = 0; i < seqs_.size(); ++i) {
      Seq& s = seqs_[i];
      const int32_t n = std::min<int32_t>(chunk, int32_t(s.tokens.size()) - s.done);
      if (n <= 0) continue;
      const int32_t end = s.done + n;
      while (int32_t(s.table.size()) * block_size_ < end) {
        s.table.push_back(free_.back());
        free_.pop_back();
      }
      const bool logits = logits_every_span || end == int32_t(s.tokens.size());
      batch_.add_sequence({s.tokens.data() + s.done, size_t(n)}, s.done, s.table, logits, s.prompt_len);
      if (logits) wanted.emplace_back(int32_t(i), end - 1);
      s.done = end;
    }
    std::vector<float> logits;
    model_.forward(batch_, cache_, logits);
    const size_t vocab = size_t(model_.config().vocab_size);
    std::vector<Row> rows;
    for (size_t r = 0; r < wanted.size(); ++r)
      rows.push_back({wanted[r].first, wanted[r].second,
                      std::vector<float>(logits.begin() + r * vocab,
                                         logits.begin() + (r + 1) * vocab)});
    return rows;
  }

 private:
  struct Seq {
    std::vector<int32_t> tokens;
    int32_t prompt_len;
    int32_t done;  // tokens already in the cache
    std::vector<int32_t> table;
  };
  Transformer& model_;
  KvCache cache_;
  int32_t block_size_;
  std::vector<int32_t> free_;
  std::vector<Seq> seqs_;
  ForwardBatch batch_;
};

inline int32_t argmax(const std::vector<float>& v) {
  return int32_t(std::max_element(v.begin(), v.end()) - v.begin());
}

}  // namespace conveyor::testing
