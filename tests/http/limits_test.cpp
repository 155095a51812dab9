// The limits of a public server, against a real server and real clients:
// API keys from a file with per-key limits (concurrency, tokens per minute),
// a reload of that file, the header and idle timeouts (a silent client, a
// slowloris), the connection cap, the WebSocket message size and rate, and
// the /metrics counters of what was refused.
//
// Timing: the timeouts under test are short (a second or less) and every
// wait for their effect is long (many seconds), so a loaded machine makes a
// test slower, not wrong.
#include <atomic>
#include <fstream>
#include <thread>

#include "tests/http/test_server.hpp"
#include "tests/http/test_util.hpp"

namespace conveyor::http::testing {
namespace {

namespace json = boost::json;
using std::chrono::milliseconds;
using std::chrono::seconds;

constexpr milliseconds kGenerous{20000};

std::string write_key_file(const std::string& name, const std::string& text) {
  const std::string path = ::testing::TempDir() + name;
  std::ofstream(path) << text;
  return path;
}

Headers bearer(const std::string& key) { return {{"Authorization", "Bearer " + key}}; }

double refused(uint16_t port, const std::string& reason) {
  return metric(port, "conveyor:http_refused_total{reason=\"" + reason + "\"}");
}

const std::string kShort = R"({"prompt": "x", "max_tokens": 2})";
// As long a request as the embedded model's 512-token context allows, eight times.
const std::string kLongStream =
    body_of({{"prompt", "x"}, {"max_tokens", 500}, {"ignore_eos", true}, {"stream", true}, {"n", 8}});

// A streaming request on its own thread, held open until release(); it
// hangs up then, unless it has ended by itself (`finished`: [DONE] came).
struct HeldStream {
  std::thread thread;
  std::atomic<bool> streaming{false};
  std::atomic<bool> finished{false};
  std::atomic<bool> release_now{false};

  HeldStream(uint16_t port, const Headers& headers) {
    thread = std::thread([this, port, headers] {
      sse_request(
          port, "/v1/completions", kLongStream,
          [this](const std::string& payload) {
            streaming = true;
            if (payload == "[DONE]") finished = true;
            return !release_now.load();
          },
          headers);
      finished = true;
    });
  }
  void release() {
    release_now = true;
    if (thread.joinable()) thread.join();
  }
  ~HeldStream() { release(); }
};

// A request of `key` made while another of the same key streams: the
// answer, once the other was surely still running when it came (the server
// ends a request's place just before its last chunk, so an answer that came
// after the other's end is no evidence either way: try again, a few times).
Response request_while_streaming(uint16_t port, const std::string& key) {
  for (int attempt = 0; attempt < 5; ++attempt) {
    HeldStream stream(port, {{"Authorization", "Bearer " + key}});
    if (!eventually([&] { return stream.streaming.load(); }, kGenerous)) break;
    const Response r = http_request(port, "POST", "/v1/completions", kShort, {{"Authorization", "Bearer " + key}});
    if (r.status == 429) return r;
    if (!eventually([&] { return stream.finished.load(); }, milliseconds(3000)))
      return r;  // admitted while the other still streams: wrong, and the caller says so
  }
  ADD_FAILURE() << "the long request ended before the next one came, five times";
  return {};
}

const char* kTwoKeys = R"(
[[key]]
key = "sk-one-at-a-time"
name = "single"
max_concurrent = 1

[[key]]
key = "sk-unlimited"
name = "open"
)";

TEST(Limits, KeyFileKeysHaveTheirOwnConcurrency) {
  ServerOptions options;
  options.api_key_file = write_key_file("limits_two_keys.toml", kTwoKeys);
  TestServer server(small_engine(), options);
  const uint16_t port = server.port();
  EXPECT_EQ(http_request(port, "POST", "/v1/completions", kShort).status, 401);
  EXPECT_EQ(http_request(port, "POST", "/v1/completions", kShort, bearer("sk-nope")).status, 401);
  ASSERT_EQ(http_request(port, "POST", "/v1/completions", kShort, bearer("sk-one-at-a-time")).status, 200);

  const Response r = request_while_streaming(port, "sk-one-at-a-time");
  ASSERT_EQ(r.status, 429) << r.body;
  EXPECT_EQ(r.headers.count("retry-after"), 1u);
  json::object e = error_of(r);
  EXPECT_EQ(e["type"], "rate_limit_error");
  EXPECT_EQ(e["code"], "concurrency_limit_exceeded");
  EXPECT_NE(std::string(e["message"].as_string()).find("'single'"), std::string::npos) << r.body;
  EXPECT_NE(std::string(e["message"].as_string()).find("max_concurrent"), std::string::npos) << r.body;
  EXPECT_EQ(refused(port, "concurrency"), 1);
  // The other key has no limit: two streams at once.
  {
    HeldStream open(port, bearer("sk-unlimited"));
    ASSERT_TRUE(eventually([&] { return open.streaming.load(); }, kGenerous));
    EXPECT_EQ(http_request(port, "POST", "/v1/completions", kShort, bearer("sk-unlimited")).status, 200);
  }
  // The held stream hung up (or ended): its place is free again.
  EXPECT_TRUE(eventually(
      [&] { return http_request(port, "POST", "/v1/completions", kShort, bearer("sk-one-at-a-time")).status == 200; },
      kGenerous));
}

// A session (session_id) belongs to the key that made it: another key that
// names the same session gets a session of its own, and its release lets go
// of that one only (conveyor:sessions_held counts them).
TEST(Limits, SessionsBelongToTheirKey) {
  ServerOptions options;
  options.api_key_file = write_key_file("limits_sessions.toml", kTwoKeys);
  TestServer server(small_engine(), options);
  const uint16_t port = server.port();
  std::vector<int32_t> prompt = {256};
  for (int i = 0; i < 40; ++i) prompt.push_back(65 + (i * 7) % 26);
  auto turn = [&](const std::string& key) {
    const Response r = http_request(port, "POST", "/v1/completions",
                                    body_of({{"prompt", ids_json(prompt)}, {"max_tokens", 4}, {"temperature", 0},
                                             {"ignore_eos", true}, {"session_id", "shared-name"}}),
                                    bearer(key));
    EXPECT_EQ(r.status, 200) << r.body;
  };
  auto release = [&](const std::string& key) {
    EXPECT_EQ(http_request(port, "POST", "/v1/sessions/release", R"({"session_id": "shared-name"})", bearer(key))
                  .status,
              200);
  };
  auto held = [&] { return metric(port, "conveyor:sessions_held"); };
  turn("sk-unlimited");
  ASSERT_TRUE(eventually([&] { return held() == 1; }, kGenerous));
  release("sk-one-at-a-time");  // not its session
  turn("sk-one-at-a-time");     // a session of its own, under the same name
  ASSERT_TRUE(eventually([&] { return held() == 2; }, kGenerous));
  release("sk-one-at-a-time");
  ASSERT_TRUE(eventually([&] { return held() == 1; }, kGenerous));
  release("sk-unlimited");
  EXPECT_TRUE(eventually([&] { return held() == 0; }, kGenerous));
}

TEST(Limits, TokensPerMinuteRefusesOnceSpent) {
  // 40 tokens a minute: one request of 60 generated tokens overdraws it by
  // about 20 (plus its prompt), which takes half a minute to pay back.
  ServerOptions options;
  options.api_key_file =
      write_key_file("limits_rate.toml", "[[key]]\nkey = \"sk-rate\"\nname = \"metered\"\ntokens_per_minute = 40\n");
  TestServer server(small_engine(), options);
  const std::string sixty = body_of({{"prompt", "x"}, {"max_tokens", 60}, {"ignore_eos", true}});
  ASSERT_EQ(http_request(server.port(), "POST", "/v1/completions", sixty, bearer("sk-rate")).status, 200);
  for (bool stream : {false, true}) {
    const Response r = http_request(server.port(), "POST", "/v1/completions",
                                    body_of({{"prompt", "x"}, {"max_tokens", 2}, {"stream", stream}}), bearer("sk-rate"));
    ASSERT_EQ(r.status, 429) << r.body;
    json::object e = error_of(r);
    EXPECT_EQ(e["type"], "rate_limit_error");
    EXPECT_EQ(e["code"], "tokens_per_minute_exceeded");
    EXPECT_NE(std::string(e["message"].as_string()).find("'metered'"), std::string::npos) << r.body;
    ASSERT_EQ(r.headers.count("retry-after"), 1u);
    const int retry = std::stoi(r.headers.at("retry-after"));
    EXPECT_GE(retry, 10);  // ~20 tokens of debt at 40 a minute
    EXPECT_LE(retry, 60);
  }
  EXPECT_EQ(refused(server.port(), "rate_limit"), 2);
}

// A prompt the engine refuses (its waiting queue full) gives its tokens
// back: 60-token prompts against 40 tokens a minute stay queue_full, over
// HTTP and WebSocket, and never turn into tokens_per_minute_exceeded.
TEST(Limits, PromptsTheEngineRefusesAreNotCharged) {
  ServerOptions options;
  options.api_key_file =
      write_key_file("limits_refund.toml", "[[key]]\nkey = \"sk-rate\"\nname = \"metered\"\ntokens_per_minute = 40\n");
  EngineConfig engine = small_engine();
  engine.max_waiting = 0;  // every request finds the queue full
  TestServer server(engine, options);
  std::string words;
  for (int i = 0; i < 60; ++i) words += " once";
  for (int i = 0; i < 4; ++i) {
    const Response r = http_request(server.port(), "POST", "/v1/completions",
                                    body_of({{"prompt", words}, {"max_tokens", 2}, {"n", 2}}), bearer("sk-rate"));
    ASSERT_EQ(r.status, 429) << r.body;
    EXPECT_EQ(error_of(r)["code"], "queue_full") << "request " << i;
  }
  WsClient ws(server.port(), {{"Authorization", "Bearer sk-rate"}});
  ASSERT_TRUE(ws.connected());
  for (int i = 0; i < 4; ++i) {
    ws.send(json::serialize(json::object{{"id", i}, {"prompt", words}, {"max_tokens", 2}}));
    const auto answer = ws.read();
    ASSERT_TRUE(answer) << "request " << i;
    EXPECT_NE(answer->find("queue_full"), std::string::npos) << *answer;
  }
  EXPECT_EQ(refused(server.port(), "rate_limit"), 0);
}

TEST(Limits, ReloadReplacesKeysAndABadFileKeepsThem) {
  ServerOptions options;
  options.api_key_file = write_key_file("limits_reload.toml", "[[key]]\nkey = \"sk-first\"\n");
  TestServer server(small_engine(), options);
  const uint16_t port = server.port();
  EXPECT_EQ(http_request(port, "GET", "/v1/models", "", bearer("sk-first")).status, 200);
  EXPECT_EQ(http_request(port, "GET", "/v1/models", "", bearer("sk-second")).status, 401);

  write_key_file("limits_reload.toml", "[[key]]\nkey = \"sk-second\"\n");
  ASSERT_TRUE(server.reload_api_keys());
  EXPECT_EQ(http_request(port, "GET", "/v1/models", "", bearer("sk-first")).status, 401);
  EXPECT_EQ(http_request(port, "GET", "/v1/models", "", bearer("sk-second")).status, 200);

  write_key_file("limits_reload.toml", "[[key]]\nkey = \"sk-third\"\nmax_concurrent = -1\n");
  const Status bad = server.reload_api_keys();
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("max_concurrent"), std::string::npos) << bad.error().message;
  EXPECT_EQ(http_request(port, "GET", "/v1/models", "", bearer("sk-second")).status, 200);
  EXPECT_EQ(http_request(port, "GET", "/v1/models", "", bearer("sk-third")).status, 401);
}

TEST(Limits, ABadKeyFileFailsTheStart) {
  ServerOptions options;
  options.api_key_file = write_key_file("limits_bad.toml", "[[key]]\nname = \"no key\"\n");
  EXPECT_THROW(TestServer(small_engine(), options), std::runtime_error);
  options.api_key_file = "/nonexistent/keys.toml";
  EXPECT_THROW(TestServer(small_engine(), options), std::runtime_error);
}

TEST(Limits, SilentConnectionIsClosedAtTheHeaderTimeout) {
  ServerOptions options;
  options.header_timeout_seconds = 0.3;
  TestServer server(small_engine(), options);
  RawClient silent(server.port());
  ASSERT_TRUE(silent.connected());
  const auto start = std::chrono::steady_clock::now();
  std::string received;
  EXPECT_TRUE(silent.wait_closed(kGenerous, &received));
  EXPECT_GE(std::chrono::steady_clock::now() - start, milliseconds(250));
  EXPECT_EQ(received, "");  // closed without a word
  EXPECT_EQ(refused(server.port(), "header_timeout"), 1);
}

TEST(Limits, SlowlorisIsClosedThoughBytesKeepComing) {
  ServerOptions options;
  options.header_timeout_seconds = 1.0;
  TestServer server(small_engine(), options);
  RawClient slow(server.port());
  ASSERT_TRUE(slow.send("GET /health HTTP/1.1\r\nHost: x\r\nX-Slow: "));
  const auto start = std::chrono::steady_clock::now();
  bool closed = false;
  // One byte every 50 ms, never the end of the header, for up to 20 s.
  while (!closed && std::chrono::steady_clock::now() - start < kGenerous) {
    closed = !slow.send("a") || slow.wait_closed(milliseconds(50));
  }
  EXPECT_TRUE(closed) << "a client trickling a header was never closed";
  EXPECT_GE(std::chrono::steady_clock::now() - start, milliseconds(900));
  EXPECT_EQ(refused(server.port(), "header_timeout"), 1);
}

TEST(Limits, KeepAliveConnectionIsClosedWhenIdle) {
  ServerOptions options;
  options.idle_timeout_seconds = 0.3;
  TestServer server(small_engine(), options);
  RawClient client(server.port());
  ASSERT_TRUE(client.send("GET /health HTTP/1.1\r\nHost: x\r\n\r\n"));
  ASSERT_TRUE(client.read_until("{\"status\":\"ok\"}")) << client.received();
  const auto answered = std::chrono::steady_clock::now();
  EXPECT_TRUE(client.wait_closed(kGenerous));
  EXPECT_GE(std::chrono::steady_clock::now() - answered, milliseconds(250));
  EXPECT_TRUE(eventually([&] { return refused(server.port(), "idle_timeout") == 1; }));
  EXPECT_EQ(refused(server.port(), "header_timeout"), 0);
}

TEST(Limits, ConnectionsPastTheCapGet503AndTheOthersCarryOn) {
  ServerOptions options;
  options.max_connections = 2;
  options.header_timeout_seconds = 60;  // the held connections stay open for the test
  TestServer server(small_engine(), options);
  RawClient first(server.port());
  RawClient second(server.port());
  ASSERT_TRUE(first.connected() && second.connected());
  // Both are counted once their sessions started: a third is refused.
  ASSERT_TRUE(first.send("GET /health HTTP/1.1\r\nHost: x\r\n\r\n"));
  ASSERT_TRUE(first.read_until("{\"status\":\"ok\"}"));
  const Response refused_one = http_request(server.port(), "GET", "/health");
  ASSERT_EQ(refused_one.status, 503) << refused_one.body << refused_one.error;
  EXPECT_EQ(refused_one.headers.count("retry-after"), 1u);
  EXPECT_EQ(error_of(refused_one)["code"], "too_many_connections");
  // The open connections are untouched.
  ASSERT_TRUE(second.send("GET /health HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_TRUE(second.read_until("{\"status\":\"ok\"}"));
  first.take_received();
  ASSERT_TRUE(first.send("GET /health HTTP/1.1\r\nHost: x\r\n\r\n"));
  EXPECT_TRUE(first.read_until("{\"status\":\"ok\"}"));
  // One goes: a new connection gets its place (once the server noticed).
  first.close();
  EXPECT_TRUE(eventually([&] { return http_request(server.port(), "GET", "/health").status == 200; }, kGenerous));
  second.close();
  EXPECT_TRUE(eventually([&] { return refused(server.port(), "connections") >= 1; }, kGenerous));
}

TEST(Limits, WebSocketMessageOverMaxBodyBytesClosesWith1009) {
  ServerOptions options;
  options.max_body_bytes = 1024;
  TestServer server(small_engine(), options);
  WsClient ws(server.port());
  ASSERT_TRUE(ws.connected());
  ws.send(body_of({{"id", 1}, {"prompt", std::string(4096, 'a')}, {"max_tokens", 1}}));
  EXPECT_FALSE(ws.read(kGenerous).has_value());
  EXPECT_EQ(ws.close_code(), 1009);
  EXPECT_EQ(refused(server.port(), "ws_message_size"), 1);
  // A message within the bound on a new socket runs.
  WsClient ok(server.port());
  ok.send(body_of({{"id", 2}, {"prompt", "x"}, {"max_tokens", 1}}));
  auto message = ok.read();
  ASSERT_TRUE(message.has_value());
}

// Opens /v1/ws on a raw connection, for frames written by hand.
void upgrade_to_websocket(RawClient& raw) {
  ASSERT_TRUE(raw.send("GET /v1/ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                       "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\nSec-WebSocket-Version: 13\r\n\r\n"));
  ASSERT_TRUE(raw.read_until("\r\n\r\n")) << raw.received();
  ASSERT_NE(raw.received().find(" 101 "), std::string::npos) << raw.received();
}

// A frame whose header declares more than max_body_bytes is refused as soon
// as the header comes, not when the bytes have (a client could take that
// long, or send a few and stall until the idle timeout).
TEST(Limits, WebSocketFrameDeclaringTooManyBytesClosesWith1009AtOnce) {
  ServerOptions options;
  options.max_body_bytes = 1024;
  options.idle_timeout_seconds = 60;
  TestServer server(small_engine(), options);
  RawClient client(server.port());
  ASSERT_NO_FATAL_FAILURE(upgrade_to_websocket(client));
  client.take_received();
  // A masked text frame declaring 2^30 bytes (a 64-bit length): its mask and 10 of them.
  ASSERT_TRUE(client.send(std::string("\x81\xff\0\0\0\0\x40\0\0\0", 10) + "abcd" + std::string(10, 'x')));
  const auto sent = std::chrono::steady_clock::now();
  // A close frame of code 1009, long before the idle timeout.
  EXPECT_TRUE(client.read_until(std::string("\x88\x02\x03\xf1", 4))) << client.received().size() << " bytes";
  EXPECT_LT(std::chrono::steady_clock::now() - sent, seconds(20));
  EXPECT_TRUE(eventually([&] { return refused(server.port(), "ws_message_size") >= 1; }));
  // A frame within the bound on a new socket runs.
  WsClient ok(server.port());
  ok.send(body_of({{"id", 2}, {"prompt", "x"}, {"max_tokens", 1}}));
  EXPECT_TRUE(ok.read().has_value());
}

// A WebSocket client that stops halfway through a frame is closed at the
// idle timeout (it held its connection, and a place under max_connections,
// for good): a close frame of code 1008, then the socket, at the closing
// handshake's limit (header_timeout) since it does not answer. (One that
// only listens answers the server's pings, sent at half the idle timeout, as
// Beast's and browsers' clients do while they read.)
TEST(Limits, WebSocketStalledMidMessageIsClosed) {
  ServerOptions options;
  options.idle_timeout_seconds = 0.6;
  options.header_timeout_seconds = 1;
  TestServer server(small_engine(), options);
  RawClient stalled(server.port());
  ASSERT_NO_FATAL_FAILURE(upgrade_to_websocket(stalled));
  stalled.take_received();
  // A masked text frame of 100 bytes: its mask and 10 of them, then nothing.
  ASSERT_TRUE(stalled.send(std::string("\x81\xe4", 2) + "abcd" + std::string(10, 'x')));
  const auto sent = std::chrono::steady_clock::now();
  EXPECT_TRUE(stalled.read_until(std::string("\x88\x02\x03\xf0", 4))) << stalled.received().size() << " bytes";
  EXPECT_TRUE(stalled.wait_closed(kGenerous));
  EXPECT_GE(std::chrono::steady_clock::now() - sent, milliseconds(500));
  EXPECT_TRUE(eventually([&] { return refused(server.port(), "idle_timeout") >= 1; }));
  WsClient next(server.port());
  next.send(body_of({{"id", 1}, {"prompt", "x"}, {"max_tokens", 1}}));
  EXPECT_TRUE(next.read().has_value());
}

TEST(Limits, WebSocketPastItsMessageRateGetsAnErrorThenAClose) {
  ServerOptions options;
  options.ws_max_messages_per_second = 5;
  TestServer server(small_engine(), options);
  WsClient ws(server.port());
  ASSERT_TRUE(ws.connected());
  // Cancels of ids that do not run get no answer: the only answer is the limit's.
  for (int i = 0; i < 200; ++i) ws.send(body_of({{"type", "cancel"}, {"id", i}}));
  auto message = ws.read(kGenerous);
  ASSERT_TRUE(message.has_value());
  json::object event = parse_object(*message);
  EXPECT_EQ(event["type"], "error");
  EXPECT_EQ(event["error"].as_object()["code"], "ws_rate_limit_exceeded") << *message;
  EXPECT_EQ(event["error"].as_object()["type"], "rate_limit_error") << *message;
  EXPECT_FALSE(ws.read(kGenerous).has_value());
  EXPECT_EQ(ws.close_code(), 1008);
  EXPECT_EQ(refused(server.port(), "ws_rate"), 1);
}

// On one socket the order of events is exact: a request's final event is
// sent before its place under the key is given back, so "second" is refused
// unless "long"'s final event came before the answer to "second".
TEST(Limits, WebSocketRequestsObeyTheirKeysLimits) {
  ServerOptions options;
  options.api_key_file = write_key_file("limits_ws_keys.toml", kTwoKeys);
  TestServer server(small_engine(), options);
  WsClient ws(server.port(), bearer("sk-one-at-a-time"));
  ASSERT_TRUE(ws.connected());
  json::object refusal;
  for (int attempt = 0; attempt < 5 && refusal.empty(); ++attempt) {
    const std::string long_id = "long" + std::to_string(attempt), second_id = "second" + std::to_string(attempt);
    ws.send(body_of({{"id", long_id}, {"prompt", "x"}, {"max_tokens", 500}, {"ignore_eos", true}, {"n", 8}}));
    auto first = ws.read();
    ASSERT_TRUE(first.has_value());
    ASSERT_EQ(parse_object(*first)["type"], "delta") << *first;
    ws.send(body_of({{"id", second_id}, {"prompt", "x"}, {"max_tokens", 2}}));
    bool long_ended = false, second_answered = false;
    while (!long_ended || !second_answered) {
      auto m = ws.read();
      ASSERT_TRUE(m.has_value());
      json::object e = parse_object(*m);
      if (e["id"] == long_id.c_str()) {
        long_ended = e["type"] == "final";
        continue;
      }
      ASSERT_EQ(e["id"], second_id.c_str()) << *m;
      if (!second_answered && !long_ended) {
        EXPECT_EQ(e["type"], "error") << "admitted while the key's one request ran: " << *m;
        if (e["type"] == "error") refusal = e;
      }
      second_answered = second_answered || e["type"] == "final" || e["type"] == "error";
      if (!long_ended && !refusal.empty()) ws.send(body_of({{"type", "cancel"}, {"id", long_id}}));
    }
  }
  ASSERT_FALSE(refusal.empty()) << "the long request ended before the next one came, five times";
  EXPECT_EQ(refusal["error"].as_object()["type"], "rate_limit_error");
  EXPECT_EQ(refusal["error"].as_object()["code"], "concurrency_limit_exceeded");
  // The socket carried on, and the key's place is free again: the next request runs.
  ws.send(body_of({{"id", "third"}, {"prompt", "x"}, {"max_tokens", 2}}));
  json::object final_event;
  while (final_event.empty()) {
    auto m = ws.read();
    ASSERT_TRUE(m.has_value());
    json::object e = parse_object(*m);
    ASSERT_NE(e["type"], "error") << *m;
    if (e["type"] == "final") final_event = e;
  }
  EXPECT_EQ(final_event["id"], "third");
  EXPECT_EQ(refused(server.port(), "concurrency"), 1);
}

}  // namespace
}  // namespace conveyor::http::testing
