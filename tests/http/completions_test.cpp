// /v1/completions and /v1/chat/completions end to end, with Beast's client
// and curl: streaming and not, token-id prompts checked against the engine
// run in-process, several prompts times n, logprobs, stop strings.
#include "tests/http/test_server.hpp"
#include "tests/http/test_util.hpp"

namespace conveyor::http::testing {
namespace {

namespace json = boost::json;

class Completions : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = new TestServer(); }
  static void TearDownTestSuite() { delete server_; }
  static uint16_t port() { return server_->port(); }
  static Response post(const std::string& path, const json::object& body) {
    return http_request(port(), "POST", path, body_of(body));
  }
  static TestServer* server_;
};
TestServer* Completions::server_ = nullptr;

TEST_F(Completions, HealthAndModels) {
  EXPECT_EQ(http_request(port(), "GET", "/health").status, 200);
  const Response r = http_request(port(), "GET", "/v1/models");
  ASSERT_EQ(r.status, 200) << r.error;
  json::object list = parse_object(r.body);
  EXPECT_EQ(list["object"], "list");
  EXPECT_EQ(std::string(list["data"].as_array().at(0).as_object().at("id").as_string()), server_->model_name());
}

// What the model receives: /tokenize, /detokenize and the chat render agree
// with the prompt a completion or chat request runs.
TEST_F(Completions, TokenizeDetokenizeAndRenderShowThePrompt) {
  const Response t = post("/tokenize", {{"prompt", "Hello"}});
  ASSERT_EQ(t.status, 200) << t.body;
  json::object tok = parse_object(t.body);
  json::array ids;
  for (int32_t id : server_->encode("Hello")) ids.emplace_back(id);
  EXPECT_EQ(tok["tokens"].as_array(), ids);
  EXPECT_EQ(tok["count"].as_int64(), int64_t(ids.size()));
  EXPECT_EQ(tok["max_model_len"].as_int64(), server_->context_length());
  const Response pieces = post("/tokenize", {{"content", "Hi"}, {"add_special", false}, {"with_pieces", true}});
  ASSERT_EQ(pieces.status, 200) << pieces.body;
  json::array p = parse_object(pieces.body)["tokens"].as_array();
  ASSERT_EQ(p.size(), 2u);
  EXPECT_EQ(p[0].as_object().at("piece"), "H");

  const Response d = post("/detokenize", {{"tokens", ids}});
  ASSERT_EQ(d.status, 200) << d.body;
  // Special tokens written out (the byte tokenizer's BOS is "<s>"), so that
  // the text tokenizes back to the same ids.
  const std::string text(parse_object(d.body)["prompt"].as_string());
  EXPECT_EQ(text, "<s>Hello");
  const Response back = post("/tokenize", {{"prompt", text}, {"add_special", false}});
  ASSERT_EQ(back.status, 200) << back.body;
  EXPECT_EQ(parse_object(back.body)["tokens"].as_array(), ids);
  EXPECT_EQ(post("/detokenize", {{"tokens", json::array{-1}}}).status, 400);
  EXPECT_EQ(post("/tokenize", {{"prompt", "x"}, {"bogus", 1}}).status, 400);

  const json::array messages = {json::object{{"role", "user"}, {"content", "Hi there"}}};
  const Response r = post("/v1/chat/completions/render", {{"messages", messages}});
  ASSERT_EQ(r.status, 200) << r.body;
  json::object render = parse_object(r.body);
  EXPECT_NE(std::string(render["prompt"].as_string()).find("Hi there"), std::string::npos);
  const Response chat = post("/v1/chat/completions", {{"messages", messages},
                                                      {"max_tokens", 1},
                                                      {"return_token_ids", true}});
  ASSERT_EQ(chat.status, 200) << chat.body;
  EXPECT_EQ(parse_object(chat.body)["prompt_token_ids"], render["prompt_token_ids"]);
}

TEST_F(Completions, TextPromptNotStreamed) {
  const Response r = post("/v1/completions", {{"model", server_->model_name()},
                                              {"prompt", "Hello"},
                                              {"max_tokens", 8},
                                              {"temperature", 0}});
  ASSERT_EQ(r.status, 200) << r.body << r.error;
  EXPECT_EQ(r.headers.at("content-type"), "application/json");
  json::object body = parse_object(r.body);
  EXPECT_EQ(body["object"], "text_completion");
  EXPECT_TRUE(body["id"].as_string().starts_with("cmpl-"));
  json::object choice = body["choices"].as_array().at(0).as_object();
  EXPECT_EQ(choice["index"], 0);
  EXPECT_TRUE(choice["text"].is_string());
  EXPECT_TRUE(choice["logprobs"].is_null());
  EXPECT_TRUE(choice["finish_reason"] == "stop" || choice["finish_reason"] == "length");
  json::object usage = body["usage"].as_object();
  EXPECT_EQ(usage["prompt_tokens"].to_number<int64_t>(), int64_t(server_->encode("Hello").size()));
  EXPECT_LE(usage["completion_tokens"].to_number<int64_t>(), 8);
}

TEST_F(Completions, TokenIdPromptsReturnTheEngineTokens) {
  const std::vector<int32_t> a = {256, 72, 101, 108, 108, 111};
  const std::vector<int32_t> b = {256, 65, 66};
  const Response r = post("/v1/completions", {{"prompt", json::array{ids_json(a), ids_json(b)}},
                                              {"max_tokens", 12},
                                              {"temperature", 0},
                                              {"ignore_eos", true},
                                              {"return_token_ids", true}});
  ASSERT_EQ(r.status, 200) << r.body;
  json::array choices = parse_object(r.body)["choices"].as_array();
  ASSERT_EQ(choices.size(), 2u);
  const std::vector<std::vector<int32_t>> prompts = {a, b};
  for (size_t i = 0; i < 2; ++i) {
    json::object c = choices[i].as_object();
    EXPECT_EQ(c["index"].to_number<int64_t>(), int64_t(i));
    EXPECT_EQ(ids_of(c["prompt_token_ids"]), prompts[i]);
    EXPECT_EQ(ids_of(c["token_ids"]), server_->engine_greedy(prompts[i], 12, true)) << "prompt " << i;
    EXPECT_EQ(c["finish_reason"], "length");
  }
}

// logit_bias moves the logits before anything else: +100 all but forces a
// token, -100 bans one, here on greedy decoding whose tokens the engine
// gives without a bias.
TEST_F(Completions, LogitBiasForcesAndBansTokens) {
  const std::vector<int32_t> prompt = {256, 72, 101, 108, 108, 111};
  auto ids = [&](json::object bias) {
    const Response r = post("/v1/completions", {{"prompt", ids_json(prompt)},
                                                {"max_tokens", 8},
                                                {"temperature", 0},
                                                {"ignore_eos", true},
                                                {"return_token_ids", true},
                                                {"logit_bias", std::move(bias)}});
    EXPECT_EQ(r.status, 200) << r.body;
    return ids_of(parse_object(r.body)["choices"].as_array()[0].as_object()["token_ids"]);
  };
  const std::vector<int32_t> plain = server_->engine_greedy(prompt, 8, true);
  EXPECT_EQ(ids({}), plain);
  EXPECT_EQ(ids({{"65", 100}}), std::vector<int32_t>(8, 65));
  const std::vector<int32_t> banned = ids({{std::to_string(plain[0]), -100}});
  ASSERT_FALSE(banned.empty());
  EXPECT_NE(banned[0], plain[0]);
  for (int32_t t : banned) EXPECT_NE(t, plain[0]);
}

// vLLM's stop_token_ids: the choice ends at the first of them, which is
// counted in completion_tokens but not shown; a bad id is a 400.
TEST_F(Completions, StopTokenIdsEndAChoiceAsEndOfSequenceDoes) {
  const std::vector<int32_t> prompt = {256, 72, 101, 108, 108, 111};
  const std::vector<int32_t> plain = server_->engine_greedy(prompt, 8, true);
  ASSERT_EQ(plain.size(), 8u);
  const size_t at = std::find(plain.begin(), plain.end(), plain[3]) - plain.begin();  // its first occurrence
  const Response r = post("/v1/completions", {{"prompt", ids_json(prompt)},
                                              {"max_tokens", 8},
                                              {"temperature", 0},
                                              {"ignore_eos", true},
                                              {"return_token_ids", true},
                                              {"stop_token_ids", json::array{plain[3], 0}}});
  ASSERT_EQ(r.status, 200) << r.body;
  json::object body = parse_object(r.body);
  json::object choice = body["choices"].as_array()[0].as_object();
  EXPECT_EQ(ids_of(choice["token_ids"]), std::vector<int32_t>(plain.begin(), plain.begin() + long(at)));
  EXPECT_EQ(choice["finish_reason"].as_string(), "stop");
  EXPECT_EQ(body["usage"].as_object()["completion_tokens"].to_number<int64_t>(), int64_t(at) + 1);
  for (const json::value bad : {json::value(json::array{-1}), json::value(json::array{1 << 30}), json::value("2")}) {
    const Response refused = post("/v1/completions", {{"prompt", ids_json(prompt)}, {"stop_token_ids", bad}});
    EXPECT_EQ(refused.status, 400) << refused.body;
    EXPECT_NE(refused.body.find("stop_token_ids"), std::string::npos) << refused.body;
  }
}

TEST_F(Completions, StreamedTokenIdsMatchTheEngine) {
  const std::vector<int32_t> prompt = {256, 1, 2, 3, 4, 5};
  std::vector<int32_t> streamed, prompt_echo;
  const Response r = sse_request(port(), "/v1/completions",
                                 body_of({{"prompt", ids_json(prompt)},
                                          {"max_tokens", 20},
                                          {"temperature", 0},
                                          {"ignore_eos", true},
                                          {"stream", true},
                                          {"return_token_ids", true}}),
                                 [&](const std::string& payload) {
                                   if (payload == "[DONE]") return true;
                                   json::object c = parse_object(payload)["choices"].as_array().at(0).as_object();
                                   for (int32_t id : ids_of(c["token_ids"])) streamed.push_back(id);
                                   if (c.contains("prompt_token_ids")) prompt_echo = ids_of(c["prompt_token_ids"]);
                                   return true;
                                 });
  ASSERT_EQ(r.status, 200) << r.error;
  EXPECT_EQ(r.headers.at("content-type"), "text/event-stream");
  EXPECT_EQ(prompt_echo, prompt);
  EXPECT_EQ(streamed, server_->engine_greedy(prompt, 20, true));
}

TEST_F(Completions, PromptsTimesNIndexesChoicesAndSeedsThem) {
  const json::object common{{"max_tokens", 6}, {"temperature", 1.0}, {"seed", 5}, {"return_token_ids", true}};
  json::object many = common;
  many["prompt"] = json::array{"first", "second"};
  many["n"] = 2;
  const Response r = post("/v1/completions", many);
  ASSERT_EQ(r.status, 200) << r.body;
  json::array choices = parse_object(r.body)["choices"].as_array();
  ASSERT_EQ(choices.size(), 4u);
  for (size_t i = 0; i < 4; ++i) EXPECT_EQ(choices[i].as_object()["index"].to_number<int64_t>(), int64_t(i));
  EXPECT_EQ(ids_of(choices[0].as_object()["prompt_token_ids"]), server_->encode("first"));
  EXPECT_EQ(ids_of(choices[3].as_object()["prompt_token_ids"]), server_->encode("second"));
  // Choice 0 is prompt 0 with the request's own seed: a single request repeats it.
  json::object single = common;
  single["prompt"] = "first";
  const Response one = post("/v1/completions", single);
  ASSERT_EQ(one.status, 200);
  EXPECT_EQ(ids_of(parse_object(one.body)["choices"].as_array().at(0).as_object()["token_ids"]),
            ids_of(choices[0].as_object()["token_ids"]));
  // Choice 1, the second sample of prompt 0 (forked from it in the engine), draws with seed + 1.
  single["seed"] = 6;
  const Response two = post("/v1/completions", single);
  ASSERT_EQ(two.status, 200);
  EXPECT_EQ(ids_of(parse_object(two.body)["choices"].as_array().at(0).as_object()["token_ids"]),
            ids_of(choices[1].as_object()["token_ids"]));
}

TEST_F(Completions, CurlStreamsChunksUsageAndDone) {
  if (!curl_available()) GTEST_SKIP() << "curl is not installed";
  const json::object request{{"prompt", "Once upon a time"}, {"max_tokens", 10},  {"temperature", 0},
                             {"stream", true},               {"ignore_eos", true}, {"stream_options", {{"include_usage", true}}}};
  const CurlResult r = curl({"-N", "-H", "Content-Type: application/json",
                             "http://127.0.0.1:" + std::to_string(port()) + "/v1/completions"},
                            body_of(request));
  ASSERT_EQ(r.exit_code, 0) << r.body;
  ASSERT_EQ(r.http_status, 200);
  const std::vector<std::string> payloads = sse_payloads(r.body);
  ASSERT_GE(payloads.size(), 3u) << r.body;
  EXPECT_EQ(payloads.back(), "[DONE]");
  json::object usage_chunk = parse_object(payloads[payloads.size() - 2]);
  EXPECT_TRUE(usage_chunk["choices"].as_array().empty());
  EXPECT_EQ(usage_chunk["usage"].as_object()["completion_tokens"], 10);
  std::string streamed;
  for (size_t i = 0; i + 2 < payloads.size(); ++i) {
    json::object chunk = parse_object(payloads[i]);
    EXPECT_EQ(chunk["object"], "text_completion");
    EXPECT_TRUE(chunk["usage"].is_null());
    streamed += std::string(chunk["choices"].as_array().at(0).as_object()["text"].as_string());
  }
  json::object plain = request;
  plain.erase("stream");
  plain.erase("stream_options");
  const Response whole = post("/v1/completions", plain);
  EXPECT_EQ(streamed, std::string(parse_object(whole.body)["choices"].as_array().at(0).as_object()["text"].as_string()));
}

TEST_F(Completions, ExpectContinueGetsAGoAhead) {
  if (!curl_available()) GTEST_SKIP() << "curl is not installed";
  const auto start = std::chrono::steady_clock::now();
  const CurlResult r = curl({"-H", "Content-Type: application/json", "-H", "Expect: 100-continue",
                             "http://127.0.0.1:" + std::to_string(port()) + "/v1/completions"},
                            body_of({{"prompt", std::string(300, 'a')}, {"max_tokens", 2}}));
  EXPECT_EQ(r.http_status, 200) << r.body;
  // Without the go-ahead curl waits a second before it sends the body.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::milliseconds(900));
}

TEST_F(Completions, ChatStreamedAndNotAgree) {
  const json::array messages{json::object{{"role", "system"}, {"content", "Be brief."}},
                             json::object{{"role", "user"}, {"content", "Hi"}}};
  const json::object request{{"messages", messages}, {"max_tokens", 8}, {"temperature", 0}, {"return_token_ids", true}};
  const Response r = post("/v1/chat/completions", request);
  ASSERT_EQ(r.status, 200) << r.body;
  json::object body = parse_object(r.body);
  EXPECT_EQ(body["object"], "chat.completion");
  json::object message = body["choices"].as_array().at(0).as_object()["message"].as_object();
  EXPECT_EQ(message["role"], "assistant");
  // The plain template, as the embedded byte-tokenizer model uses it.
  EXPECT_EQ(ids_of(body["prompt_token_ids"]), server_->encode("Be brief.\n\nUser: Hi\nAssistant:"));

  json::object streaming = request;
  streaming["stream"] = true;
  std::string content;
  bool first = true, saw_finish = false;
  const Response s = sse_request(port(), "/v1/chat/completions", body_of(streaming), [&](const std::string& p) {
    if (p == "[DONE]") return true;
    json::object chunk = parse_object(p);
    EXPECT_EQ(chunk["object"], "chat.completion.chunk");
    json::object choice = chunk["choices"].as_array().at(0).as_object();
    json::object delta = choice["delta"].as_object();
    if (first) {
      EXPECT_EQ(delta["role"], "assistant");
    }
    first = false;
    if (delta.contains("content")) content += std::string(delta["content"].as_string());
    if (!choice["finish_reason"].is_null()) saw_finish = true;
    return true;
  });
  ASSERT_EQ(s.status, 200) << s.error;
  EXPECT_TRUE(saw_finish);
  EXPECT_EQ(content, std::string(message["content"].as_string()));
}

TEST_F(Completions, LogprobsInBothFormats) {
  const Response r = post("/v1/completions", {{"prompt", "abc"}, {"max_tokens", 5}, {"logprobs", 3}, {"ignore_eos", true}});
  ASSERT_EQ(r.status, 200) << r.body;
  json::object lp = parse_object(r.body)["choices"].as_array().at(0).as_object()["logprobs"].as_object();
  ASSERT_EQ(lp["tokens"].as_array().size(), 5u);
  EXPECT_EQ(lp["token_logprobs"].as_array().size(), 5u);
  EXPECT_EQ(lp["text_offset"].as_array().size(), 5u);
  for (const auto& top : lp["top_logprobs"].as_array()) EXPECT_LE(top.as_object().size(), 3u);
  for (const auto& v : lp["token_logprobs"].as_array()) EXPECT_LE(v.to_number<double>(), 1e-6);

  const Response c = post("/v1/chat/completions", {{"messages", json::array{json::object{{"role", "user"}, {"content", "x"}}}},
                                                   {"max_tokens", 4}, {"logprobs", true}, {"top_logprobs", 2}, {"ignore_eos", true}});
  ASSERT_EQ(c.status, 200) << c.body;
  json::array content = parse_object(c.body)["choices"].as_array().at(0).as_object()["logprobs"].as_object()["content"].as_array();
  ASSERT_EQ(content.size(), 4u);
  for (const auto& entry : content) {
    EXPECT_TRUE(entry.as_object().at("token").is_string());
    EXPECT_TRUE(entry.as_object().at("bytes").is_array());
    EXPECT_EQ(entry.as_object().at("top_logprobs").as_array().size(), 2u);
  }
}

TEST_F(Completions, StopStringEndsTheText) {
  const json::object base{{"prompt", "Tell me"}, {"max_tokens", 24}, {"temperature", 0}, {"ignore_eos", true}};
  const Response free_run = post("/v1/completions", base);
  ASSERT_EQ(free_run.status, 200);
  const std::string text(parse_object(free_run.body)["choices"].as_array().at(0).as_object()["text"].as_string());
  size_t at = 1;  // a stop string of one ASCII character that occurs after the start
  while (at < text.size() && static_cast<unsigned char>(text[at]) >= 0x80) ++at;
  if (at >= text.size()) GTEST_SKIP() << "no ASCII character in the output to stop at: " << text;
  const std::string stop = text.substr(at, 1);
  json::object with_stop = base;
  with_stop["stop"] = json::array{stop, "never-appears"};
  const Response r = post("/v1/completions", with_stop);
  ASSERT_EQ(r.status, 200) << r.body;
  json::object choice = parse_object(r.body)["choices"].as_array().at(0).as_object();
  EXPECT_EQ(std::string(choice["text"].as_string()), text.substr(0, text.find(stop)));
  EXPECT_EQ(choice["finish_reason"], "stop");
}


// session_id keeps a conversation's KV for its next turn (the second turn's
// prompt finds the first's blocks in the cache); it needs one prompt and
// n = 1; /v1/sessions/release lets go of it.
TEST_F(Completions, SessionIdKeepsTheConversationForTheNextTurn) {
  std::vector<int32_t> conversation = {256};
  for (int i = 0; i < 70; ++i) conversation.push_back(65 + (i * 7) % 26);
  auto turn = [&](const std::vector<int32_t>& prompt) {
    return post("/v1/completions", {{"prompt", ids_json(prompt)}, {"max_tokens", 10}, {"temperature", 0},
                                    {"ignore_eos", true}, {"return_token_ids", true}, {"session_id", "chat-1"}});
  };
  const Response first = turn(conversation);
  ASSERT_EQ(first.status, 200) << first.body;
  json::object c = parse_object(first.body)["choices"].as_array()[0].as_object();
  const std::vector<int32_t> answer = ids_of(c["token_ids"]);
  conversation.insert(conversation.end(), answer.begin(), answer.end());
  conversation.push_back(10);
  const Response second = turn(conversation);
  ASSERT_EQ(second.status, 200) << second.body;
  const json::object usage = parse_object(second.body)["usage"].as_object();
  // 81 tokens of the first turn: 5 full 16-token blocks.
  EXPECT_GE(usage.at("prompt_tokens_details").at("cached_tokens").to_number<int64_t>(), 80) << second.body;

  Response bad = post("/v1/completions", {{"prompt", ids_json(conversation)}, {"n", 2}, {"session_id", "x"}});
  EXPECT_EQ(bad.status, 400);
  EXPECT_EQ(parse_object(bad.body)["error"].at("param"), "session_id") << bad.body;
  bad = post("/v1/completions", {{"prompt", ids_json(conversation)}, {"session_id", std::string(300, 'x')}});
  EXPECT_EQ(bad.status, 400) << bad.body;
  EXPECT_EQ(post("/v1/sessions/release", {{"session_id", "chat-1"}}).status, 200);
  EXPECT_EQ(post("/v1/sessions/release", {{"session_id", 3}}).status, 400);
  EXPECT_EQ(post("/v1/sessions/release", {{"session", "chat-1"}}).status, 400);
}

}  // namespace
}  // namespace conveyor::http::testing


namespace conveyor::http::testing {
namespace {

// A server with --speculative ngram answers greedy requests with the text
// the plain server gives, and /metrics counts its drafts.
TEST(SpeculativeServer, SameTextAndDraftsCounted) {
  EngineConfig speculative = small_engine();
  speculative.speculative.method = SpeculativeMethod::ngram;
  TestServer plain;
  TestServer spec(speculative);
  const json::object body{{"model", plain.model_name()}, {"prompt", "Once upon a time"}, {"max_tokens", 64},
                          {"temperature", 0}, {"ignore_eos", true}};
  const Response a = http_request(plain.port(), "POST", "/v1/completions", body_of(body));
  json::object spec_body = body;
  spec_body["model"] = spec.model_name();
  const Response b = http_request(spec.port(), "POST", "/v1/completions", body_of(spec_body));
  ASSERT_EQ(a.status, 200) << a.body;
  ASSERT_EQ(b.status, 200) << b.body;
  EXPECT_EQ(json::parse(a.body).at("choices").at(0).at("text"), json::parse(b.body).at("choices").at(0).at("text"));
  const std::string metrics = http_request(spec.port(), "GET", "/metrics").body;
  EXPECT_NE(metrics.find("conveyor:spec_decode_num_draft_tokens_total "), std::string::npos) << metrics;
  EXPECT_EQ(metrics.find("conveyor:spec_decode_num_draft_tokens_total 0\n"), std::string::npos) << metrics;
  EXPECT_NE(metrics.find("conveyor:spec_decode_draft_acceptance_rate "), std::string::npos);
}

}  // namespace
}  // namespace conveyor::http::testing
