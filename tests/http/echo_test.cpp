// echo and prompt_logprobs on /v1/completions and /v1/chat/completions, end
// to end on the embedded model: the echoed text and logprobs lists (lengths,
// the first token's nulls, offsets), max_tokens 0 scoring the prompt alone,
// streaming, vLLM's prompt_logprobs shape, and the refusals naming their field.
#include <map>

#include "http/prompt_output_json.hpp"
#include "tests/http/test_server.hpp"
#include "tests/http/test_util.hpp"

namespace conveyor::http::testing {
namespace {

namespace json = boost::json;

class Echo : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = new TestServer(); }
  static void TearDownTestSuite() { delete server_; }
  static Response post(const std::string& path, const json::object& body) {
    return http_request(server_->port(), "POST", path, body_of(body));
  }
  static json::object first_choice(const Response& r) {
    return parse_object(r.body)["choices"].as_array().at(0).as_object();
  }
  static TestServer* server_;
};
TestServer* Echo::server_ = nullptr;

constexpr const char* kPrompt = "Once upon a time";

TEST_F(Echo, TextAndLogprobsCoverThePrompt) {
  const json::object common{{"prompt", kPrompt}, {"max_tokens", 5}, {"temperature", 0},
                            {"ignore_eos", true}, {"logprobs", 2}};
  const Response plain = post("/v1/completions", common);
  json::object echoed_request = common;
  echoed_request["echo"] = true;
  const Response echoed = post("/v1/completions", echoed_request);
  ASSERT_EQ(plain.status, 200) << plain.body;
  ASSERT_EQ(echoed.status, 200) << echoed.body;
  json::object p = first_choice(plain), e = first_choice(echoed);
  EXPECT_EQ(std::string(e["text"].as_string()), std::string(kPrompt) + std::string(p["text"].as_string()));

  const size_t prompt_tokens = server_->encode(kPrompt).size();
  json::object lp = e["logprobs"].as_object(), plain_lp = p["logprobs"].as_object();
  for (const char* list : {"tokens", "token_logprobs", "top_logprobs", "text_offset"})
    EXPECT_EQ(lp[list].as_array().size(), prompt_tokens + 5) << list;
  // The first prompt token has no position before it: null, as OpenAI and vLLM write it.
  EXPECT_TRUE(lp["token_logprobs"].as_array()[0].is_null());
  EXPECT_TRUE(lp["top_logprobs"].as_array()[0].is_null());
  for (size_t i = 1; i < prompt_tokens + 5; ++i) {
    EXPECT_LE(lp["token_logprobs"].as_array()[i].to_number<double>(), 0.0) << i;
    EXPECT_LE(lp["top_logprobs"].as_array()[i].as_object().size(), 2u) << i;
  }
  // Offsets count characters from the start of the echoed text; the generated part is the plain answer's.
  const json::array& offsets = lp["text_offset"].as_array();
  EXPECT_EQ(offsets[0].to_number<int64_t>(), 0);
  for (size_t i = 1; i < offsets.size(); ++i)
    EXPECT_GE(offsets[i].to_number<int64_t>(), offsets[i - 1].to_number<int64_t>());
  for (size_t i = 0; i < 5; ++i)
    EXPECT_NEAR(lp["token_logprobs"].as_array()[prompt_tokens + i].to_number<double>(),
                plain_lp["token_logprobs"].as_array()[i].to_number<double>(), 1e-6);
}

// A SentencePiece tokenizer writes a space before the first word that the
// echoed text does not show, and a BOS of no bytes: offsets index the text
// as returned ("Hello world": the second word at 5, not 6).
class SpacedTokenizer : public Tokenizer {
 public:
  int32_t vocab_size() const override { return 3; }
  std::string token_bytes(int32_t id) const override {
    static const std::map<int32_t, std::string> text = {{0, ""}, {1, " Hello"}, {2, " world"}};
    return text.at(id);
  }
  std::string decode(std::span<const int32_t> ids) const override {
    std::string out;
    for (int32_t id : ids) out += token_bytes(id);
    return out.empty() ? out : out.substr(1);
  }
  std::string piece(int32_t id) const override { return token_bytes(id); }

 protected:
  void encode_text(std::string_view, bool, std::vector<int32_t>&) const override {}
};

TEST(EchoOffsets, IndexTheEchoedText) {
  const SpacedTokenizer tok;
  const std::vector<int32_t> prompt = {0, 1, 2};
  detail::LogprobLists lists;
  size_t offset = 0;
  detail::append_prompt_logprobs(&tok, prompt, {}, 0, "Hello world", lists, offset);
  ASSERT_EQ(lists.text_offset.size(), 3u);
  EXPECT_EQ(lists.text_offset[0], 0);
  EXPECT_EQ(lists.text_offset[1], 0);
  EXPECT_EQ(lists.text_offset[2], 5);
  EXPECT_EQ(offset, 11u);  // the generated tokens count on from the text's end
}

// Offsets count characters (code points), as OpenAI and vLLM count them,
// not bytes; a byte token inside a character is at that character.
class AccentedTokenizer : public SpacedTokenizer {
 public:
  int32_t vocab_size() const override { return 7; }
  std::string token_bytes(int32_t id) const override {
    static const std::map<int32_t, std::string> text = {
        {3, " w\xC3\xB6rld"}, {4, "\xC3"}, {5, "\xA9"}, {6, "!"}};
    return id < 3 ? SpacedTokenizer::token_bytes(id) : text.at(id);
  }
};

TEST(EchoOffsets, CountCharacters) {
  const AccentedTokenizer tok;
  const std::vector<int32_t> prompt = {0, 1, 3, 4, 5, 2};
  detail::LogprobLists lists;
  size_t offset = 0;
  detail::append_prompt_logprobs(&tok, prompt, {}, 0, "Hello w\xC3\xB6rld\xC3\xA9 world", lists, offset);
  ASSERT_EQ(lists.text_offset.size(), 6u);
  const std::vector<int64_t> want = {0, 0, 5, 11, 11, 12};  // the two byte tokens are both the é at 11
  for (size_t i = 0; i < want.size(); ++i) EXPECT_EQ(lists.text_offset[i].to_number<int64_t>(), want[i]) << i;
  EXPECT_EQ(offset, 18u);
  // Generated tokens count on: é as two byte tokens, then "!".
  EXPECT_EQ(detail::next_text_offset(tok.token_bytes(4), offset), 18u);
  EXPECT_EQ(detail::next_text_offset(tok.token_bytes(5), offset), 18u);
  EXPECT_EQ(detail::next_text_offset(tok.token_bytes(6), offset), 19u);
  EXPECT_EQ(offset, 20u);
}

// echo with max_tokens 0 is the "score this text" call: the prompt alone,
// with its logprobs, no completion tokens.
TEST_F(Echo, MaxTokensZeroScoresThePromptAlone) {
  const Response r = post("/v1/completions", {{"prompt", kPrompt}, {"max_tokens", 0}, {"echo", true}, {"logprobs", 0}});
  ASSERT_EQ(r.status, 200) << r.body;
  json::object body = parse_object(r.body);
  json::object c = body["choices"].as_array().at(0).as_object();
  EXPECT_EQ(std::string(c["text"].as_string()), kPrompt);
  EXPECT_EQ(c["finish_reason"], "length");
  const size_t prompt_tokens = server_->encode(kPrompt).size();
  EXPECT_EQ(c["logprobs"].as_object()["tokens"].as_array().size(), prompt_tokens);
  EXPECT_EQ(body["usage"].as_object()["completion_tokens"], 0);
  EXPECT_EQ(body["usage"].as_object()["prompt_tokens"].to_number<int64_t>(), int64_t(prompt_tokens));

  const Response refused = post("/v1/completions", {{"prompt", kPrompt}, {"max_tokens", 0}});
  EXPECT_EQ(refused.status, 400);
  EXPECT_EQ(error_of(refused)["param"], "max_tokens");
}

// vLLM's shape: a list per choice, null first, then {"<id>": {logprob, rank,
// decoded_token}} with the prompt's token and the K most likely; the same
// numbers as echo's logprobs.
TEST_F(Echo, PromptLogprobsFollowVllm) {
  const Response r = post("/v1/completions", {{"prompt", kPrompt}, {"max_tokens", 2}, {"temperature", 0},
                                              {"prompt_logprobs", 3}, {"echo", true}, {"logprobs", 1}, {"n", 2}});
  ASSERT_EQ(r.status, 200) << r.body;
  const std::vector<int32_t> ids = server_->encode(kPrompt);
  json::array choices = parse_object(r.body)["choices"].as_array();
  ASSERT_EQ(choices.size(), 2u);
  for (const json::value& choice : choices) {
    json::object c = choice.as_object();
    EXPECT_TRUE(std::string(c["text"].as_string()).starts_with(kPrompt));
    const json::array& pl = c["prompt_logprobs"].as_array();
    ASSERT_EQ(pl.size(), ids.size());
    EXPECT_TRUE(pl[0].is_null());
    const json::array& echoed = c["logprobs"].as_object()["token_logprobs"].as_array();
    for (size_t i = 1; i < ids.size(); ++i) {
      const json::object& position = pl[i].as_object();
      EXPECT_GE(position.size(), 3u);
      EXPECT_LE(position.size(), 4u);
      const json::object& own = position.at(std::to_string(ids[i])).as_object();
      EXPECT_GE(own.at("rank").to_number<int64_t>(), 1);
      EXPECT_TRUE(own.at("decoded_token").is_string());
      EXPECT_NEAR(own.at("logprob").to_number<double>(), echoed[i].to_number<double>(), 1e-6);
      int64_t rank_one = 0;
      for (const auto& entry : position) rank_one += entry.value().as_object().at("rank").to_number<int64_t>() == 1;
      EXPECT_EQ(rank_one, 1) << i;
    }
  }
  const json::array messages = {json::object{{"role", "user"}, {"content", "Hi"}}};
  const Response chat = post("/v1/chat/completions", {{"messages", messages}, {"max_tokens", 1}, {"prompt_logprobs", 0}});
  ASSERT_EQ(chat.status, 200) << chat.body;
  json::object body = parse_object(chat.body);
  const json::array& pl = body["prompt_logprobs"].as_array();
  EXPECT_EQ(int64_t(pl.size()), body["usage"].as_object()["prompt_tokens"].to_number<int64_t>());
  EXPECT_TRUE(pl[0].is_null());
  EXPECT_EQ(pl[1].as_object().size(), 1u);  // K = 0: the prompt's own token only
}

// Streamed, the prompt's text and logprobs open the first chunk; the chunks
// add up to the answer that is not streamed.
TEST_F(Echo, StreamedPromptComesFirst) {
  const json::object request{{"prompt", kPrompt}, {"max_tokens", 6}, {"temperature", 0}, {"ignore_eos", true},
                             {"echo", true}, {"logprobs", 1}};
  json::object streamed_request = request;
  streamed_request["stream"] = true;
  std::string text;
  size_t tokens = 0;
  bool first = true;
  const Response r = sse_request(server_->port(), "/v1/completions", body_of(streamed_request),
                                 [&](const std::string& payload) {
                                   if (payload == "[DONE]") return true;
                                   json::object c = parse_object(payload)["choices"].as_array().at(0).as_object();
                                   const std::string piece(c["text"].as_string());
                                   if (first) {
                                     EXPECT_TRUE(piece.starts_with(kPrompt)) << piece;
                                   }
                                   first = false;
                                   text += piece;
                                   if (c["logprobs"].is_object()) tokens += c["logprobs"].as_object()["tokens"].as_array().size();
                                   return true;
                                 });
  ASSERT_EQ(r.status, 200) << r.error;
  const Response whole = post("/v1/completions", request);
  EXPECT_EQ(text, std::string(first_choice(whole)["text"].as_string()));
  EXPECT_EQ(tokens, server_->encode(kPrompt).size() + 6);
}

// Over the WebSocket, the prompt's text opens the first delta; the deltas add
// up to the echoed answer; prompt_logprobs, which a delta cannot carry, is refused.
TEST_F(Echo, WebSocketDeltasStartWithThePrompt) {
  WsClient ws(server_->port());
  ASSERT_TRUE(ws.connected()) << ws.upgrade_status();
  const json::object request{{"prompt", kPrompt}, {"max_tokens", 4}, {"temperature", 0}, {"ignore_eos", true},
                             {"echo", true}};
  json::object message = request;
  message["id"] = "e";
  ws.send(body_of(message));
  std::string text;
  bool first = true, final_seen = false;
  while (!final_seen) {
    const auto m = ws.read();
    ASSERT_TRUE(m.has_value());
    json::object event = parse_object(*m);
    if (event["type"] == "final") {
      final_seen = true;
      continue;
    }
    ASSERT_EQ(event["type"], "delta") << *m;
    const std::string piece(event["text"].as_string());
    if (first) {
      EXPECT_TRUE(piece.starts_with(kPrompt)) << piece;
    }
    first = false;
    text += piece;
  }
  EXPECT_EQ(text, std::string(first_choice(post("/v1/completions", request))["text"].as_string()));

  json::object scored = message;
  scored["prompt_logprobs"] = 1;
  ws.send(body_of(scored));
  const auto refused = ws.read();
  ASSERT_TRUE(refused.has_value());
  json::object error = parse_object(*refused);
  EXPECT_EQ(error["type"], "error") << *refused;
  EXPECT_EQ(error["error"].as_object()["param"], "prompt_logprobs") << *refused;
}

TEST_F(Echo, RefusalsNameTheirField) {
  const json::array messages = {json::object{{"role", "user"}, {"content", "Hi"}}};
  struct Case {
    std::string path;
    json::object body;
    std::string param;
  };
  const std::vector<Case> cases = {
      {"/v1/completions", {{"prompt", "x"}, {"prompt_logprobs", 21}}, "prompt_logprobs"},
      {"/v1/completions", {{"prompt", "x"}, {"prompt_logprobs", -1}}, "prompt_logprobs"},
      {"/v1/completions", {{"prompt", "x"}, {"prompt_logprobs", 2}, {"stream", true}}, "prompt_logprobs"},
      {"/v1/completions", {{"prompt", "x"}, {"echo", "yes"}}, "echo"},
      {"/v1/completions", {{"prompt", "x"}, {"echo", true}, {"best_of", 2}}, "best_of"},
      {"/v1/chat/completions", {{"messages", messages}, {"echo", true}}, "echo"},
  };
  for (const Case& c : cases) {
    const Response r = post(c.path, c.body);
    EXPECT_EQ(r.status, 400) << body_of(c.body);
    EXPECT_EQ(error_of(r)["param"], json::value(c.param)) << r.body;
  }
}

}  // namespace
}  // namespace conveyor::http::testing
