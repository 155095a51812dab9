// The load generator's client against a fake OpenAI-style server: request
// counts, token counting across multi-token chunks, errors by kind,
// connection reuse, Poisson arrivals, the duration limit.
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include "tests/integration/fake_openai_server.hpp"
#include "tools/conveyor/bench_client.hpp"

namespace conveyor::bench {
namespace {

using testing::FakeOpenAiServer;
using testing::FakeServerOptions;

LoadPlan plan_for(const FakeOpenAiServer& server, int64_t concurrency, int64_t num_requests) {
  LoadPlan plan;
  plan.url = *ServerUrl::parse(server.url());
  plan.options.model = "fake-model";
  plan.concurrency = concurrency;
  plan.num_requests = num_requests;
  plan.timeout_s = 30;
  return plan;
}

LoadResult run(const LoadPlan& plan, int64_t input_len, int64_t output_len, bool chat = false) {
  WorkloadSource workload(LengthDist::fixed(input_len), LengthDist::fixed(output_len), chat, 1);
  return run_load(plan, workload, {});
}

int64_t count_ok(const LoadResult& r) {
  return std::count_if(r.results.begin(), r.results.end(), [](const RequestResult& x) { return x.ok; });
}

TEST(BenchClient, ClosedLoopCompletesEveryRequestOnReusedConnections) {
  FakeOpenAiServer server;
  const LoadResult r = run(plan_for(server, 4, 20), 16, 8);
  ASSERT_EQ(r.results.size(), 20u);
  for (const auto& x : r.results) {
    ASSERT_TRUE(x.ok) << x.error_kind << ": " << x.error_message;
    EXPECT_EQ(x.http_status, 200);
    EXPECT_EQ(x.input_tokens, 16);
    EXPECT_EQ(x.output_tokens, 8);
    EXPECT_EQ(x.itl_s.size(), 7u);
    EXPECT_GT(x.ttft_s, 0);
    EXPECT_GE(x.e2e_s, x.ttft_s);
    EXPECT_EQ(x.finish_reason, "length");
  }
  EXPECT_GT(r.duration_s, 0);
  EXPECT_EQ(server.requests(), 20);
  EXPECT_LE(server.max_in_flight(), 4);
  EXPECT_LE(server.connections(), 5);  // 4 connections, kept alive (+1 for no reason we rely on)

  const auto body = boost::json::parse(server.last_body());
  EXPECT_EQ(body.at("prompt").as_array().size(), 16u);
  EXPECT_TRUE(body.at("return_token_ids").as_bool());
  EXPECT_TRUE(body.at("stream").as_bool());
}

TEST(BenchClient, MultiTokenChunksCountEveryToken) {
  FakeServerOptions options;
  options.tokens_per_chunk = 3;
  FakeOpenAiServer server(options);
  const LoadResult r = run(plan_for(server, 2, 4), 4, 8);
  ASSERT_EQ(count_ok(r), 4);
  for (const auto& x : r.results) {
    EXPECT_EQ(x.output_tokens, 8);
    EXPECT_EQ(x.itl_s.size(), 5u);  // chunks of 3, 3, 2: the first chunk's tokens have no gap
  }
}

TEST(BenchClient, ErrorStatusesAreCountedByKind) {
  FakeServerOptions options;
  options.fail_every = 4;
  FakeOpenAiServer server(options);
  const LoadResult r = run(plan_for(server, 3, 20), 4, 4);
  ASSERT_EQ(r.results.size(), 20u);
  EXPECT_EQ(count_ok(r), 15);
  const Summary s = summarize(r.results, r.duration_s);
  EXPECT_EQ(s.errors.at("http 429"), 5);
  for (const auto& x : r.results)
    if (!x.ok) {
      EXPECT_EQ(x.http_status, 429);
      EXPECT_NE(x.error_message.find("queue full"), std::string::npos) << x.error_message;
    }
}

TEST(BenchClient, StreamWithoutDoneIsIncomplete) {
  FakeServerOptions options;
  options.truncate_every = 5;
  FakeOpenAiServer server(options);
  const LoadResult r = run(plan_for(server, 2, 10), 4, 3);
  EXPECT_EQ(count_ok(r), 8);
  EXPECT_EQ(summarize(r.results, r.duration_s).errors.at("incomplete"), 2);
}

TEST(BenchClient, ConnectionCloseServerGetsOneConnectionPerRequest) {
  FakeServerOptions options;
  options.keep_alive = false;
  FakeOpenAiServer server(options);
  const LoadResult r = run(plan_for(server, 2, 6), 4, 3);
  EXPECT_EQ(count_ok(r), 6);
  EXPECT_EQ(server.connections(), 6);
}

TEST(BenchClient, StalePooledConnectionIsRetriedOnAFreshOne) {
  FakeServerOptions options;
  options.close_without_notice = true;
  FakeOpenAiServer server(options);
  const LoadResult r = run(plan_for(server, 1, 5), 4, 3);
  for (const auto& x : r.results) EXPECT_TRUE(x.ok) << x.error_kind << ": " << x.error_message;
  EXPECT_EQ(server.requests(), 5);
}

TEST(BenchClient, ChatEndpointStreamsDeltas) {
  FakeOpenAiServer server;
  LoadPlan plan = plan_for(server, 2, 4);
  plan.endpoint = Endpoint::chat;
  const LoadResult r = run(plan, 5, 6, /*chat=*/true);
  ASSERT_EQ(count_ok(r), 4);
  for (const auto& x : r.results) EXPECT_EQ(x.output_tokens, 6);
  const auto body = boost::json::parse(server.last_body());
  EXPECT_EQ(body.at("messages").at(0).at("role").as_string(), "user");
}

TEST(BenchClient, PoissonArrivalsRespectTheCap) {
  FakeServerOptions options;
  options.chunk_delay = std::chrono::milliseconds(5);
  FakeOpenAiServer server(options);
  LoadPlan plan = plan_for(server, 2, 30);
  plan.rate = 500;  // far faster than the server: arrivals queue behind the cap
  plan.seed = 3;
  const LoadResult r = run(plan, 4, 4);
  EXPECT_EQ(count_ok(r), 30);
  EXPECT_LE(server.max_in_flight(), 2);
}

TEST(BenchClient, PoissonArrivalsWithoutCap) {
  FakeOpenAiServer server;
  LoadPlan plan = plan_for(server, 0, 25);
  plan.rate = 200;
  const LoadResult r = run(plan, 4, 2);
  EXPECT_EQ(count_ok(r), 25);
}

TEST(BenchClient, DurationStopsSendingAndProgressReports) {
  FakeServerOptions options;
  options.chunk_delay = std::chrono::milliseconds(20);
  FakeOpenAiServer server(options);
  LoadPlan plan = plan_for(server, 2, 0);
  plan.duration_s = 1.3;
  WorkloadSource workload(LengthDist::fixed(4), LengthDist::fixed(5), false, 1);
  int calls = 0;
  Progress last;
  const LoadResult r = run_load(plan, workload, [&](const Progress& p) {
    ++calls;
    last = p;
  });
  EXPECT_GE(calls, 1);
  EXPECT_GT(last.output_tokens, 0);
  EXPECT_GT(count_ok(r), 4);
  EXPECT_LT(r.results.size(), 40u);  // ~100 ms a request, 2 at a time, 1.3 s
  EXPECT_EQ(count_ok(r), static_cast<int64_t>(r.results.size()));
  EXPECT_GE(r.duration_s, 1.3);
}

TEST(BenchClient, FetchModelsAndUnreachableServer) {
  uint16_t closed_port = 0;
  {
    FakeOpenAiServer server;
    closed_port = server.port();
    auto models = fetch_models(*ServerUrl::parse(server.url()), 5);
    ASSERT_TRUE(models) << models.error().message;
    EXPECT_EQ(models->front(), "fake-model");
  }
  auto refused = fetch_models(*ServerUrl::parse("http://127.0.0.1:" + std::to_string(closed_port)), 5);
  ASSERT_FALSE(refused);
  EXPECT_NE(refused.error().message.find("cannot reach"), std::string::npos) << refused.error().message;
}

}  // namespace
}  // namespace conveyor::bench
