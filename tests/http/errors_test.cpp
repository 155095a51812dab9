// Every error the server answers with: 400 (invalid JSON, wrong types,
// out-of-range values, unknown model, prompt too long), 401 (API key), 404,
// 405, 413 (body too large), 429 (waiting queue full) with OpenAI-style bodies.
#include "tests/http/test_server.hpp"
#include "tests/http/test_util.hpp"

namespace conveyor::http::testing {
namespace {

namespace json = boost::json;

class Errors : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = new TestServer(); }
  static void TearDownTestSuite() { delete server_; }
  static uint16_t port() { return server_->port(); }
  static Response post(const std::string& body, const std::string& path = "/v1/completions") {
    return http_request(port(), "POST", path, body);
  }
  static TestServer* server_;
};
TestServer* Errors::server_ = nullptr;

void expect_400(const Response& r, const std::string& param = "", const std::string& code = "") {
  ASSERT_EQ(r.status, 400) << r.body << r.error;
  json::object e = error_of(r);
  EXPECT_EQ(e["type"], "invalid_request_error");
  if (!param.empty()) {
    EXPECT_EQ(e["param"], param.c_str()) << r.body;
  }
  if (!code.empty()) {
    EXPECT_EQ(e["code"], code.c_str()) << r.body;
  }
}

TEST_F(Errors, InvalidJson) {
  expect_400(post("{\"prompt\": \"x\""));
  expect_400(post("not json"));
  expect_400(post("{\"prompt\": \"x\"} trailing"));
  expect_400(post("[1, 2]"));
  expect_400(post(""));
}

TEST_F(Errors, WrongTypes) {
  expect_400(post(R"({"prompt": "x", "max_tokens": "5"})"), "max_tokens");
  expect_400(post(R"({"prompt": "x", "temperature": "hot"})"), "temperature");
  expect_400(post(R"({"prompt": "x", "stream": 1})"), "stream");
  expect_400(post(R"({"prompt": {"a": 1}})"), "prompt");
  expect_400(post(R"({"prompt": [1, "a"]})"), "prompt");
  expect_400(post(R"({"messages": "hi"})", "/v1/chat/completions"), "messages");
  expect_400(post(R"({"max_tokens": 5})"), "prompt");  // missing prompt
}

TEST_F(Errors, OutOfRange) {
  expect_400(post(R"({"prompt": "x", "temperature": -1})"), "temperature");
  expect_400(post(R"({"prompt": "x", "top_p": 1.5})"), "top_p");
  expect_400(post(R"({"prompt": "x", "max_tokens": 0})"), "max_tokens");
  expect_400(post(R"({"prompt": "x", "n": 0})"), "n");
  expect_400(post(R"({"prompt": "x", "logprobs": 21})"), "logprobs");
  expect_400(post(R"({"prompt": [1, 2, 100000]})"), "prompt");  // outside the vocabulary
  expect_400(post(R"({"prompt": "x", "logit_bias": {"5": 101}})"), "logit_bias");
  expect_400(post(R"({"prompt": "x", "logit_bias": {"100000": 1}})"), "logit_bias");  // outside the vocabulary
  expect_400(post(R"({"prompt": "x", "logit_bias": {"five": 1}})"), "logit_bias");
  expect_400(post(R"({"prompt": "x", "logit_bias": {"5": "high"}})"), "logit_bias");
  expect_400(post(R"({"prompt": "x", "logit_bias": [5]})"), "logit_bias");
}

TEST_F(Errors, UnknownModelIs404AsOpenAi) {
  for (const char* path : {"/v1/completions", "/tokenize"}) {
    const Response r = post(R"({"model": "gpt-17", "prompt": "x"})", path);
    ASSERT_EQ(r.status, 404) << r.body;
    json::object e = error_of(r);
    EXPECT_EQ(e["type"], "invalid_request_error");
    EXPECT_EQ(e["param"], "model");
    EXPECT_EQ(e["code"], "model_not_found");
  }
}

// Fields conveyor does not implement are refused by name (the whole table is
// walked in request_fields_test.cpp); harmless values of them pass.
TEST_F(Errors, UnimplementedFieldsAreRefusedByName) {
  expect_400(post(R"({"prompt": "x", "suffix": "y"})"), "suffix");
  expect_400(post(R"({"prompt": "x", "best_of": 3})"), "best_of");
  expect_400(post(R"({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function"}]})",
                  "/v1/chat/completions"),
             "tools");
  expect_400(post(R"({"messages": [{"role": "user", "content": "x"}], "modalities": ["audio"]})",
                  "/v1/chat/completions"),
             "modalities");
  expect_400(post(R"({"prompt": "x", "max_tokenz": 3})"), "max_tokenz");
  const Response ok = post(R"({"prompt": "x", "max_tokens": 1, "echo": false, "logit_bias": {}})");
  EXPECT_EQ(ok.status, 200) << ok.body;
}

TEST_F(Errors, PromptLongerThanTheContext) {
  json::array ids;
  for (int32_t i = 0; i < server_->context_length(); ++i) ids.emplace_back(65);
  expect_400(post(body_of({{"prompt", ids}})), "prompt", "context_length_exceeded");
  const std::string long_text(size_t(server_->context_length()) + 10, 'a');
  expect_400(post(body_of({{"messages", json::array{json::object{{"role", "user"}, {"content", long_text}}}}}),
                  "/v1/chat/completions"),
             "messages", "context_length_exceeded");
}

TEST_F(Errors, UnknownPathAndWrongMethod) {
  const Response missing = http_request(port(), "GET", "/v1/nothing");
  EXPECT_EQ(missing.status, 404);
  error_of(missing);
  const Response wrong = http_request(port(), "GET", "/v1/completions");
  EXPECT_EQ(wrong.status, 405);
  EXPECT_EQ(wrong.headers.at("allow"), "POST");
  error_of(wrong);
  EXPECT_EQ(http_request(port(), "POST", "/health", "{}").status, 405);
  EXPECT_EQ(http_request(port(), "HEAD", "/v1/completions").status, 405);
}

// A web page of another origin cannot drive the server: its WebSocket
// upgrade is refused, and so is a body that is not JSON (a page may send
// text/plain across origins without asking; JSON needs the server's leave).
// A header past Beast's 8 KiB: 431, as HTTP names it, not a malformed request.
TEST_F(Errors, AnOversizedHeaderIs431) {
  const std::string refused = "conveyor:http_refused_total{reason=\"header_size\"}";
  const double before = metric(port(), refused);
  const Response big = http_request(port(), "GET", "/health", "", {{"X-Padding", std::string(10000, 'a')}});
  ASSERT_EQ(big.status, 431) << big.body;
  EXPECT_EQ(error_of(big)["code"], "request_header_fields_too_large");
  EXPECT_EQ(http_request(port(), "GET", "/health").status, 200);
  EXPECT_EQ(metric(port(), refused), before + 1);
}

TEST_F(Errors, PagesOfOtherOriginsAreRefused) {
  const Headers upgrade = {{"Upgrade", "websocket"},
                           {"Connection", "Upgrade"},
                           {"Sec-WebSocket-Key", "dGhlIHNhbXBsZSBub25jZQ=="},
                           {"Sec-WebSocket-Version", "13"}};
  auto with = [&](Headers h, const std::string& origin) {
    h.emplace_back("Origin", origin);
    return h;
  };
  const Response foreign = http_request(port(), "GET", "/v1/ws", "", with(upgrade, "https://evil.example"));
  ASSERT_EQ(foreign.status, 403) << foreign.body;
  json::object e = error_of(foreign);
  EXPECT_EQ(e["code"], "origin_not_allowed");
  EXPECT_NE(e["message"].as_string().find("--allowed-origins"), std::string::npos);
  // The server's own page (Origin names the Host the client used) upgrades.
  EXPECT_EQ(http_request(port(), "GET", "/v1/ws", "", with(upgrade, "http://127.0.0.1")).status, 101);

  const Response text = http_request(port(), "POST", "/v1/completions", R"({"prompt": "x", "max_tokens": 1})",
                                     {{"Content-Type", "text/plain;charset=UTF-8"}});
  ASSERT_EQ(text.status, 415) << text.body;
  EXPECT_EQ(error_of(text)["code"], "unsupported_media_type");
  const Response form = http_request(port(), "POST", "/tokenize", R"({"prompt": "x"})",
                                     {{"Content-Type", "application/x-www-form-urlencoded"}});
  EXPECT_EQ(form.status, 415) << form.body;
  // A page's body of no type (fetch with a Blob: no preflight) is refused;
  // curl's or an SDK's (no Origin) is read as JSON.
  const Response untyped = http_request(port(), "POST", "/v1/completions", R"({"prompt": "x", "max_tokens": 1})",
                                        {{"Content-Type", ""}, {"Origin", "https://evil.example"}});
  EXPECT_EQ(untyped.status, 415) << untyped.body;
  EXPECT_EQ(http_request(port(), "POST", "/v1/completions", R"({"prompt": "x", "max_tokens": 1})",
                         {{"Content-Type", ""}})
                .status,
            200);
  EXPECT_EQ(http_request(port(), "POST", "/v1/completions", R"({"prompt": "x", "max_tokens": 1})",
                         {{"Content-Type", "Application/JSON; charset=utf-8"}})
                .status,
            200);
}

// CORS by --allowed-origins (vLLM's option): a named origin's preflight is
// granted and its answers carry Access-Control-Allow-Origin, SSE included;
// any other origin's preflight is refused, and its answers carry no grant,
// so its page cannot read them.
TEST(Cors, PreflightsAndAnswersFollowAllowedOrigins) {
  ServerOptions options;
  options.allowed_origins = {"https://app.example.com"};
  TestServer server(small_engine(), options);
  const Headers ask = {{"Origin", "https://app.example.com"},
                       {"Access-Control-Request-Method", "POST"},
                       {"Access-Control-Request-Headers", "authorization, content-type"}};
  const Response granted = http_request(server.port(), "OPTIONS", "/v1/chat/completions", "", ask);
  ASSERT_EQ(granted.status, 204) << granted.body;
  EXPECT_EQ(granted.headers.at("access-control-allow-origin"), "https://app.example.com");
  EXPECT_EQ(granted.headers.at("access-control-allow-methods"), "POST, OPTIONS");
  EXPECT_EQ(granted.headers.at("access-control-allow-headers"), "authorization, content-type");
  EXPECT_EQ(granted.headers.at("vary"), "Origin");

  const Response refused = http_request(server.port(), "OPTIONS", "/v1/chat/completions", "",
                                        {{"Origin", "https://evil.example"}, {"Access-Control-Request-Method", "POST"}});
  ASSERT_EQ(refused.status, 403) << refused.body;
  EXPECT_FALSE(refused.headers.contains("access-control-allow-origin"));
  EXPECT_EQ(http_request(server.port(), "OPTIONS", "/v1/nothing", "", ask).status, 404);
  const Response plain = http_request(server.port(), "OPTIONS", "/v1/models");  // no Origin: no grant
  EXPECT_EQ(plain.status, 204);
  EXPECT_EQ(plain.headers.at("allow"), "GET, OPTIONS");
  EXPECT_FALSE(plain.headers.contains("access-control-allow-origin"));

  const std::string body = R"({"prompt": "x", "max_tokens": 2})";
  const Response ok = http_request(server.port(), "POST", "/v1/completions", body,
                                   {{"Origin", "https://app.example.com"}, {"Content-Type", "application/json"}});
  ASSERT_EQ(ok.status, 200) << ok.body;
  EXPECT_EQ(ok.headers.at("access-control-allow-origin"), "https://app.example.com");
  const Response other = http_request(server.port(), "POST", "/v1/completions", body,
                                      {{"Origin", "https://evil.example"}, {"Content-Type", "application/json"}});
  EXPECT_FALSE(other.headers.contains("access-control-allow-origin"));
  const Response streamed = sse_request(
      server.port(), "/v1/completions", R"({"prompt": "x", "max_tokens": 2, "stream": true})",
      [](const std::string&) { return true; }, {{"Origin", "https://app.example.com"}});
  ASSERT_EQ(streamed.status, 200);
  EXPECT_EQ(streamed.headers.at("access-control-allow-origin"), "https://app.example.com");
}

// HEAD answers as GET would, without the body: the same status and
// Content-Length, and the connection stays usable.
TEST_F(Errors, HeadIsGetWithoutTheBody) {
  for (const char* path : {"/health", "/v1/models", "/metrics", "/"}) {
    const Response get = http_request(port(), "GET", path);
    const Response head = http_request(port(), "HEAD", path);
    ASSERT_EQ(get.status, 200) << path;
    EXPECT_EQ(head.status, 200) << path;
    EXPECT_EQ(head.headers.at("content-type"), get.headers.at("content-type")) << path;
    EXPECT_GT(std::stoul(head.headers.at("content-length")), 0u) << path;
    EXPECT_TRUE(head.body.empty()) << path;
  }
  EXPECT_EQ(http_request(port(), "HEAD", "/v1/nothing").status, 404);
  // A HEAD and a GET pipelined on one connection: the HEAD's head is
  // followed at once by the GET's answer, with nothing in between.
  RawClient raw(port());
  ASSERT_TRUE(raw.send("HEAD /health HTTP/1.1\r\nHost: x\r\n\r\nGET /health HTTP/1.1\r\nHost: x\r\n\r\n"));
  ASSERT_TRUE(raw.read_until("{\"status\":\"ok\"}")) << raw.received();
  const std::string& got = raw.received();
  const size_t head_end = got.find("\r\n\r\n");
  ASSERT_NE(head_end, std::string::npos) << got;
  EXPECT_TRUE(got.starts_with("HTTP/1.1 200")) << got;
  EXPECT_EQ(got.compare(head_end + 4, 12, "HTTP/1.1 200"), 0) << got;
}

// A proxy's absolute-form target (RFC 9112 3.2.2: every server must accept
// it) routes by its path and query.
TEST_F(Errors, AnAbsoluteFormTargetIsRoutedByItsPath) {
  RawClient raw(port());
  ASSERT_TRUE(raw.send("GET http://127.0.0.1/health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
                       "GET HTTPS://example.com:443/v1/models?x=1 HTTP/1.1\r\nHost: example.com\r\n\r\n"
                       "GET http://127.0.0.1/nothing HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"));
  ASSERT_TRUE(raw.read_until("no such path: /nothing")) << raw.received();
  const std::string& got = raw.received();
  EXPECT_TRUE(got.starts_with("HTTP/1.1 200")) << got;
  EXPECT_NE(got.find("{\"status\":\"ok\"}"), std::string::npos) << got;
  EXPECT_NE(got.find("\"object\":\"list\""), std::string::npos) << got;
}

TEST_F(Errors, BodyTooLarge) {
  if (!curl_available()) GTEST_SKIP() << "curl is not installed";
  const std::string refused = "conveyor:http_refused_total{reason=\"body_size\"}";
  const double before = metric(port(), refused);
  const std::string big = "{\"prompt\": \"" + std::string(2 << 20, 'a') + "\"}";
  const CurlResult r = curl({"-H", "Content-Type: application/json",
                             "http://127.0.0.1:" + std::to_string(port()) + "/v1/completions"},
                            big);
  EXPECT_EQ(r.http_status, 413) << r.body;
  EXPECT_NE(r.body.find("request_too_large"), std::string::npos) << r.body;
  // The server is still there.
  EXPECT_EQ(http_request(port(), "GET", "/health").status, 200);
  EXPECT_EQ(metric(port(), refused), before + 1);
}

TEST(ErrorsQueue, FullWaitingQueueIs429WithRetryAfter) {
  EngineConfig engine = small_engine();
  engine.max_waiting = 0;  // every request finds the queue full
  TestServer server(engine);
  for (bool stream : {false, true}) {
    const Response r = http_request(server.port(), "POST", "/v1/completions",
                                    body_of({{"prompt", "x"}, {"stream", stream}}));
    ASSERT_EQ(r.status, 429) << r.body;
    EXPECT_EQ(r.headers.count("retry-after"), 1u);
    EXPECT_EQ(error_of(r)["type"], "rate_limit_error");
  }
}

TEST(ErrorsAuth, ApiKeyGuardsTheApi) {
  ServerOptions options;
  options.api_key = "sekrit";
  TestServer server(small_engine(), options);
  const std::string body = R"({"prompt": "x", "max_tokens": 2})";
  const Response none = http_request(server.port(), "POST", "/v1/completions", body);
  EXPECT_EQ(none.status, 401);
  EXPECT_EQ(error_of(none)["type"], "authentication_error");
  EXPECT_EQ(http_request(server.port(), "POST", "/v1/completions", body, {{"Authorization", "Bearer wrong"}}).status, 401);
  EXPECT_EQ(http_request(server.port(), "GET", "/v1/models", "", {{"Authorization", "sekrit"}}).status, 401);
  EXPECT_EQ(http_request(server.port(), "POST", "/v1/completions", body, {{"Authorization", "Bearer sekrit"}}).status, 200);
  EXPECT_EQ(http_request(server.port(), "GET", "/health").status, 200);  // probes need no key
  WsClient ws(server.port());
  EXPECT_FALSE(ws.connected());
  EXPECT_EQ(ws.upgrade_status(), 401);
  WsClient keyed(server.port(), {{"Authorization", "Bearer sekrit"}});
  EXPECT_TRUE(keyed.connected());
}

}  // namespace
}  // namespace conveyor::http::testing
