// The graceful drain of `conveyor serve`, as a real client sees it: the
// built binary as a child process on a free port, SIGTERM or SIGINT sent to
// it while requests stream. The model (tests/integration/models/drain-tiny.toml)
// streams a request of kLongTokens tokens for a few seconds on one thread,
// long enough to be caught mid-stream; a short --shutdown-timeout cancels it.
#include <gtest/gtest.h>
#include <signal.h>

#include <atomic>
#include <memory>
#include <thread>

#include "tests/http/test_client.hpp"
#include "tests/http/test_util.hpp"
#include "tests/integration/json_log.hpp"
#include "tests/integration/process.hpp"

namespace conveyor::testing {
namespace {

namespace json = boost::json;
namespace ht = conveyor::http::testing;

const std::string kConveyor = CONVEYOR_BINARY;
const std::string kWorkDir = INTEGRATION_WORK_DIR;
constexpr int kLongTokens = 3000;

std::unique_ptr<ServeProcess> start_server(const std::string& name, const std::string& shutdown_timeout) {
  auto server = std::make_unique<ServeProcess>(
      kConveyor,
      std::vector<std::string>{"--model", "dummy:drain-tiny", "--kv-cache-tokens", "16384", "--threads", "1",
                               "--shutdown-timeout", shutdown_timeout, "--log-format", "json"},
      kWorkDir + "/" + name + ".log", std::vector<std::string>{"CONVEYOR_CONFIG_DIR=" INTEGRATION_MODELS_DIR});
  std::string error;
  if (!server->wait_ready(std::chrono::seconds(120), error)) {
    ADD_FAILURE() << error;
    return nullptr;
  }
  return server;
}

std::string long_request(bool stream) {
  json::object body{{"prompt", "Once upon a time"}, {"max_tokens", kLongTokens}, {"ignore_eos", true},
                    {"stream", stream}};
  if (stream) body["stream_options"] = json::object{{"include_usage", true}};
  return ht::body_of(body);
}

// A request answered on its own thread; `events` counts SSE payloads so far.
struct Client {
  std::thread thread;
  std::atomic<int> events{0};
  std::atomic<bool> done{false};
  std::vector<std::string> payloads;  // read after join()
  ht::Response response;

  void stream(uint16_t port) {
    thread = std::thread([this, port] {
      response = ht::sse_request(port, "/v1/completions", long_request(true), [this](const std::string& p) {
        payloads.push_back(p);
        ++events;
        return true;
      });
      done = true;
    });
  }
  void post(uint16_t port) {
    thread = std::thread([this, port] {
      response = ht::http_request(port, "POST", "/v1/completions", long_request(false));
      done = true;
    });
  }
  void join() {
    if (thread.joinable()) thread.join();
  }
  ~Client() { join(); }
};

// The last chunk that has a choice (before the usage chunk and [DONE]).
json::object last_choice(const std::vector<std::string>& payloads) {
  for (auto it = payloads.rbegin(); it != payloads.rend(); ++it) {
    if (*it == "[DONE]") continue;
    json::object chunk = ht::parse_object(*it);
    if (chunk.contains("choices") && !chunk["choices"].as_array().empty())
      return chunk["choices"].as_array()[0].as_object();
  }
  ADD_FAILURE() << "no chunk with a choice";
  return {};
}

std::string response_id(const std::vector<std::string>& payloads) {
  return payloads.empty() || payloads[0] == "[DONE]" ? "" : std::string(ht::parse_object(payloads[0])["id"].as_string());
}

bool health_says_draining(uint16_t port) {
  const ht::Response r = ht::http_request(port, "GET", "/health");
  return r.status == 503;
}

TEST(Drain, RunningStreamFinishesWhileNewRequestsGet503) {
  // A timeout far past the stream's few seconds: on a slow machine under a
  // full parallel test run the stream took over a minute.
  auto server = start_server("drain_finish", "600");
  ASSERT_TRUE(server);
  const uint16_t port = server->port();
  Client stream;
  stream.stream(port);
  ASSERT_TRUE(ht::eventually([&] { return stream.events > 0; }, std::chrono::seconds(30))) << server->log_tail();

  server->signal(SIGTERM);
  ASSERT_TRUE(ht::eventually([&] { return health_says_draining(port); })) << server->log_tail();
  const ht::Response health = ht::http_request(port, "GET", "/health");
  EXPECT_EQ(health.status, 503);
  EXPECT_EQ(ht::parse_object(health.body)["status"], "draining") << health.body;

  const ht::Response refused =
      ht::http_request(port, "POST", "/v1/completions", R"({"prompt": "hi", "max_tokens": 4})");
  EXPECT_EQ(refused.status, 503);
  EXPECT_TRUE(refused.headers.count("retry-after")) << "503 without Retry-After";
  EXPECT_EQ(ht::error_of(refused)["code"], "shutting_down");
  EXPECT_EQ(ht::http_request(port, "POST", "/v1/chat/completions",
                             R"({"messages": [{"role": "user", "content": "hi"}]})")
                .status,
            503);
  ht::WsClient ws(port);
  EXPECT_EQ(ws.upgrade_status(), 503);
  EXPECT_EQ(ht::http_request(port, "GET", "/metrics").status, 200);  // still watchable
  EXPECT_FALSE(stream.done) << "the stream ended before the refusals were checked: make it longer";

  stream.join();
  ASSERT_FALSE(stream.payloads.empty());
  EXPECT_EQ(stream.payloads.back(), "[DONE]");
  json::object choice = last_choice(stream.payloads);
  EXPECT_EQ(choice["finish_reason"], "length");
  EXPECT_FALSE(choice.contains("cancel_reason"));
  json::object usage = ht::parse_object(stream.payloads[stream.payloads.size() - 2])["usage"].as_object();
  EXPECT_EQ(usage["completion_tokens"], kLongTokens);

  EXPECT_EQ(server->wait_exit(std::chrono::seconds(30)), 0) << server->log_tail();
  const auto lines = json_log_lines(server->log());
  EXPECT_EQ(lines_with_msg(lines, "drained").size(), 1u);
  EXPECT_TRUE(lines_with_msg(lines, "shutdown timeout passed: cancelling the requests still running").empty());
  json::object access = access_line(lines, response_id(stream.payloads));
  EXPECT_EQ(access["finish_reason"], "length");
  EXPECT_EQ(access["cancelled"], false);
  EXPECT_EQ(access["completion_tokens"], kLongTokens);
}

TEST(Drain, ShortTimeoutCancelsWhatStillRunsWithTheShutdownReason) {
  auto server = start_server("drain_cancel", "0.5");
  ASSERT_TRUE(server);
  const uint16_t port = server->port();
  Client stream, body;
  stream.stream(port);
  body.post(port);
  ht::WsClient ws(port);
  ASSERT_TRUE(ws.connected());
  ws.send(ht::body_of({{"id", "w1"}, {"prompt", "Once"}, {"max_tokens", kLongTokens}, {"ignore_eos", true}}));
  ASSERT_TRUE(ws.read());  // its first delta: it runs
  ASSERT_TRUE(ht::eventually([&] { return stream.events > 0; }, std::chrono::seconds(30))) << server->log_tail();

  server->signal(SIGTERM);
  ASSERT_TRUE(ht::eventually([&] { return health_says_draining(port); })) << server->log_tail();
  // A new request on the open socket is refused; the running one goes on.
  ws.send(ht::body_of({{"id", "w2"}, {"prompt", "Once"}, {"max_tokens", 4}}));
  json::object refusal, final_event;
  while (auto message = ws.read()) {
    json::object m = ht::parse_object(*message);
    if (m["type"] == "error") refusal = m;
    if (m["type"] == "final") {
      final_event = m;
      break;
    }
  }
  ASSERT_FALSE(refusal.empty()) << "no error event for a request sent while draining";
  EXPECT_EQ(refusal["id"], "w2");
  EXPECT_EQ(refusal["error"].as_object()["code"], "shutting_down");
  ASSERT_FALSE(final_event.empty());
  EXPECT_EQ(final_event["id"], "w1");
  EXPECT_EQ(final_event["finish_reason"], "cancelled");
  EXPECT_NE(std::string(final_event["cancel_reason"].as_string()).find("shutting down"), std::string::npos);

  stream.join();
  ASSERT_GE(stream.payloads.size(), 2u);
  EXPECT_EQ(stream.payloads.back(), "[DONE]");
  json::object choice = last_choice(stream.payloads);
  EXPECT_EQ(choice["finish_reason"], "cancelled");
  ASSERT_TRUE(choice.contains("cancel_reason")) << json::serialize(choice);
  EXPECT_NE(std::string(choice["cancel_reason"].as_string()).find("shutdown_timeout"), std::string::npos);

  body.join();
  ASSERT_EQ(body.response.status, 200) << body.response.body;
  json::object answer = ht::parse_object(body.response.body);
  json::object body_choice = answer["choices"].as_array()[0].as_object();
  EXPECT_EQ(body_choice["finish_reason"], "cancelled");
  EXPECT_TRUE(body_choice.contains("cancel_reason"));
  EXPECT_LT(answer["usage"].as_object()["completion_tokens"].to_number<int64_t>(), kLongTokens);

  EXPECT_EQ(server->wait_exit(std::chrono::seconds(20)), 0) << server->log_tail();
  const auto lines = json_log_lines(server->log());
  EXPECT_EQ(lines_with_msg(lines, "shutdown timeout passed: cancelling the requests still running").size(), 1u);
  for (const std::string& id : {response_id(stream.payloads), std::string(answer["id"].as_string()),
                                std::string("w1")}) {
    json::object access = access_line(lines, id);
    EXPECT_EQ(access["finish_reason"], "cancelled") << id;
    EXPECT_EQ(access["cancelled"], true) << id;
  }
}

TEST(Drain, SecondSigintExitsAtOnce) {
  auto server = start_server("drain_sigint", "60");
  ASSERT_TRUE(server);
  const uint16_t port = server->port();
  Client stream;
  stream.stream(port);
  ASSERT_TRUE(ht::eventually([&] { return stream.events > 0; }, std::chrono::seconds(30))) << server->log_tail();
  server->signal(SIGINT);
  ASSERT_TRUE(ht::eventually([&] { return health_says_draining(port); })) << server->log_tail();
  EXPECT_FALSE(stream.done);
  server->signal(SIGINT);
  EXPECT_EQ(server->wait_exit(std::chrono::seconds(5)), 130) << server->log_tail();
  stream.join();
  EXPECT_NE(stream.payloads.empty() ? "" : stream.payloads.back(), "[DONE]");
}

}  // namespace
}  // namespace conveyor::testing
