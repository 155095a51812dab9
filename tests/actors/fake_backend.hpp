// A fake backend for engine tests: a StepRunner and a SwapEngine over a
// "KV cache" that stores, in each slot, the token id written there.
//
// The next token of a sequence is a hash of every token read back through
// its block table, so a wrong block table, a prefix-cache hit on a block
// whose KV was never written, a lost swap copy or a missing copy-on-write
// changes the output. expected_tokens() computes the same function from the
// token list alone: a request's output must equal it whatever the batching,
// preemption or caching did.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <mutex>
#include <span>
#include <unordered_map>
#include <vector>

#include "engine/step_runner.hpp"
#include "engine/swap_engine.hpp"
#include "backends/host_sampling.hpp"

namespace conveyor::testing {

inline uint64_t mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ULL + (h << 6) + (h >> 2);
  return h * 0xff51afd7ed558ccdULL;
}

// The fake model: next token after `tokens` (all of them, in order). A
// sequence whose sampler has a seed mixes it in, so the n samples of one
// prompt (seeds seed + i) diverge as real sampling would.
inline int32_t fake_next_token(std::span<const int32_t> tokens, int32_t vocab, uint64_t seed = 0) {
  uint64_t h = 1469598103934665603ULL;
  if (seed != 0) h = mix(h, seed);
  for (int32_t t : tokens) h = mix(h, uint64_t(uint32_t(t)));
  return int32_t(h % uint64_t(vocab));
}

// A fake model whose output falls into short cycles, as a small model's
// greedy output does (speculative decoding's drafts then hit, and a match
// of one token only sometimes): the next token depends on the first 8
// tokens, the last one, and the one before it modulo 3.
inline int32_t fake_next_token_cyclic(std::span<const int32_t> tokens, int32_t vocab, uint64_t seed = 0) {
  uint64_t h = 1099511628211ULL;
  if (seed != 0) h = mix(h, seed);
  const size_t n = tokens.size();
  for (size_t i = 0; i < std::min<size_t>(8, n); ++i) h = mix(h, uint64_t(uint32_t(tokens[i])));
  if (n >= 1) h = mix(h, uint64_t(uint32_t(tokens[n - 1])));
  if (n >= 2) h = mix(h, uint64_t(uint32_t(tokens[n - 2])) % 3);
  return int32_t(h % uint64_t(vocab));
}

// What a request must produce: tokens until a stop token or max_tokens.
inline std::vector<int32_t> expected_tokens(std::vector<int32_t> tokens, int32_t vocab,
                                            int32_t max_tokens, std::span<const int32_t> eos,
                                            int32_t context_length, uint64_t seed = 0,
                                            bool cyclic = false) {
  std::vector<int32_t> out;
  while (int32_t(out.size()) < max_tokens && int32_t(tokens.size()) < context_length) {
    const int32_t t = cyclic ? fake_next_token_cyclic(tokens, vocab, seed) : fake_next_token(tokens, vocab, seed);
    if (std::find(eos.begin(), eos.end(), t) != eos.end()) break;
    out.push_back(t);
    tokens.push_back(t);
  }
  return out;
}

struct FakeKv {
  FakeKv(int32_t block_size, int32_t num_blocks, int32_t num_host_blocks)
      : block_size(block_size),
        device(size_t(block_size) * num_blocks, -1),
        host(size_t(block_size) * std::max(num_host_blocks, 1), -1) {}
  int32_t block_size;
  std::vector<int32_t> device;
  std::vector<int32_t> host;
  std::mutex mutex;  // the swap engine runs on another thread in actor tests
};

// Pipelined (StepRunner::launch), it runs a step as late as a device may:
// when finish() asks for it, after the steps launched behind it have been
// queued and their results' effects on the scheduler (swaps, freed and
// reused blocks) may have begun. A step is ready on the second poll.
class FakeRunner final : public StepRunner {
 public:
  FakeRunner(std::shared_ptr<FakeKv> kv, int32_t vocab, bool pipelined = false)
      : kv_(std::move(kv)), vocab_(vocab), pipelined_(pipelined) {}

  bool pipelined() const override { return pipelined_; }
  bool verifies_drafts() const override { return true; }
  // The fake model (fake_next_token_cyclic when set); before any request.
  void set_cyclic(bool cyclic) { cyclic_ = cyclic; }
  void launch(StepPlan& plan) override {
    launched_.push_back(std::move(plan));
    polls_ = 0;
    max_launched_ = std::max(max_launched_, launched_.size());
  }
  bool ready() override { return ++polls_ > 1; }
  StepResult finish() override {
    StepResult result = run(launched_.front());
    launched_.pop_front();
    return result;
  }
  // The most steps launched and unfinished at once (2 when the executor pipelines).
  size_t max_launched() const { return max_launched_; }

  StepResult run(StepPlan& plan) override {
    samples_.prepare(plan);
    std::lock_guard lock(kv_->mutex);
    const int32_t bs = kv_->block_size;
    auto& d = kv_->device;
    for (const auto& [src, dst] : plan.copies)
      std::copy_n(d.begin() + size_t(src) * bs, bs, d.begin() + size_t(dst) * bs);
    for (seq_id id : plan.retired) seeds_.erase(id);
    for (const auto& [id, params] : plan.new_samplers) seeds_[id] = params.has_seed ? params.seed : 0;
    StepResult result;
    result.iteration = plan.iteration;
    const ForwardBatch& b = plan.batch;
    size_t next_fork = 0;
    for (int32_t s = 0; s < b.num_seqs(); ++s) {
      auto tokens = b.seq_tokens(s);
      auto table = b.block_table(s);
      const int32_t start = b.seq_start_pos[s];
      for (size_t j = 0; j < tokens.size(); ++j) {
        const int32_t pos = start + int32_t(j);
        d[size_t(table[pos / bs]) * bs + pos % bs] = tokens[j];
      }
      const int32_t rows = b.want_logits[s];
      if (rows == 0) continue;
      const int32_t end = start + int32_t(tokens.size());
      // A verify step (rows > 1): row i reads the KV up to its own position,
      // drafts included, and the rows go on while the samples equal the drafts.
      for (int32_t row = 0; row < rows; ++row) {
        const int32_t len = end - rows + 1 + row;
        read_.resize(size_t(len));
        for (int32_t pos = 0; pos < len; ++pos) read_[pos] = d[size_t(table[pos / bs]) * bs + pos % bs];
        // The sequence, then the samples forked from it (listed in plan order).
        for (seq_id seq = plan.seq_ids[s];;) {
          SampledToken t;
          t.seq = seq;
          t.result.token = cyclic_ ? fake_next_token_cyclic(read_, vocab_, seeds_[seq])
                                   : fake_next_token(read_, vocab_, seeds_[seq]);
          result.tokens.push_back(t);
          if (next_fork == plan.forks.size() || plan.forks[next_fork].first != plan.seq_ids[s]) break;
          seq = plan.forks[next_fork++].second;
        }
        if (row + 1 < rows && result.tokens.back().result.token != tokens[tokens.size() - size_t(rows - 1 - row)])
          break;
      }
    }
    samples_.record(result);
    ++steps_;
    return result;
  }

  void reset() override {
    seeds_.clear();
    samples_.clear();
    launched_.clear();
  }

  int64_t steps() const { return steps_; }

 private:
  std::shared_ptr<FakeKv> kv_;
  int32_t vocab_;
  std::vector<int32_t> read_;
  std::unordered_map<seq_id, uint64_t> seeds_;
  SampleMemory samples_;  // fills the placeholders of plans built a step ahead
  int64_t steps_ = 0;
  bool pipelined_ = false;
  bool cyclic_ = false;
  std::deque<StepPlan> launched_;
  size_t max_launched_ = 0;
  int polls_ = 0;
};

class FakeSwapEngine final : public SwapEngine {
 public:
  explicit FakeSwapEngine(std::shared_ptr<FakeKv> kv) : kv_(std::move(kv)) {}
  // Copies at once, as the CPU engine does.
  void submit(const SwapOrder& order, Done done) override {
    copy(order);
    done(0.0);
  }

  void copy(const SwapOrder& order) {
    std::lock_guard lock(kv_->mutex);
    const int32_t bs = kv_->block_size;
    for (const auto& [from, to] : order.blocks) {
      if (order.direction == SwapDirection::out)
        std::copy_n(kv_->device.begin() + size_t(from) * bs, bs, kv_->host.begin() + size_t(to) * bs);
      else
        std::copy_n(kv_->host.begin() + size_t(from) * bs, bs, kv_->device.begin() + size_t(to) * bs);
    }
  }

 private:
  std::shared_ptr<FakeKv> kv_;
};

}  // namespace conveyor::testing
