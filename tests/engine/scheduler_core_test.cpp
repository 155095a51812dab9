// Deterministic tests of the scheduler and the block manager: the same
// SchedulerCore, BlockManager adapter and policies the actors run, driven
// step by step in one thread with the fake backend (tests/actors/fake_backend.hpp).
// Swap copies complete a random number of iterations after they were ordered.
#include <gtest/gtest.h>

#include <cstdlib>
#include <deque>
#include <map>
#include <optional>
#include <random>

#include "actors/block_manager_actor.hpp"
#include "engine/scheduler_core.hpp"
#include "tests/actors/fake_backend.hpp"

namespace conveyor {
namespace {

using testing::FakeKv;
using testing::FakeRunner;
using testing::FakeSwapEngine;

constexpr int32_t kVocab = 97;
constexpr int32_t kContext = 256;

struct Sample {
  std::vector<int32_t> tokens;
  int finals = 0;
  FinishReason finish = FinishReason::none;
  int32_t completion_tokens = -1;  // the final event's
  bool cancelled = false;
};

struct Record {
  std::vector<int32_t> prompt;
  int32_t max_tokens = 0;
  uint64_t seed = 0;                // sample i runs with seed + i (0: unseeded)
  std::vector<Sample> samples;      // n
  int request_done = 0;             // events that said the request ended
  bool cancelled = false;
};

struct SimOptions {
  int32_t block_size = 4;
  int32_t num_blocks = 24;
  int32_t num_host_blocks = 24;
  int32_t max_num_seqs = 8;
  int32_t max_batched_tokens = 32;
  int32_t prefill_chunk = 8;
  PreemptionMode preemption = PreemptionMode::recompute;
  AdmissionMode admission = AdmissionMode::watermark;
  BatchingMode batching = BatchingMode::continuous;
  bool prefix_caching = true;
  bool prefix_wait = true;  // wait for a shared prefix another request computes
  bool overlap = false;  // plan the next step while one is outstanding
  SchedulingPolicy scheduling = SchedulingPolicy::fcfs;
  double target_itl = 0;  // seconds; then steps take a synthetic time (step_seconds)
  std::vector<int32_t> eos = {0};
  // Speculative decoding (ngram, 4 drafts, every decoding sequence): the
  // fake model is then the cyclic one, whose drafts hit and miss.
  bool speculate = false;
};

// The synthetic machine of the latency-target tests: 2 ms + 0.1 ms per
// decode token + 0.4 ms per prefill token.
double step_seconds(const StepPlan& plan) {
  int32_t decode = 0, prefill = 0;
  for (int32_t s = 0; s < plan.batch.num_seqs(); ++s) {
    const int32_t n = plan.batch.seq_token_begin[size_t(s) + 1] - plan.batch.seq_token_begin[size_t(s)];
    (n == 1 && plan.batch.want_logits[size_t(s)] ? decode : prefill) += n;
  }
  return 2e-3 + 1e-4 * decode + 4e-4 * prefill;
}

class Simulation {
 public:
  explicit Simulation(const SimOptions& o, uint64_t seed = 1)
      : options_(o),
        bm_(o.num_blocks, o.block_size, o.prefix_caching, o.num_host_blocks),
        core_(config(o)),
        admission_(make_admission_policy(o.admission)),
        preemption_(o.preemption),
        kv_(std::make_shared<FakeKv>(o.block_size, o.num_blocks, o.num_host_blocks)),
        runner_(kv_, kVocab),
        swap_(kv_),
        rng_(seed) {
    runner_.set_cyclic(o.speculate);
  }

  static SchedulerConfig config(const SimOptions& o) {
    SchedulerConfig c;
    c.block_size = o.block_size;
    c.num_blocks = o.num_blocks;
    c.num_host_blocks = o.num_host_blocks;
    c.max_num_seqs = o.max_num_seqs;
    c.max_batched_tokens = o.max_batched_tokens;
    c.prefill_chunk = o.prefill_chunk;
    c.max_waiting = 100000;
    c.context_length = kContext;
    c.vocab_size = kVocab;
    c.eos_ids = o.eos;
    c.batching = o.batching;
    c.scheduling_policy = o.scheduling;
    c.target_itl_seconds = o.target_itl;
    c.aging_interval_seconds = 50.0;  // in simulated seconds (one per iteration)
    c.overlap = o.overlap;
    c.prefix_wait = o.prefix_caching && o.prefix_wait;
    if (o.speculate) {
      c.speculative.method = SpeculativeMethod::ngram;
      c.speculative.num_tokens = 4;
      c.speculative.disable_batch = 1000;
    }
    return c;
  }

  Status submit(request_id id, std::vector<int32_t> prompt, int32_t max_tokens, int32_t priority = 0,
                int32_t n = 1, uint64_t seed = 0) {
    GenerateRequest r;
    r.id = id;
    r.prompt = prompt;
    r.sampling.temperature = 0;
    r.sampling.max_tokens = max_tokens;
    r.sampling.has_seed = seed != 0;
    r.sampling.seed = seed;
    r.priority = priority;
    r.n = n;
    Status s = core_.submit(std::move(r), now_);
    if (s) records_[id] = Record{std::move(prompt), max_tokens, seed, std::vector<Sample>(size_t(n)), 0, false};
    return s;
  }

  void cancel(request_id id) {
    records_[id].cancelled = true;
    core_.cancel(id);
  }

  void cancel_sample(request_id id, int32_t index) {
    records_[id].samples.at(size_t(index)).cancelled = true;
    core_.cancel_sample(id, index);
  }

  // One iteration, as the scheduler actor sequences it: with overlap, the
  // outstanding step's result is applied after the next plan is built, and
  // that step runs (on the executor's thread, in the actor engine) before or
  // after the build.
  void iterate() {
    now_ += 1.0;
    std::optional<StepResult> early;
    if (outstanding_ && rng_() % 2) early = execute(*outstanding_);
    std::optional<StepPlan> next;
    if (core_.can_build()) {
      next = build();
      if (::testing::Test::HasFatalFailure()) return;
      if (next->batch.num_seqs() == 0) next.reset();
    }
    if (outstanding_) core_.apply_step(early ? *early : execute(*outstanding_), now_);
    outstanding_ = std::move(next);
    if (!options_.overlap && outstanding_) {
      core_.apply_step(execute(*outstanding_), now_);
      outstanding_.reset();
    }
    ++iteration_;
    // Swap copies land a few iterations later, as they do on a copy thread.
    complete_swaps(iteration_);
    for (const FinishedSequence& f : core_.take_finished()) admission_->record_finished(f.generated);
    collect();
    ASSERT_TRUE(bm_.check_invariants().is_ok()) << bm_.check_invariants().error().message;
  }

  StepResult execute(StepPlan plan) {
    StepResult r = runner_.run(plan);  // fills the plan's placeholders first
    if (options_.target_itl > 0) {
      r.forward_seconds = step_seconds(plan);
      step_times_.push_back(r.forward_seconds);
    }
    for (int32_t token : plan.batch.tokens) EXPECT_GE(token, 0) << "a placeholder left unfilled";
    ++steps_run_;
    return r;
  }

  StepPlan build() {
    if (auto q = core_.begin_iteration(now_)) core_.apply_admission((*admission_)(*q));
    collect();
    AllocationBatch batch = core_.build_allocation();
    slot_requests_ += int64_t(batch.requests.size());
    for (int round = 0;; ++round) {
      EXPECT_LT(round, 1000) << "preemption does not converge";
      if (round >= 1000) return {};
      AllocationResult r = apply_allocation_batch(bm_, batch);
      auto q = core_.apply_allocation(r);
      for (SwapOrder& o : core_.take_swap_orders())
        in_flight_.push_back({iteration_ + int(rng_() % 3), std::move(o)});
      if (!q) break;
      // Copies may complete while the preemption policy thinks, as they do
      // with actors: the core must not pick a sequence the block manager
      // still sees as swapping in.
      if (rng_() % 2) complete_swaps(iteration_ + 1);
      batch = core_.apply_preemption(preemption_(*q));
    }
    StepPlan plan = core_.build_step();
    // A step never exceeds the token budget, preemption retries included.
    EXPECT_LE(plan.batch.num_tokens(), options_.max_batched_tokens) << "iteration " << iteration_;
    for (int32_t token : plan.batch.tokens) placeholders_ += token < 0 ? 1 : 0;
    computed_tokens_ += plan.batch.num_tokens();
    return plan;
  }

  void complete_swaps(int64_t up_to) {
    for (auto it = in_flight_.begin(); it != in_flight_.end();) {
      if (it->first > up_to) {
        ++it;
        continue;
      }
      copy_and_wait(swap_, it->second);
      core_.on_swap_done(SwapDone{it->second.seq, it->second.direction, 0.0});
      it = in_flight_.erase(it);
    }
  }

  void collect() {
    for (const TokenEvent& e : core_.take_events()) {
      Record& r = records_.at(e.id);
      ASSERT_EQ(r.request_done, 0) << "event after the request ended for " << e.id;
      ASSERT_LT(size_t(e.index), r.samples.size()) << "request " << e.id;
      Sample& sample = r.samples[size_t(e.index)];
      ASSERT_EQ(sample.finals, 0) << "event after the final one for " << e.id << "." << e.index;
      if (e.token >= 0) sample.tokens.push_back(e.token);
      if (e.finish != FinishReason::none) {
        ++sample.finals;
        sample.finish = e.finish;
        sample.completion_tokens = e.details().completion_tokens;
      }
      if (e.request_done) {
        ++r.request_done;
        for (const Sample& other : r.samples)
          ASSERT_EQ(other.finals, 1) << "request " << e.id << " ended before all its samples";
      }
    }
  }

  bool run_until_idle(int max_iterations) {
    for (int i = 0; i < max_iterations && !(core_.idle() && in_flight_.empty() && !outstanding_); ++i) {
      iterate();
      if (::testing::Test::HasFatalFailure()) return false;
    }
    return core_.idle() && in_flight_.empty();
  }

  // Every request ended exactly once, each of its samples once; uncancelled
  // samples with the fake model's tokens for their seeds.
  void check_outputs() const {
    for (const auto& [id, r] : records_) {
      ASSERT_EQ(r.request_done, 1) << "request " << id;
      for (size_t i = 0; i < r.samples.size(); ++i) {
        const Sample& sample = r.samples[i];
        ASSERT_EQ(sample.finals, 1) << "request " << id << "." << i;
        if ((r.cancelled || sample.cancelled) && sample.finish == FinishReason::cancelled) continue;
        ASSERT_NE(sample.finish, FinishReason::error) << "request " << id << "." << i;
        const uint64_t seed = r.seed == 0 ? 0 : r.seed + i;
        EXPECT_EQ(sample.tokens, testing::expected_tokens(r.prompt, kVocab, r.max_tokens, options_.eos,
                                                          kContext, seed, options_.speculate))
            << "request " << id << "." << i;
        // Its usage counts every token it generated, the stop token too (as
        // llama.cpp and vLLM count it), which no event carries.
        EXPECT_EQ(sample.completion_tokens, int32_t(sample.tokens.size()) + (sample.finish == FinishReason::stop))
            << "request " << id << "." << i;
      }
    }
  }

  void check_all_free() const {
    const BlockManagerStats s = bm_.stats();
    EXPECT_EQ(s.used_blocks, 0);
    EXPECT_EQ(s.host_used_blocks, 0);
    EXPECT_EQ(s.free_blocks + s.cached_blocks, s.total_blocks);
    EXPECT_TRUE(bm_.check_invariants().is_ok());
  }

  SchedulerCore& core() { return core_; }
  BlockManager& bm() { return bm_; }
  const std::map<request_id, Record>& records() const { return records_; }
  int64_t iterations() const { return iteration_; }
  int64_t steps_run() const { return steps_run_; }
  int64_t placeholders() const { return placeholders_; }
  int64_t computed_tokens() const { return computed_tokens_; }
  int64_t slot_requests() const { return slot_requests_; }  // in iterations' first batches
  const std::vector<double>& step_times() const { return step_times_; }
  std::mt19937_64& rng() { return rng_; }

 private:
  SimOptions options_;
  BlockManager bm_;
  SchedulerCore core_;
  std::unique_ptr<AdmissionPolicy> admission_;
  PreemptionPolicy preemption_;
  std::shared_ptr<FakeKv> kv_;
  FakeRunner runner_;
  FakeSwapEngine swap_;
  std::optional<StepPlan> outstanding_;  // sent to the "executor", result not applied
  int64_t steps_run_ = 0;
  int64_t placeholders_ = 0;
  int64_t computed_tokens_ = 0;
  int64_t slot_requests_ = 0;
  std::vector<double> step_times_;  // synthetic, with a latency target
  std::mt19937_64 rng_;
  std::deque<std::pair<int64_t, SwapOrder>> in_flight_;
  std::map<request_id, Record> records_;
  double now_ = 0.0;
  int64_t iteration_ = 0;
};

std::vector<int32_t> random_prompt(std::mt19937_64& rng, int32_t min_len, int32_t max_len) {
  std::vector<int32_t> p(size_t(min_len + int32_t(rng() % uint64_t(max_len - min_len + 1))));
  for (int32_t& t : p) t = 1 + int32_t(rng() % (kVocab - 1));
  return p;
}

TEST(SchedulerCore, SingleRequestMatchesTheModel) {
  Simulation sim(SimOptions{});
  ASSERT_TRUE(sim.submit(1, {5, 6, 7, 8, 9}, 20).is_ok());
  ASSERT_TRUE(sim.run_until_idle(100));
  sim.check_outputs();
  sim.check_all_free();
}

TEST(SchedulerCore, RejectsBadRequests) {
  Simulation sim(SimOptions{});
  EXPECT_EQ(sim.submit(1, {}, 4).error().code, Errc::invalid_argument);
  EXPECT_EQ(sim.submit(2, {kVocab}, 4).error().code, Errc::invalid_argument);
  EXPECT_EQ(sim.submit(3, std::vector<int32_t>(kContext, 1), 4).error().code, Errc::invalid_argument);
  // More blocks than the whole cache holds.
  EXPECT_EQ(sim.submit(4, std::vector<int32_t>(24 * 4, 1), 4).error().code, Errc::invalid_argument);
}

TEST(SchedulerCore, WaitingQueueIsBounded) {
  SimOptions o;
  Simulation sim(o);
  SchedulerConfig c = Simulation::config(o);
  c.max_waiting = 2;
  SchedulerCore core(c);
  GenerateRequest r;
  r.prompt = {1, 2};
  for (request_id id = 1; id <= 2; ++id) {
    r.id = id;
    ASSERT_TRUE(core.submit(r, 0).is_ok());
  }
  r.id = 3;
  Status s = core.submit(r, 0);
  ASSERT_FALSE(s.is_ok());
  EXPECT_EQ(s.error().code, Errc::resource_exhausted);
}

TEST(SchedulerCore, FinishedSlotIsRefilledAtTheNextIteration) {
  SimOptions o;
  o.max_num_seqs = 2;
  o.num_blocks = 64;
  Simulation sim(o);
  ASSERT_TRUE(sim.submit(1, {3, 4}, 1).is_ok());   // finishes after its first token
  ASSERT_TRUE(sim.submit(2, {5, 6}, 10).is_ok());
  ASSERT_TRUE(sim.submit(3, {7, 8}, 10).is_ok());  // waits for a slot
  sim.iterate();  // 1 and 2 prefill and sample; 1 finishes
  EXPECT_EQ(sim.records().at(1).samples[0].finals, 1);
  EXPECT_EQ(sim.core().num_running(), 1u);
  sim.iterate();  // 3 is admitted at once
  EXPECT_EQ(sim.core().num_running(), 2u);
  EXPECT_EQ(sim.records().at(3).samples[0].tokens.size(), 1u);
  ASSERT_TRUE(sim.run_until_idle(100));
  sim.check_outputs();
}

TEST(SchedulerCore, LongPromptIsChunkedAndDecodesKeepRunning) {
  SimOptions o;
  o.num_blocks = 64;
  o.prefill_chunk = 8;
  o.max_batched_tokens = 10;
  Simulation sim(o);
  ASSERT_TRUE(sim.submit(1, {1, 2, 3}, 30).is_ok());
  sim.iterate();
  ASSERT_TRUE(sim.submit(2, random_prompt(sim.rng(), 100, 100), 5).is_ok());
  // While the 100-token prompt prefills in chunks, request 1 gets a token every iteration.
  for (int i = 0; i < 10; ++i) {
    const size_t before = sim.records().at(1).samples[0].tokens.size();
    sim.iterate();
    EXPECT_EQ(sim.records().at(1).samples[0].tokens.size(), before + 1) << "iteration " << i;
  }
  ASSERT_TRUE(sim.run_until_idle(200));
  sim.check_outputs();
  sim.check_all_free();
}

// Preemption under a budget smaller than one prefill chunk: the budget check
// in Simulation::build holds on every step. (A sequence short of blocks is
// re-planned after the preemption within the share of the budget it had; it
// once took a whole chunk, which only a prefill that needs new blocks could
// exceed, and admission gives a prompt all its blocks at once.)
// Requests submitted together with the same uncached prefix: with
// prefix_wait the first computes it and the others wait for it, then find it
// in the prefix cache; without, each computes it. Outputs are the same.
TEST(SchedulerCore, RequestsArrivingTogetherWaitForASharedPrefixBeingComputed) {
  int64_t computed[2] = {0, 0};
  for (int wait = 0; wait < 2; ++wait) {
    SimOptions o;
    o.num_blocks = 256;
    o.max_num_seqs = 16;
    o.max_batched_tokens = 1024;  // room for every prompt in one iteration
    o.prefill_chunk = 64;
    o.prefix_wait = wait == 1;
    o.overlap = wait == 1;  // either way of planning
    Simulation sim(o, 3);
    std::vector<int32_t> shared;
    for (int32_t i = 0; i < 48; ++i) shared.push_back(1 + (i * 11) % (kVocab - 1));  // 12 full blocks
    for (request_id id = 1; id <= 12; ++id) {
      std::vector<int32_t> prompt = shared;
      prompt.push_back(1 + int32_t(id));
      prompt.push_back(2 + int32_t(id));
      ASSERT_TRUE(sim.submit(id, prompt, 6).is_ok());
    }
    ASSERT_TRUE(sim.run_until_idle(5000));
    sim.check_outputs();
    sim.check_all_free();
    computed[wait] = sim.computed_tokens();
    if (wait == 1) {
      EXPECT_GE(sim.core().prefix_waits(), 10u);
    }
    else EXPECT_EQ(sim.core().prefix_waits(), 0u);
  }
  // Without waiting every request computes the 48 shared tokens; with it
  // about one does (the rest: 2 tokens of tail and the decodes each).
  EXPECT_GE(computed[0], 12 * 48) << "with waiting: " << computed[1];
  EXPECT_LE(computed[1], 48 + 12 * (2 + 6) + 48) << "the prefix was computed more than twice";
}

TEST(SchedulerCore, PreemptionUnderATightBudgetStaysWithinIt) {
  for (PreemptionMode mode : {PreemptionMode::recompute, PreemptionMode::swap}) {
    SimOptions o;
    o.num_blocks = 14;
    o.num_host_blocks = 32;
    o.prefill_chunk = 8;
    o.max_batched_tokens = 6;
    o.preemption = mode;
    o.scheduling = SchedulingPolicy::priority;
    Simulation sim(o, 7);
    auto& rng = sim.rng();
    for (request_id id = 1; id <= 300; ++id) {
      // One draw at a time: the order in which a call's arguments are
      // evaluated is unspecified (gcc: right to left, clang: left to right),
      // and this workload must be the same with both to preempt.
      const int32_t priority = int32_t(rng() % 3);
      const int32_t max_tokens = 1 + int32_t(rng() % 12);
      const std::vector<int32_t> prompt = random_prompt(rng, 9, 40);
      ASSERT_TRUE(sim.submit(id, prompt, max_tokens, priority).is_ok());
      if (id % 3 == 0) sim.iterate();
      if (HasFatalFailure()) return;
    }
    ASSERT_TRUE(sim.run_until_idle(100000));
    sim.check_outputs();
    sim.check_all_free();
    EXPECT_GT(sim.core().preemptions(mode), 0u);
  }
}

TEST(SchedulerCore, PrefixCacheSkipsTheSharedPrefix) {
  SimOptions o;
  o.num_blocks = 64;
  Simulation sim(o);
  std::vector<int32_t> prompt = random_prompt(sim.rng(), 40, 40);
  ASSERT_TRUE(sim.submit(1, prompt, 5).is_ok());
  ASSERT_TRUE(sim.run_until_idle(100));
  const uint64_t hits_before = sim.bm().stats().hit_tokens;
  prompt.push_back(11);
  ASSERT_TRUE(sim.submit(2, prompt, 5).is_ok());
  ASSERT_TRUE(sim.run_until_idle(100));
  // 41 tokens: the first 40 (ten full blocks) were cached, all but the last block's worth
  // that must be recomputed for logits.
  EXPECT_EQ(sim.bm().stats().hit_tokens - hits_before, 40u);
  sim.check_outputs();
  sim.check_all_free();
}

// A batch of two (2 and 10 tokens to generate) and a third request that
// must wait for the whole batch.
SimOptions static_batch_options(BatchingMode mode) {
  SimOptions o;
  o.batching = mode;
  o.max_num_seqs = 2;
  o.num_blocks = 64;
  o.eos = {};
  return o;
}

void submit_static_batch(Simulation& sim) {
  ASSERT_TRUE(sim.submit(1, {3, 4}, 2).is_ok());
  ASSERT_TRUE(sim.submit(2, {5, 6}, 10).is_ok());
  ASSERT_TRUE(sim.submit(3, {7, 8}, 2).is_ok());
}

TEST(SchedulerCore, StaticBatchingWaitsForTheLongest) {
  Simulation sim(static_batch_options(BatchingMode::static_));
  submit_static_batch(sim);
  for (int i = 0; i < 9; ++i) sim.iterate();
  EXPECT_TRUE(sim.records().at(3).samples[0].tokens.empty()) << "admitted before the batch finished";
  ASSERT_TRUE(sim.run_until_idle(100));
  sim.check_outputs();
}

TEST(SchedulerCore, StaticPaddedKeepsFinishedRowsUntilTheBatchEnds) {
  Simulation sim(static_batch_options(BatchingMode::static_padded));
  submit_static_batch(sim);
  for (int i = 0; i < 4; ++i) sim.iterate();
  EXPECT_EQ(sim.records().at(1).samples[0].finals, 1) << "a padding row's client has its answer";
  EXPECT_EQ(sim.core().num_running(), 2u) << "the finished row keeps its place";
  for (int i = 0; i < 5; ++i) sim.iterate();
  EXPECT_TRUE(sim.records().at(3).samples[0].tokens.empty()) << "admitted before the batch finished";
  ASSERT_TRUE(sim.run_until_idle(100));
  sim.check_outputs();
  sim.check_all_free();
  // Ten steps for the first batch (two rows each, one of them padding after
  // step 2), two for the second.
  EXPECT_EQ(sim.steps_run(), 12);
}

TEST(SchedulerCore, ALowerPriorityValueRunsFirst) {
  SimOptions o;
  o.max_num_seqs = 1;
  o.num_blocks = 64;
  o.eos = {};
  o.scheduling = SchedulingPolicy::priority;
  Simulation sim(o);
  ASSERT_TRUE(sim.submit(1, {1, 2}, 3, 0).is_ok());
  ASSERT_TRUE(sim.submit(2, {3, 4}, 3, 0).is_ok());
  ASSERT_TRUE(sim.submit(3, {5, 6}, 3, -5).is_ok());  // vLLM: lower is sooner
  ASSERT_TRUE(sim.submit(4, {7, 8}, 3, 5).is_ok());
  sim.iterate();
  EXPECT_EQ(sim.records().at(3).samples[0].tokens.size(), 1u);
  EXPECT_TRUE(sim.records().at(1).samples[0].tokens.empty());
  ASSERT_TRUE(sim.run_until_idle(100));
  sim.check_outputs();
}

// Submits requests 1..`samples.size()` (prompt {1, 2, 3}, 4 tokens, greedy),
// request i with samples[i - 1] samples.
void submit_short_requests(SchedulerCore& core, const std::vector<int32_t>& samples) {
  GenerateRequest r;
  r.sampling.temperature = 0;
  r.sampling.max_tokens = 4;
  r.prompt = {1, 2, 3};
  for (size_t i = 0; i < samples.size(); ++i) {
    r.id = i + 1;
    r.n = samples[i];
    ASSERT_TRUE(core.submit(r, 0.0).is_ok());
  }
}

// A user's admission policy may admit anything: the core still runs no more
// than max_num_seqs sequences, a request counting as its samples.
TEST(SchedulerCore, AdmissionBeyondMaxNumSeqsIsCapped) {
  SimOptions o;
  o.max_num_seqs = 3;
  o.num_blocks = 64;
  SchedulerCore core(Simulation::config(o));
  submit_short_requests(core, {1, 2, 1, 1, 1});
  auto q = core.begin_iteration(0.0);
  ASSERT_TRUE(q.has_value());
  AdmissionDecision everyone;
  everyone.admitted = {1, 2, 3, 4, 5};
  core.apply_admission(everyone);
  const AllocationBatch batch = core.build_allocation();
  ASSERT_EQ(batch.requests.size(), 2u) << "1 and 2 (two samples) fill the three slots";
  EXPECT_EQ(batch.requests[0].seq, 1u);
  EXPECT_EQ(batch.requests[1].seq, 2u);
  EXPECT_EQ(core.num_waiting(), 3u);
}

// A candidate admitted twice is planned once (the scheduler actor died of
// the second plan: a user's policy listed every id twice).
TEST(SchedulerCore, ACandidateAdmittedTwiceIsPlannedOnce) {
  SimOptions o;
  o.num_blocks = 64;
  SchedulerCore core(Simulation::config(o));
  submit_short_requests(core, {1, 1});
  ASSERT_TRUE(core.begin_iteration(0.0).has_value());
  AdmissionDecision twice;
  twice.admitted = {1, 1, 2, 2, 1};
  core.apply_admission(twice);
  const AllocationBatch batch = core.build_allocation();
  ASSERT_EQ(batch.requests.size(), 2u);
  EXPECT_EQ(batch.requests[0].seq, 1u);
  EXPECT_EQ(batch.requests[1].seq, 2u);
  EXPECT_EQ(core.num_waiting(), 0u);
}

TEST(SchedulerCore, FcfsRefusesAPriority) {
  SimOptions o;
  Simulation sim(o);
  Status s = sim.submit(1, {1, 2}, 3, 2);
  ASSERT_FALSE(s.is_ok());
  EXPECT_NE(s.error().message.find("--scheduling-policy priority"), std::string::npos) << s.error().message;
  EXPECT_TRUE(sim.submit(2, {1, 2}, 3, 0).is_ok());
}

// Every slot taken by long streams of priority 5: an urgent request (0)
// preempts one of them by the configured mode at once rather than waiting
// for a stream to end, the victim loses nothing, and every output is exact.
TEST(SchedulerCore, AnUrgentRequestPreemptsALessUrgentOneWhenNoSlotIsFree) {
  for (PreemptionMode mode : {PreemptionMode::recompute, PreemptionMode::swap}) {
    for (bool overlap : {false, true}) {
      SimOptions o;
      o.max_num_seqs = 2;
      o.num_blocks = 64;
      o.eos = {};
      o.preemption = mode;
      o.overlap = overlap;
      o.scheduling = SchedulingPolicy::priority;
      Simulation sim(o, 3);
      ASSERT_TRUE(sim.submit(1, {1, 2, 3}, 60, 5).is_ok());
      ASSERT_TRUE(sim.submit(2, {4, 5, 6}, 60, 5).is_ok());
      for (int i = 0; i < 5; ++i) sim.iterate();
      ASSERT_FALSE(sim.records().at(2).samples[0].tokens.empty());
      ASSERT_TRUE(sim.submit(3, {7, 8, 9}, 4, 0).is_ok());
      for (int i = 0; i < 8; ++i) sim.iterate();
      EXPECT_EQ(sim.records().at(3).samples[0].tokens.size(), 4u)
          << "the urgent request waited (" << to_string(mode) << (overlap ? ", overlap" : "") << ")";
      EXPECT_EQ(sim.core().preemptions(mode), 1u) << to_string(mode) << (overlap ? ", overlap" : "");
      EXPECT_LT(sim.records().at(2).samples[0].tokens.size(), 20u) << "the newest stream is the victim";
      ASSERT_TRUE(sim.run_until_idle(1000));
      sim.check_outputs();
      sim.check_all_free();
    }
  }
}

// The KV cache is full of less urgent streams: the urgent request's blocks
// come from victims; equal or more urgent streams are never victims.
TEST(SchedulerCore, AnUrgentRequestPreemptsForBlocksOnlyLessUrgentOnes) {
  for (PreemptionMode mode : {PreemptionMode::recompute, PreemptionMode::swap}) {
    SimOptions o;
    o.block_size = 4;
    o.num_blocks = 16;
    o.num_host_blocks = 32;
    o.max_num_seqs = 8;
    o.eos = {};
    o.preemption = mode;
    o.scheduling = SchedulingPolicy::priority;
    Simulation sim(o, 5);
    ASSERT_TRUE(sim.submit(1, random_prompt(sim.rng(), 20, 20), 8, -1).is_ok());  // more urgent
    ASSERT_TRUE(sim.submit(2, random_prompt(sim.rng(), 20, 20), 8, 3).is_ok());
    for (int i = 0; i < 6; ++i) sim.iterate();
    ASSERT_TRUE(sim.submit(3, random_prompt(sim.rng(), 24, 24), 4, 0).is_ok());
    for (int i = 0; i < 10; ++i) sim.iterate();
    EXPECT_EQ(sim.records().at(3).samples[0].tokens.size(), 4u) << to_string(mode);
    EXPECT_EQ(sim.core().preemptions(mode), 1u) << to_string(mode);
    EXPECT_EQ(sim.records().at(1).samples[0].tokens.size(), 8u) << "the more urgent stream ran on";
    ASSERT_TRUE(sim.run_until_idle(1000));
    sim.check_outputs();
    sim.check_all_free();
  }
}

// Aging: a stream of priority 0 waiting behind a steady flow of urgent
// (-3) requests is admitted once it has waited three aging intervals.
TEST(SchedulerCore, AgingLetsALessUrgentRequestThrough) {
  SimOptions o;
  o.max_num_seqs = 1;
  o.num_blocks = 64;
  o.eos = {};
  o.scheduling = SchedulingPolicy::priority;
  Simulation sim(o);  // aging interval: 50 simulated seconds (iterations)
  ASSERT_TRUE(sim.submit(1000, {1, 2}, 2, 0).is_ok());
  request_id next = 1;
  int admitted_at = -1;
  for (int it = 0; it < 400 && admitted_at < 0; ++it) {
    if (it % 2 == 0) {
      ASSERT_TRUE(sim.submit(next++, {3, 4}, 2, -3).is_ok());
    }
    sim.iterate();
    if (!sim.records().at(1000).samples[0].tokens.empty()) admitted_at = it;
  }
  ASSERT_GE(admitted_at, 0) << "starved";
  EXPECT_GE(admitted_at, 140);
  EXPECT_LE(admitted_at, 160);
  ASSERT_TRUE(sim.run_until_idle(2000));
  sim.check_outputs();
}

// A latency target: 8 streams decode while 6 prompts of 200 tokens arrive.
// With the default budget (512-token chunks) a step that takes a prompt
// whole would cost ~83 ms on the synthetic machine; with a 20 ms target the
// core learns the costs and sizes chunks so that steps stay near the target
// once it has seen a few, and every output is exact.
TEST(SchedulerCore, ALatencyTargetSizesThePrefillChunks) {
  SimOptions o;
  o.num_blocks = 512;
  o.max_num_seqs = 16;
  o.max_batched_tokens = 2048;
  o.prefill_chunk = 512;
  o.eos = {};
  o.target_itl = 0.02;
  Simulation sim(o, 9);
  for (request_id id = 1; id <= 8; ++id) ASSERT_TRUE(sim.submit(id, random_prompt(sim.rng(), 4, 8), 150).is_ok());
  for (int i = 0; i < 10; ++i) sim.iterate();
  for (request_id id = 100; id < 106; ++id) {
    ASSERT_TRUE(sim.submit(id, random_prompt(sim.rng(), 200, 200), 4).is_ok());
    for (int i = 0; i < 3; ++i) sim.iterate();
  }
  ASSERT_TRUE(sim.run_until_idle(5000));
  sim.check_outputs();
  const std::vector<double>& t = sim.step_times();
  ASSERT_GT(t.size(), 40u);
  double worst = 0, prefill_steps = 0;
  for (size_t i = 20; i < t.size(); ++i) {
    worst = std::max(worst, t[i]);
    prefill_steps += t[i] > 4e-3 ? 1 : 0;  // more than the decodes alone
  }
  EXPECT_LE(worst, 1.25 * o.target_itl) << "a step overshot the target";
  EXPECT_GE(worst, 0.6 * o.target_itl) << "the target left prefill nearly idle";
  EXPECT_GT(prefill_steps, 10);
}

TEST(SchedulerCore, SamplesShareThePromptBlocksUntilTheyDiverge) {
  SimOptions o;
  o.num_blocks = 64;
  o.eos = {};
  Simulation sim(o);
  // 7 tokens in blocks of 4 (one chunk of 8): a full block and a partly filled second.
  ASSERT_TRUE(sim.submit(1, random_prompt(sim.rng(), 7, 7), 6, 0, /*n=*/3, /*seed=*/77).is_ok());
  sim.iterate();  // the prompt runs once; three first tokens
  EXPECT_EQ(sim.bm().stats().used_blocks, 2);
  for (const Sample& sample : sim.records().at(1).samples) EXPECT_EQ(sample.tokens.size(), 1u);
  sim.iterate();  // the forks hold the same blocks; two of three copy the shared last block
  EXPECT_EQ(sim.bm().stats().cow_copies, 2u);
  EXPECT_EQ(sim.bm().stats().used_blocks, 1 + 3);
  ASSERT_TRUE(sim.run_until_idle(100));
  sim.check_outputs();
  sim.check_all_free();
  const auto& samples = sim.records().at(1).samples;
  EXPECT_NE(samples[0].tokens, samples[1].tokens) << "the seeds should make the samples differ";
}

TEST(SchedulerCore, RejectsBadSampleCounts) {
  Simulation sim(SimOptions{});
  EXPECT_EQ(sim.submit(1, {1, 2}, 4, 0, 0).error().code, Errc::invalid_argument);
  EXPECT_EQ(sim.submit(2, {1, 2}, 4, 0, 9).error().code, Errc::invalid_argument);  // max_num_seqs is 8
  EXPECT_EQ(sim.submit(kFirstSampleSeqId, {1, 2}, 4).error().code, Errc::invalid_argument);
  EXPECT_TRUE(sim.submit(3, {1, 2}, 4, 0, 8).is_ok());
}

TEST(SchedulerCore, CancellingBeforeTheFirstTokenEndsEverySample) {
  Simulation sim(SimOptions{});
  ASSERT_TRUE(sim.submit(1, {1, 2, 3}, 4, 0, 3, 5).is_ok());
  sim.cancel(1);
  ASSERT_TRUE(sim.run_until_idle(10));
  for (const Sample& sample : sim.records().at(1).samples) EXPECT_EQ(sample.finish, FinishReason::cancelled);
  sim.check_outputs();
  sim.check_all_free();
}

SimOptions overlap_options() {
  SimOptions o;
  o.num_blocks = 64;
  o.overlap = true;
  o.eos = {};
  return o;
}

TEST(SchedulerCore, OverlapKeepsAStepQueuedAndFillsItsPlaceholders) {
  Simulation sim(overlap_options());
  for (request_id id = 1; id <= 4; ++id) ASSERT_TRUE(sim.submit(id, random_prompt(sim.rng(), 3, 9), 30).is_ok());
  sim.iterate();  // the prompts' step goes out
  for (int i = 0; i < 20; ++i) {
    sim.iterate();  // the next plan is built while that one is outstanding
    EXPECT_EQ(sim.core().outstanding_steps(), 1u) << "iteration " << i;
  }
  // Every decode after the first was planned before its input token was known.
  EXPECT_GE(sim.placeholders(), 4 * 19);
  ASSERT_TRUE(sim.run_until_idle(100));
  sim.check_outputs();
  sim.check_all_free();
}

// A decoding sequence asks for slots up to the end of its block, so the
// block manager hears from it once a block, not once a token.
TEST(SchedulerCore, DecodingAsksForSlotsOnceABlock) {
  for (bool overlap : {false, true}) {
    SimOptions o = overlap_options();
    o.overlap = overlap;
    o.num_blocks = 128;  // room for all four: no preemption
    Simulation sim(o);
    for (request_id id = 1; id <= 4; ++id) ASSERT_TRUE(sim.submit(id, random_prompt(sim.rng(), 8, 8), 64).is_ok());
    ASSERT_TRUE(sim.run_until_idle(200));
    sim.check_outputs();
    sim.check_all_free();
    // Per sequence: its prompt, then one request per block of 4 it decodes
    // into (64 tokens from position 8 on: 16 blocks), where it made 63 before.
    EXPECT_LE(sim.slot_requests(), 4 * (1 + 16)) << "overlap " << overlap;
  }
}

// The blocks a sequence fills with generated tokens enter the prefix cache
// with those tokens, though their slots were reserved before the tokens
// were sampled: a later prompt that repeats prompt and output finds them.
TEST(SchedulerCore, GeneratedBlocksEnterThePrefixCacheWithTheirTokens) {
  for (bool overlap : {false, true}) {
    SimOptions o = overlap_options();
    o.overlap = overlap;
    Simulation sim(o);
    std::vector<int32_t> prompt = random_prompt(sim.rng(), 10, 10);
    ASSERT_TRUE(sim.submit(1, prompt, 21).is_ok());
    ASSERT_TRUE(sim.run_until_idle(100));
    const std::vector<int32_t>& generated = sim.records().at(1).samples[0].tokens;
    ASSERT_EQ(generated.size(), 21u);
    const uint64_t hits_before = sim.bm().stats().hit_tokens;
    prompt.insert(prompt.end(), generated.begin(), generated.end());
    prompt.push_back(11);
    ASSERT_TRUE(sim.submit(2, prompt, 3).is_ok());
    ASSERT_TRUE(sim.run_until_idle(100));
    // Request 1 computed 10 + 20 positions (its last token was never fed
    // back): 7 full blocks of 4, all found.
    EXPECT_EQ(sim.bm().stats().hit_tokens - hits_before, 28u) << "overlap " << overlap;
    sim.check_outputs();
    sim.check_all_free();
  }
}

TEST(SchedulerCore, OverlapRunsOneWastedDecodeAfterAStopToken) {
  const std::vector<int32_t> prompt = {4, 5, 6};
  // The fake model's third token after this prompt, made a stop token.
  const auto tokens = testing::expected_tokens(prompt, kVocab, 3, {}, kContext);
  SimOptions stop = overlap_options();
  stop.eos = {tokens[2]};
  Simulation stopped(stop);
  ASSERT_TRUE(stopped.submit(1, prompt, 30).is_ok());
  ASSERT_TRUE(stopped.run_until_idle(100));
  stopped.check_outputs();
  stopped.check_all_free();
  EXPECT_EQ(stopped.records().at(1).samples[0].tokens.size(), 2u);
  // Prompt, two decodes, the decode that sampled the stop, and one planned
  // before the stop was seen.
  EXPECT_EQ(stopped.steps_run(), 4);
}

// With speculation, the next plan waits for the outstanding step only
// while a decoding sequence is likely to draft: a prompt whose tail never
// occurred before lets it be built ahead, one that repeats does not.
TEST(SchedulerCore, PlansAheadWhileNoSequenceIsLikelyToDraft) {
  SimOptions o = overlap_options();
  o.speculate = true;
  auto ahead_after_prompt = [&](const std::vector<int32_t>& prompt) {
    Simulation sim(o);
    EXPECT_TRUE(sim.submit(1, prompt, 8).is_ok());
    sim.iterate();  // the prompt's step goes out
    EXPECT_EQ(sim.core().outstanding_steps(), 1u);
    const bool ahead = sim.core().can_build();
    EXPECT_TRUE(sim.run_until_idle(100));
    sim.check_outputs();
    return ahead;
  };
  EXPECT_TRUE(ahead_after_prompt({10, 11, 12, 13, 14, 15}));
  EXPECT_FALSE(ahead_after_prompt({10, 11, 12, 13, 11, 12}));  // "11 12" occurred: drafts are likely
}

struct Workload {
  const char* name;
  PreemptionMode preemption;
  AdmissionMode admission;
  BatchingMode batching;
  int32_t num_blocks;
  int32_t num_host_blocks;
  bool overlap = false;
  SchedulingPolicy scheduling = SchedulingPolicy::fcfs;  // priority: random priorities
  bool speculate = false;
};

class RandomizedWorkload : public ::testing::TestWithParam<Workload> {};

// CONVEYOR_SIM_SEED=N reruns the workloads with another random stream (a
// soak: for s in $(seq 100); do CONVEYOR_SIM_SEED=$s ...; done).
uint64_t seed_from_env() {
  const char* seed = std::getenv("CONVEYOR_SIM_SEED");
  return seed != nullptr ? std::strtoull(seed, nullptr, 10) : 42;
}

// Thousands of requests over a tiny pool, random priorities, cancellations
// at every stage: each request ends exactly once with the model's tokens,
// nothing starves, and every block is free at the end.
TEST_P(RandomizedWorkload, EveryRequestFinishesOnceWithItsTokens) {
  const Workload w = GetParam();
  SimOptions o;
  o.preemption = w.preemption;
  o.admission = w.admission;
  o.batching = w.batching;
  o.num_blocks = w.num_blocks;
  o.num_host_blocks = w.num_host_blocks;
  o.overlap = w.overlap;
  o.scheduling = w.scheduling;
  o.speculate = w.speculate;
  o.max_batched_tokens = 13;  // below max_num_seqs x prefill_chunk: chunks get cut short
  Simulation sim(o, seed_from_env());
  auto& rng = sim.rng();
  const int kRequests = 2000;
  request_id next = 1;
  std::vector<request_id> live;
  for (int it = 0; it < 200000 && (next <= kRequests || !sim.core().idle()); ++it) {
    for (int k = int(rng() % 3); k > 0 && next <= kRequests; --k) {
      // A few long prompts share prefixes to exercise the prefix cache.
      std::vector<int32_t> prompt = random_prompt(rng, 1, 30);
      if (rng() % 4 == 0) prompt.insert(prompt.begin(), {7, 7, 7, 7, 8, 8, 8, 8});
      // One request in five asks for 2-4 samples of its prompt.
      const int32_t n = rng() % 5 == 0 ? 2 + int32_t(rng() % 3) : 1;
      const uint64_t seed = n > 1 ? 1 + rng() % 1000 : 0;
      const int32_t max_tokens = 1 + int32_t(rng() % 40);
      const int32_t priority = int32_t(rng() % 3);  // drawn under either policy: the same stream
      ASSERT_TRUE(sim.submit(next, prompt, max_tokens,
                             w.scheduling == SchedulingPolicy::priority ? priority : 0, n, seed)
                      .is_ok());
      live.push_back(next++);
    }
    if (!live.empty() && rng() % 10 == 0) sim.cancel(live[rng() % live.size()]);
    if (!live.empty() && rng() % 10 == 0) {  // one sample of a request (before its fork: none)
      const request_id id = live[rng() % live.size()];
      sim.cancel_sample(id, int32_t(rng() % sim.records().at(id).samples.size()));
    }
    sim.iterate();
    if (HasFatalFailure()) return;
  }
  ASSERT_TRUE(sim.run_until_idle(100000)) << "work left: starvation or a stall";
  EXPECT_EQ(sim.records().size(), size_t(kRequests));
  sim.check_outputs();
  sim.check_all_free();
  if (w.preemption != PreemptionMode::cost && w.num_blocks < 64) {
    EXPECT_GT(sim.core().preemptions(w.preemption), 0u) << "the pool was meant to force preemption";
  }
  if (w.speculate) {
    const auto& spec = sim.core().speculation();
    EXPECT_GT(spec.accepted_tokens, 0u);
    EXPECT_LT(spec.accepted_tokens, spec.draft_tokens) << "drafts were meant to miss too";
  }
  EXPECT_GT(sim.bm().stats().cow_copies, 0u) << "samples of one prompt never diverged in a shared block";
}

std::vector<Workload> workloads() {
  std::vector<Workload> base{
      {"recompute", PreemptionMode::recompute, AdmissionMode::watermark, BatchingMode::continuous, 24, 0},
      {"swap", PreemptionMode::swap, AdmissionMode::watermark, BatchingMode::continuous, 24, 32},
      {"swap_small_host", PreemptionMode::swap, AdmissionMode::watermark, BatchingMode::continuous, 24, 6},
      {"cost", PreemptionMode::cost, AdmissionMode::watermark, BatchingMode::continuous, 24, 32},
      {"conservative", PreemptionMode::recompute, AdmissionMode::conservative, BatchingMode::continuous, 64, 0},
      {"profiled", PreemptionMode::swap, AdmissionMode::profiled, BatchingMode::continuous, 24, 32},
      {"static", PreemptionMode::recompute, AdmissionMode::watermark, BatchingMode::static_, 24, 0},
      {"static_padded", PreemptionMode::swap, AdmissionMode::watermark, BatchingMode::static_padded, 24, 32},
      {"priority_recompute", PreemptionMode::recompute, AdmissionMode::watermark, BatchingMode::continuous, 24, 0,
       false, SchedulingPolicy::priority},
      {"priority_swap", PreemptionMode::swap, AdmissionMode::watermark, BatchingMode::continuous, 24, 32, false,
       SchedulingPolicy::priority},
  };
  std::vector<Workload> all = base;
  static std::vector<std::string> names;  // the names outlive the test parameters
  names.reserve(base.size() + 4);  // no reallocation: the names' c_str() must stay put
  for (Workload w : base) {
    names.push_back(std::string(w.name) + "_overlap");
    w.name = names.back().c_str();
    w.overlap = true;
    all.push_back(w);
  }
  // Speculative decoding's verify steps under preemption, samples, padding
  // and priorities, planned ahead or not.
  for (size_t i : {size_t(0), size_t(1), size_t(7), size_t(9)}) {
    Workload w = base[i];
    w.overlap = i % 2 == 1;
    names.push_back(std::string(w.name) + (w.overlap ? "_overlap" : "") + "_speculative");
    w.name = names.back().c_str();
    w.speculate = true;
    all.push_back(w);
  }
  return all;
}

INSTANTIATE_TEST_SUITE_P(
    Engine, RandomizedWorkload, ::testing::ValuesIn(workloads()),
    [](const ::testing::TestParamInfo<Workload>& info) { return std::string(info.param.name); });

}  // namespace
}  // namespace conveyor
