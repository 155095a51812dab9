// The load generator's parts that need no server: SSE decoding, chunk
// parsing, length distributions, datasets, percentiles, URLs, request bodies.
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include "tools/conveyor/bench_request.hpp"
#include "http/sse_client.hpp"
#include "tools/conveyor/bench_stats.hpp"
#include "tools/conveyor/bench_workload.hpp"

namespace conveyor::bench {
namespace {

TEST(SseDecoder, EventsSplitAcrossFeedsAtEveryByte) {
  const std::string stream = "data: {\"a\":1}\n\n: keep-alive\n\ndata: [DONE]\n\n";
  SseDecoder whole;
  EXPECT_EQ(whole.feed(stream), (std::vector<std::string>{"{\"a\":1}", "[DONE]"}));
  for (size_t cut = 0; cut <= stream.size(); ++cut) {
    SseDecoder d;
    auto events = d.feed(std::string_view(stream).substr(0, cut));
    for (auto& e : d.feed(std::string_view(stream).substr(cut))) events.push_back(e);
    EXPECT_EQ(events, (std::vector<std::string>{"{\"a\":1}", "[DONE]"})) << "cut at " << cut;
    EXPECT_FALSE(d.has_partial_event());
  }
}

TEST(SseDecoder, CrLfMultiLineDataAndOtherFields) {
  SseDecoder d;
  const auto events = d.feed("event: x\r\ndata:one\r\ndata: two\r\nid: 7\r\n\r\ndata: three\n");
  EXPECT_EQ(events, (std::vector<std::string>{"one\ntwo"}));
  EXPECT_TRUE(d.has_partial_event());
  EXPECT_EQ(d.feed("\n"), (std::vector<std::string>{"three"}));
}

TEST(ParseChunk, CompletionWithTokenIdsCountsEveryToken) {
  const auto c = parse_chunk(
      R"({"id":"c","object":"text_completion","choices":[{"index":0,"text":"ab","token_ids":[5,6,7],"finish_reason":null}]})");
  EXPECT_FALSE(c.done);
  EXPECT_FALSE(c.error);
  EXPECT_EQ(c.tokens, 3);
  EXPECT_TRUE(c.has_token_ids);
  EXPECT_EQ(c.text, "ab");
  EXPECT_FALSE(c.finish_reason);
}

TEST(ParseChunk, ChatRoleChunkCarriesNoToken) {
  const auto role = parse_chunk(R"({"choices":[{"index":0,"delta":{"role":"assistant","content":""}}]})");
  EXPECT_EQ(role.tokens, 0);
  const auto text = parse_chunk(R"({"choices":[{"index":0,"delta":{"content":"Hi"},"finish_reason":"stop"}]})");
  EXPECT_EQ(text.tokens, 1);
  EXPECT_EQ(text.text, "Hi");
  EXPECT_EQ(text.finish_reason, "stop");
}

TEST(ParseChunk, UsageDoneAndErrors) {
  const auto usage = parse_chunk(R"({"choices":[],"usage":{"prompt_tokens":16,"completion_tokens":8,"total_tokens":24}})");
  EXPECT_EQ(usage.usage_prompt_tokens, 16);
  EXPECT_EQ(usage.usage_completion_tokens, 8);
  EXPECT_EQ(usage.tokens, 0);
  EXPECT_TRUE(parse_chunk("[DONE]").done);
  const auto err = parse_chunk(R"({"error":{"message":"server shutting down","type":"server_error"}})");
  ASSERT_TRUE(err.error);
  EXPECT_EQ(*err.error, "server shutting down");
  EXPECT_TRUE(parse_chunk("{not json").error);
}

TEST(LengthDist, ParsesEveryForm) {
  auto f = LengthDist::parse("fixed:16");
  ASSERT_TRUE(f);
  EXPECT_EQ(f->describe(), "fixed:16");
  auto u = LengthDist::parse("uniform:4:9");
  ASSERT_TRUE(u);
  EXPECT_EQ(u->describe(), "uniform:4:9");
  auto e = LengthDist::parse("exponential:50:200");
  ASSERT_TRUE(e);
  EXPECT_EQ(e->describe(), "exponential:50:200");
  ASSERT_TRUE(LengthDist::parse("exponential:50"));
  for (const char* bad : {"", "fixed", "fixed:0", "fixed:x", "uniform:5:4", "uniform:0:4", "uniform:3",
                          "exponential:0", "exponential:10:0", "normal:3:4", "fixed:3:4"})
    EXPECT_FALSE(LengthDist::parse(bad)) << bad;
}

TEST(LengthDist, DrawsStayInRangeAndFollowTheSeed) {
  Rng rng(42);
  const auto u = *LengthDist::parse("uniform:4:9");
  std::vector<int> seen(10, 0);
  for (int i = 0; i < 2000; ++i) {
    const int64_t n = u.draw(rng);
    ASSERT_GE(n, 4);
    ASSERT_LE(n, 9);
    ++seen[n];
  }
  for (int n = 4; n <= 9; ++n) EXPECT_GT(seen[n], 200) << n;

  const auto e = *LengthDist::parse("exponential:50:120");
  double sum = 0;
  for (int i = 0; i < 20000; ++i) {
    const int64_t n = e.draw(rng);
    ASSERT_GE(n, 1);
    ASSERT_LE(n, 120);
    sum += static_cast<double>(n);
  }
  EXPECT_NEAR(sum / 20000, 45.5, 2.0);  // E[min(Exp(50), 120)] = 50 (1 - e^-2.4)

  Rng a(7), b(7);
  for (int i = 0; i < 100; ++i) EXPECT_EQ(a.next_u64(), b.next_u64());
}

TEST(WorkloadSource, RandomTokenPromptsUseSafeIds) {
  WorkloadSource w(LengthDist::fixed(16), *LengthDist::parse("uniform:2:5"), false, 1);
  for (int i = 0; i < 50; ++i) {
    const RequestSpec s = w.next();
    ASSERT_FALSE(s.prompt_is_text);
    ASSERT_EQ(s.prompt_ids.size(), 16u);
    EXPECT_EQ(s.prompt_len_hint, 16);
    for (int32_t id : s.prompt_ids) {
      EXPECT_GE(id, WorkloadSource::kMinTokenId);
      EXPECT_LE(id, WorkloadSource::kMaxTokenId);
    }
    EXPECT_GE(s.max_tokens, 2);
    EXPECT_LE(s.max_tokens, 5);
  }
}

TEST(WorkloadSource, ChatPromptsAreWords) {
  WorkloadSource w(LengthDist::fixed(8), LengthDist::fixed(4), true, 1);
  const RequestSpec s = w.next();
  EXPECT_TRUE(s.prompt_is_text);
  EXPECT_EQ(std::count(s.prompt_text.begin(), s.prompt_text.end(), ' '), 7);
}

TEST(Dataset, ParsesTextAndIdPromptsAndCycles) {
  auto d = parse_dataset("{\"prompt\": \"hello\", \"max_tokens\": 5}\n\n{\"prompt\": [1, 2, 3]}\n", "d.jsonl");
  ASSERT_TRUE(d) << d.error().message;
  ASSERT_EQ(d->size(), 2u);
  WorkloadSource w(std::move(*d), LengthDist::fixed(9), 0);
  const auto a = w.next();
  EXPECT_TRUE(a.prompt_is_text);
  EXPECT_EQ(a.prompt_text, "hello");
  EXPECT_EQ(a.max_tokens, 5);
  const auto b = w.next();
  EXPECT_EQ(b.prompt_ids, (std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(b.max_tokens, 9);
  EXPECT_EQ(w.next().prompt_text, "hello");
}

TEST(Dataset, ErrorsNameTheLine) {
  auto bad = parse_dataset("{\"prompt\": \"ok\"}\n{\"prompt\": 5}\n", "d.jsonl");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("d.jsonl:2"), std::string::npos) << bad.error().message;
  EXPECT_FALSE(parse_dataset("not json\n", "d"));
  EXPECT_FALSE(parse_dataset("{\"prompt\": \"x\", \"max_tokens\": 0}", "d"));
  EXPECT_FALSE(parse_dataset("{\"prompt\": [1, -2]}", "d"));
  EXPECT_FALSE(parse_dataset("\n\n", "d"));
  EXPECT_FALSE(load_dataset("/nonexistent/file.jsonl"));
}

TEST(PoissonArrivals, MeanGapIsOneOverRate) {
  PoissonArrivals p(20.0, 3);
  double last = 0;
  for (int i = 0; i < 20000; ++i) {
    const double t = p.next();
    ASSERT_GT(t, last);
    last = t;
  }
  EXPECT_NEAR(last / 20000, 0.05, 0.003);
}

TEST(Stats, PercentilesInterpolateLikeNumpy) {
  const std::vector<double> v{1, 2, 3, 4};
  EXPECT_DOUBLE_EQ(percentile(v, 50), 2.5);
  EXPECT_DOUBLE_EQ(percentile(v, 90), 3.7);
  EXPECT_DOUBLE_EQ(percentile(v, 0), 1);
  EXPECT_DOUBLE_EQ(percentile(v, 100), 4);
  EXPECT_DOUBLE_EQ(percentile({}, 50), 0);
  const auto d = Distribution::of({4, 1, 3, 2});
  EXPECT_EQ(d.count, 4u);
  EXPECT_DOUBLE_EQ(d.mean, 2.5);
  EXPECT_DOUBLE_EQ(d.min, 1);
  EXPECT_DOUBLE_EQ(d.max, 4);
}

TEST(Stats, SummaryCountsThroughputAndErrors) {
  std::vector<RequestResult> rs(3);
  rs[0].ok = true;
  rs[0].input_tokens = 10;
  rs[0].output_tokens = 5;
  rs[0].ttft_s = 0.1;
  rs[0].e2e_s = 0.5;
  rs[0].itl_s = {0.1, 0.1, 0.1, 0.1};
  rs[0].finish_reason = "length";
  rs[1] = rs[0];
  rs[2].error_kind = "http 429";
  const Summary s = summarize(rs, 2.0);
  EXPECT_EQ(s.completed, 2);
  EXPECT_EQ(s.failed, 1);
  EXPECT_EQ(s.errors.at("http 429"), 1);
  EXPECT_DOUBLE_EQ(s.request_throughput, 1.0);
  EXPECT_DOUBLE_EQ(s.output_throughput, 5.0);
  EXPECT_DOUBLE_EQ(s.input_throughput, 10.0);
  EXPECT_NEAR(s.ttft_ms.mean, 100, 1e-9);
  EXPECT_NEAR(s.tpot_ms.mean, 100, 1e-9);
  EXPECT_EQ(s.itl_ms.count, 8u);

  const auto j = to_json(s, {{"k", 1}}, rs);
  EXPECT_EQ(j.at("summary").at("completed").as_int64(), 2);
  EXPECT_EQ(j.at("errors").at("http 429").as_int64(), 1);
  EXPECT_EQ(j.at("requests").as_array().size(), 3u);
  EXPECT_EQ(j.at("config").at("k").as_int64(), 1);
}

TEST(ServerUrl, ParsesHostPortAndPrefix) {
  auto u = ServerUrl::parse("http://127.0.0.1:8000");
  ASSERT_TRUE(u);
  EXPECT_EQ(u->host, "127.0.0.1");
  EXPECT_EQ(u->port, "8000");
  EXPECT_EQ(u->prefix, "");
  u = ServerUrl::parse("http://localhost/api/");
  ASSERT_TRUE(u);
  EXPECT_EQ(u->port, "80");
  EXPECT_EQ(u->prefix, "/api");
  u = ServerUrl::parse("http://[::1]:9000");
  ASSERT_TRUE(u);
  EXPECT_EQ(u->host, "::1");
  EXPECT_EQ(u->port, "9000");
  for (const char* bad : {"127.0.0.1:8000", "https://x:1", "http://:80", "http://h:0", "http://h:99999", "http://h:x"})
    EXPECT_FALSE(ServerUrl::parse(bad)) << bad;
}

TEST(RequestBody, StreamsWithUsageAndTokenIds) {
  RequestSpec spec;
  spec.prompt_ids = {3, 4, 5};
  spec.max_tokens = 7;
  const auto body = boost::json::parse(
      build_request_body(Endpoint::completions, spec, RequestOptions{"m", true, 0.0}));
  EXPECT_EQ(body.at("model").as_string(), "m");
  EXPECT_EQ(body.at("prompt").as_array().size(), 3u);
  EXPECT_EQ(body.at("max_tokens").as_int64(), 7);
  EXPECT_TRUE(body.at("stream").as_bool());
  EXPECT_TRUE(body.at("stream_options").at("include_usage").as_bool());
  EXPECT_TRUE(body.at("ignore_eos").as_bool());
  EXPECT_TRUE(body.at("return_token_ids").as_bool());

  spec.prompt_is_text = true;
  spec.prompt_text = "hi \"there\"";
  const auto chat = boost::json::parse(build_request_body(Endpoint::chat, spec, RequestOptions{"m", false, 0.5}));
  EXPECT_EQ(chat.at("messages").at(0).at("content").as_string(), "hi \"there\"");
  EXPECT_FALSE(chat.at("ignore_eos").as_bool());
  EXPECT_EQ(endpoint_path(Endpoint::chat), "/v1/chat/completions");
}

}  // namespace
}  // namespace conveyor::bench
