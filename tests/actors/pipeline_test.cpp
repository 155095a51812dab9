// Pipelines (actors/pipeline.hpp) on a real engine: stage order, one last
// event per run, early ends and cancels that reach the engine, follow-up
// requests, fan-out with losers cancelled, and the guard for a stage that
// never ends its output. The model is tests/integration/models/drain-tiny
// (byte tokenizer, about a millisecond a token, context 4096): a request of
// kLong tokens runs for seconds, so a cancel that works is told apart from
// one that does not by the token count, however loaded the machine.
#include "actors/pipeline.hpp"

#include <gtest/gtest.h>

#include <chrono>
#include <condition_variable>
#include <mutex>
#include <thread>

namespace conveyor {
namespace {

using namespace std::chrono_literals;

constexpr int32_t kLong = 2000;

struct EngineSystemConfig : caf::actor_system_config {
  EngineSystemConfig() { add_engine_types(*this); }
};

// What a recording sink received; the test thread waits on it.
struct Seen {
  std::mutex mutex;
  std::condition_variable changed;
  std::vector<StreamEvent> events;
  int lasts = 0;

  bool wait_last(std::chrono::seconds timeout = 60s) {
    std::unique_lock lock(mutex);
    return changed.wait_for(lock, timeout, [&] { return lasts > 0; });
  }
  bool wait_events(size_t n, std::chrono::seconds timeout = 60s) {
    std::unique_lock lock(mutex);
    return changed.wait_for(lock, timeout, [&] { return events.size() >= n; });
  }
  int tokens() {
    std::lock_guard lock(mutex);
    int n = 0;
    for (const StreamEvent& e : events) n += int(e.token_ids.size());
    return n;
  }
  StreamEvent last() {
    std::lock_guard lock(mutex);
    for (const StreamEvent& e : events)
      if (e.last()) return e;
    return {};
  }
};

// Records every event and stays alive (so a second last event would be
// seen), unless quit_after_first is set.
stream_sink::behavior_type recording_sink(stream_sink::pointer self, std::shared_ptr<Seen> seen,
                                          bool quit_after_first) {
  return {
      [=](const StreamEvent& e) {
        {
          std::lock_guard lock(seen->mutex);
          seen->events.push_back(e);
          seen->lasts += e.last();
        }
        seen->changed.notify_all();
        if (quit_after_first) self->quit();
      },
  };
}

class PipelineTest : public ::testing::Test {
 protected:
  void SetUp() override {
    LoadOptions options;
    options.config_dirs = {std::string(CONVEYOR_SOURCE_DIR) + "/tests/integration/models"};
    auto model = load_model("dummy:drain-tiny", options);
    ASSERT_TRUE(model) << model.error().message;
    EngineConfig config;
    config.kv_cache_tokens = 8192;
    auto created = Engine::create(sys_, config, std::move(model).value());
    ASSERT_TRUE(created) << created.error().message;
    engine_ = std::move(created).value();
  }

  void TearDown() override {
    for (const stream_sink& s : sinks_) caf::anon_send_exit(s, caf::exit_reason::user_shutdown);
    engine_.reset();
  }

  // A sink, killed at the end of the test.
  stream_sink sink(const std::shared_ptr<Seen>& seen, bool quit_after_first = false) {
    sinks_.push_back(sys_.spawn(recording_sink, seen, quit_after_first));
    return sinks_.back();
  }

  RequestSpec spec(int32_t max_tokens, uint64_t seed = 1) {
    RequestSpec s;
    s.request.prompt = engine_->model().tokenizer->encode("Hello", true);
    s.request.sampling.max_tokens = max_tokens;
    s.request.sampling.ignore_eos = true;
    s.request.sampling.seed = seed;
    s.request.sampling.has_seed = true;
    return s;
  }

  // Waits until the engine runs nothing; its statistics then.
  EngineStats idle_stats() {
    EngineStats s;
    for (int i = 0; i < 1000; ++i) {
      auto got = engine_->stats();
      EXPECT_TRUE(got);
      if (!got) break;
      s = *got;
      if (s.num_running == 0 && s.num_waiting == 0) break;
      std::this_thread::sleep_for(10ms);
    }
    return s;
  }

  EngineSystemConfig cfg_;
  caf::actor_system sys_{cfg_};
  std::unique_ptr<Engine> engine_;
  std::vector<stream_sink> sinks_;
};

class PassOn final : public StreamStage {
 public:
  void on_event(const StreamEvent& e, StageContext& ctx) override { ctx.emit(e); }
};

// Appends `mark` to the text of every event it passes on.
class Mark final : public StreamStage {
 public:
  explicit Mark(std::string mark) : mark_(std::move(mark)) {}
  void on_event(const StreamEvent& e, StageContext& ctx) override {
    StreamEvent out = e;
    out.text += mark_;
    ctx.emit(std::move(out));
  }

 private:
  std::string mark_;
};

// Ends the stream itself after `n` tokens.
class EndAfter final : public StreamStage {
 public:
  explicit EndAfter(int n) : n_(n) {}
  void on_event(const StreamEvent& e, StageContext& ctx) override {
    StreamEvent out = e;
    seen_ += int(e.token_ids.size());
    if (seen_ >= n_) {
      out.finish = FinishReason::stop;
      out.completion_tokens = seen_;
    }
    ctx.emit(std::move(out));
  }

 private:
  int n_;
  int seen_ = 0;
};

// Never emits anything.
class Swallow final : public StreamStage {
 public:
  void on_event(const StreamEvent&, StageContext&) override {}
  std::string name() const override { return "Swallow"; }
};

TEST_F(PipelineTest, WithoutStagesTheRequestReachesTheSink) {
  auto seen = std::make_shared<Seen>();
  Pipeline(*engine_).run(spec(8), sink(seen));
  ASSERT_TRUE(seen->wait_last());
  EXPECT_EQ(seen->tokens(), 8);
  EXPECT_EQ(seen->last().finish, FinishReason::length);
  EXPECT_EQ(seen->last().completion_tokens, 8);
}

TEST_F(PipelineTest, StagesSeeEventsInTheirOrderAndTheSinkOneLastEvent) {
  auto seen = std::make_shared<Seen>();
  Pipeline p(*engine_);
  p.then<Mark>("a").then<Mark>("b");
  p.run(spec(6), sink(seen));
  ASSERT_TRUE(seen->wait_last());
  std::this_thread::sleep_for(100ms);  // room for a wrong second last event
  std::lock_guard lock(seen->mutex);
  EXPECT_EQ(seen->lasts, 1);
  ASSERT_FALSE(seen->events.empty());
  for (const StreamEvent& e : seen->events) {
    ASSERT_GE(e.text.size(), 2u);
    EXPECT_EQ(e.text.substr(e.text.size() - 2), "ab");
  }
}

TEST_F(PipelineTest, StageEndingItsOutputCancelsTheRequest) {
  auto seen = std::make_shared<Seen>();
  Pipeline p(*engine_);
  p.then<PassOn>().then<EndAfter>(3);
  p.run(spec(kLong), sink(seen));
  ASSERT_TRUE(seen->wait_last());
  EXPECT_EQ(seen->last().finish, FinishReason::stop);
  EXPECT_EQ(seen->tokens(), 3);
  // The request was cancelled, not run to its end.
  const EngineStats stats = idle_stats();
  EXPECT_EQ(stats.num_running, 0);
  EXPECT_LT(stats.generated_tokens, uint64_t(kLong));
}

TEST_F(PipelineTest, CancelEndsTheRunWithCancelled) {
  auto seen = std::make_shared<Seen>();
  Pipeline p(*engine_);
  p.then<PassOn>().then<Mark>("");
  PipelineHandle h = p.run(spec(kLong), sink(seen));
  ASSERT_EQ(h.stages().size(), 2u);
  ASSERT_TRUE(seen->wait_events(2));
  h.cancel();
  ASSERT_TRUE(seen->wait_last());
  EXPECT_EQ(seen->last().finish, FinishReason::cancelled);
  EXPECT_LT(seen->last().completion_tokens, kLong);
  EXPECT_GE(seen->tokens(), 2);
}

// The first request's output is the second's prompt.
class Chain final : public StreamStage {
 public:
  void start(RequestSpec spec, StageContext& ctx) override {
    next_ = spec;
    first_ = ctx.submit(std::move(spec));
  }
  void on_event(const StreamEvent& e, StageContext& ctx) override {
    if (e.id != first_) return ctx.emit(e);
    output_.insert(output_.end(), e.token_ids.begin(), e.token_ids.end());
    StreamEvent out = e;
    out.finish = FinishReason::none;
    ctx.emit(out);
    if (!e.last()) return;
    next_.request.prompt = output_;
    ctx.submit(next_);
  }

 private:
  request_id first_ = 0;
  RequestSpec next_;
  std::vector<int32_t> output_;
};

TEST_F(PipelineTest, StageSubmitsAFollowUpRequest) {
  auto seen = std::make_shared<Seen>();
  Pipeline p(*engine_);
  p.then<Chain>();
  p.run(spec(5), sink(seen));
  ASSERT_TRUE(seen->wait_last());
  std::this_thread::sleep_for(100ms);
  std::lock_guard lock(seen->mutex);
  EXPECT_EQ(seen->lasts, 1);
  std::vector<request_id> ids;
  int first_tokens = 0;
  for (const StreamEvent& e : seen->events) {
    if (ids.empty() || ids.back() != e.id) ids.push_back(e.id);
    if (e.id == ids.front()) first_tokens += int(e.token_ids.size());
  }
  ASSERT_EQ(ids.size(), 2u);
  EXPECT_EQ(first_tokens, 5);
  EXPECT_EQ(seen->events.back().finish, FinishReason::length);
  EXPECT_EQ(seen->events.back().prompt_tokens, 5);  // the first request's output
}

TEST_F(PipelineTest, StageThatNeverEndsGetsAnErrorEnd) {
  auto seen = std::make_shared<Seen>();
  Pipeline p(*engine_);
  p.then<Swallow>().then<PassOn>();
  p.run(spec(4), sink(seen));
  ASSERT_TRUE(seen->wait_last());
  const StreamEvent last = seen->last();
  EXPECT_EQ(last.finish, FinishReason::error);
  EXPECT_NE(last.message.find("Swallow"), std::string::npos) << last.message;
}

// Throws from on_event at its `n`th event, or from start() when n is 0.
class Throws final : public StreamStage {
 public:
  explicit Throws(int n) : n_(n) {}
  void start(RequestSpec spec, StageContext& ctx) override {
    if (n_ == 0) {
      ctx.submit(std::move(spec));  // submitted, then the stage fails: cancelled
      throw std::runtime_error("start broke");
    }
    ctx.submit(std::move(spec));
  }
  void on_event(const StreamEvent& e, StageContext& ctx) override {
    if (++seen_ == n_) throw std::runtime_error("on_event broke");
    ctx.emit(e);
  }
  std::string name() const override { return "Throws"; }

 private:
  int n_;
  int seen_ = 0;
};

// A stage that throws ends the run with an error naming it, and the request
// is cancelled (the sink heard nothing more, and the request ran on).
TEST_F(PipelineTest, AStageThatThrowsEndsTheRunWithAnError) {
  for (int n : {0, 3}) {
    for (bool first : {true, false}) {
      auto seen = std::make_shared<Seen>();
      Pipeline p(*engine_);
      if (first) {
        p.then<Throws>(n).then<PassOn>();
      } else {
        if (n == 0) continue;  // start() runs on the first stage only
        p.then<PassOn>().then<Throws>(n).then<PassOn>();
      }
      p.run(spec(kLong), sink(seen));
      ASSERT_TRUE(seen->wait_last()) << n << " " << first;
      const StreamEvent last = seen->last();
      EXPECT_EQ(last.finish, FinishReason::error);
      EXPECT_NE(last.message.find("pipeline stage 'Throws' failed: "), std::string::npos) << last.message;
      EXPECT_NE(last.message.find(n == 0 ? "start broke" : "on_event broke"), std::string::npos) << last.message;
      const EngineStats stats = idle_stats();
      EXPECT_EQ(stats.num_running, 0);
    }
  }
  EXPECT_LT(idle_stats().generated_tokens, uint64_t(kLong)) << "the requests were cancelled";
}

TEST_F(PipelineTest, ANullSinkRunsNothing) {
  Pipeline p(*engine_);
  p.then<PassOn>();
  EXPECT_TRUE(p.run(spec(4), stream_sink{}).stages().empty());
}

// Fan-out: three requests; the first to produce a token wins, the others are
// cancelled; the winner's end is held until the losers' ends have come.
struct FanOutLog {
  std::mutex mutex;
  std::vector<StreamEvent> loser_ends;
};

class FirstWins final : public StreamStage {
 public:
  explicit FirstWins(std::shared_ptr<FanOutLog> log) : log_(std::move(log)) {}
  void start(RequestSpec spec, StageContext& ctx) override {
    for (int i = 0; i < 3; ++i) ids_.push_back(ctx.submit(spec));
  }
  void on_event(const StreamEvent& e, StageContext& ctx) override {
    if (winner_ == 0 && !e.token_ids.empty()) {
      winner_ = e.id;
      for (request_id id : ids_)
        if (id != winner_) ctx.cancel(id);
    }
    if (e.id != winner_) {
      if (e.last()) {
        std::lock_guard lock(log_->mutex);
        log_->loser_ends.push_back(e);
        ++losers_ended_;
      }
    } else if (e.last()) {
      held_end_ = e;
    } else {
      ctx.emit(e);
    }
    if (held_end_.last() && losers_ended_ == 2) ctx.emit(held_end_);
  }

 private:
  std::shared_ptr<FanOutLog> log_;
  std::vector<request_id> ids_;
  request_id winner_ = 0;
  int losers_ended_ = 0;
  StreamEvent held_end_;
};

TEST_F(PipelineTest, FanOutCancelsTheLosers) {
  auto seen = std::make_shared<Seen>();
  auto log = std::make_shared<FanOutLog>();
  Pipeline p(*engine_);
  p.then<FirstWins>(log);
  p.run(spec(60), sink(seen));
  ASSERT_TRUE(seen->wait_last());
  EXPECT_EQ(seen->last().finish, FinishReason::length);
  EXPECT_EQ(seen->tokens(), 60);
  std::lock_guard lock(log->mutex);
  ASSERT_EQ(log->loser_ends.size(), 2u);
  for (const StreamEvent& e : log->loser_ends) {
    EXPECT_EQ(e.finish, FinishReason::cancelled);
    EXPECT_LT(e.completion_tokens, 60);
  }
}

TEST_F(PipelineTest, SinkThatEndsCancelsThePipeline) {
  auto seen = std::make_shared<Seen>();
  Pipeline p(*engine_);
  p.then<PassOn>().then<PassOn>();
  p.run(spec(kLong), sink(seen, /*quit_after_first=*/true));
  ASSERT_TRUE(seen->wait_events(1));
  const EngineStats stats = idle_stats();
  EXPECT_EQ(stats.num_running, 0);
  EXPECT_LT(stats.generated_tokens, uint64_t(kLong));
}

TEST_F(PipelineTest, OnePipelineRunsManyTimesAtOnce) {
  Pipeline p(*engine_);
  p.then<Mark>("x");
  std::vector<std::shared_ptr<Seen>> runs;
  for (int i = 0; i < 3; ++i) {
    runs.push_back(std::make_shared<Seen>());
    p.run(spec(4, uint64_t(i)), sink(runs.back()));
  }
  for (auto& seen : runs) {
    ASSERT_TRUE(seen->wait_last());
    EXPECT_EQ(seen->tokens(), 4);
  }
}

TEST_F(PipelineTest, SubmitToDeliversToATypedSink) {
  auto seen = std::make_shared<Seen>();
  RequestHandle h = submit_to(*engine_, spec(3), sink(seen));
  EXPECT_NE(h.id(), 0u);
  ASSERT_TRUE(seen->wait_last());
  EXPECT_EQ(seen->tokens(), 3);
  EXPECT_EQ(seen->last().id, h.id());
}

}  // namespace
}  // namespace conveyor
