// The log of `conveyor serve`, read from a real run: the JSON access lines of
// streamed, non-streamed, refused and WebSocket requests, the engine summary,
// the level filter, and silence with --log-level off.
#include <gtest/gtest.h>

#include <memory>
#include <set>

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

std::unique_ptr<ServeProcess> start_server(const std::string& name, std::vector<std::string> args) {
  args.insert(args.end(), {"--kv-cache-tokens", "4096", "--threads", "1"});
  auto server = std::make_unique<ServeProcess>(kConveyor, args, kWorkDir + "/" + name + ".log");
  std::string error;
  if (!server->wait_ready(std::chrono::seconds(120), error)) {
    ADD_FAILURE() << error;
    return nullptr;
  }
  return server;
}

std::set<std::string> keys_of(const json::object& o) {
  std::set<std::string> keys;
  for (const auto& kv : o) keys.insert(std::string(kv.key()));
  return keys;
}

TEST(ServeLog, JsonAccessLinesOfStreamedAndNonStreamedRequests) {
  auto server = start_server("serve_log_json", {"--log-format", "json", "--log-stats-interval", "0.2"});
  ASSERT_TRUE(server);
  const uint16_t port = server->port();

  const ht::Response plain = ht::http_request(port, "POST", "/v1/completions",
                                              R"({"prompt": "Once upon a time", "max_tokens": 8, "ignore_eos": true})");
  ASSERT_EQ(plain.status, 200) << plain.body;
  json::object plain_body = ht::parse_object(plain.body);
  const std::string plain_id(plain_body["id"].as_string());
  const int64_t plain_prompt = plain_body["usage"].as_object()["prompt_tokens"].to_number<int64_t>();

  std::string stream_id;
  const ht::Response streamed = ht::sse_request(
      port, "/v1/chat/completions",
      R"({"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 6, "ignore_eos": true, "stream": true})",
      [&](const std::string& p) {
        if (stream_id.empty() && p != "[DONE]") stream_id = std::string(ht::parse_object(p)["id"].as_string());
        return true;
      });
  ASSERT_EQ(streamed.status, 200);

  const ht::Response refused = ht::http_request(port, "POST", "/v1/completions", R"({"prompt": "x", "max_tokenz": 3})");
  ASSERT_EQ(refused.status, 400);

  ht::WsClient ws(port);
  ASSERT_TRUE(ws.connected());
  ws.send(R"({"id": "ws-1", "prompt": "Once", "max_tokens": 3, "ignore_eos": true})");
  while (auto m = ws.read()) {
    if (ht::parse_object(*m)["type"] == "final") break;
  }
  ws.close();

  // The engine summary comes every 0.2 s after work.
  EXPECT_TRUE(ht::eventually([&] { return server->log().find(R"("msg":"engine")") != std::string::npos; }));
  ASSERT_EQ(server->stop(), 0) << server->log_tail();

  const auto lines = json_log_lines(server->log());
  ASSERT_FALSE(lines.empty());
  for (const auto& l : lines) {
    EXPECT_TRUE(l.contains("time") && l.contains("level") && l.contains("msg")) << json::serialize(l);
    EXPECT_EQ(std::string(l.at("time").as_string()).back(), 'Z');
  }
  EXPECT_FALSE(lines_with_msg(lines, "listening on http://127.0.0.1:" + std::to_string(port)).empty());

  const std::set<std::string> access_keys{"time",          "level",         "msg",      "conn",
                                          "request_id",    "method",        "route",    "status",
                                          "stream",        "prompt_tokens", "completion_tokens",
                                          "ttft_ms",       "duration_ms",   "finish_reason",
                                          "cancelled",     "error"};
  for (const auto& l : lines_with_msg(lines, "request")) EXPECT_EQ(keys_of(l), access_keys) << json::serialize(l);

  json::object a = access_line(lines, plain_id);
  EXPECT_EQ(a["level"], "info");
  EXPECT_EQ(a["method"], "POST");
  EXPECT_EQ(a["route"], "/v1/completions");
  EXPECT_EQ(a["status"], 200);
  EXPECT_EQ(a["stream"], false);
  EXPECT_EQ(a["prompt_tokens"], plain_prompt);
  EXPECT_EQ(a["completion_tokens"], 8);
  EXPECT_EQ(a["finish_reason"], "length");
  EXPECT_EQ(a["cancelled"], false);
  EXPECT_TRUE(a["error"].is_null());
  EXPECT_GT(a["conn"].to_number<int64_t>(), 0);
  EXPECT_GE(a["ttft_ms"].to_number<double>(), 0);
  EXPECT_LE(a["ttft_ms"].to_number<double>(), a["duration_ms"].to_number<double>());

  ASSERT_FALSE(stream_id.empty());
  json::object s = access_line(lines, stream_id);
  EXPECT_EQ(s["level"], "info");
  EXPECT_EQ(s["method"], "POST");
  EXPECT_EQ(s["route"], "/v1/chat/completions");
  EXPECT_EQ(s["status"], 200);
  EXPECT_EQ(s["stream"], true);
  EXPECT_GT(s["prompt_tokens"].to_number<int64_t>(), 0);
  EXPECT_EQ(s["completion_tokens"], 6);
  EXPECT_EQ(s["finish_reason"], "length");
  EXPECT_EQ(s["cancelled"], false);
  EXPECT_LE(s["ttft_ms"].to_number<double>(), s["duration_ms"].to_number<double>());

  json::object w = access_line(lines, "ws-1");
  EXPECT_EQ(w["method"], "WS");
  EXPECT_EQ(w["route"], "/v1/ws");
  EXPECT_EQ(w["status"], 200);
  EXPECT_EQ(w["completion_tokens"], 3);

  bool saw_refusal = false;
  for (const auto& l : lines_with_msg(lines, "request")) {
    if (l.at("status") != 400) continue;
    saw_refusal = true;
    EXPECT_EQ(l.at("level"), "warn");
    EXPECT_NE(std::string(l.at("error").as_string()).find("max_tokenz"), std::string::npos) << json::serialize(l);
    EXPECT_TRUE(l.at("prompt_tokens").is_null());
  }
  EXPECT_TRUE(saw_refusal) << "no warn line for the 400";

  const auto engine = lines_with_msg(lines, "engine");
  ASSERT_FALSE(engine.empty());
  double most = 0;
  for (const auto& l : engine) {
    for (const char* key : {"running", "waiting", "swapped", "kv_usage", "generation_tokens_per_s",
                            "prompt_tokens_per_s", "requests_in_flight"})
      EXPECT_TRUE(l.contains(key)) << key;
    most = std::max(most, l.at("generation_tokens_per_s").to_number<double>());
  }
  EXPECT_GT(most, 0) << "no summary line saw the tokens generated";
}

TEST(ServeLog, LevelOffPrintsNothingButStartUpFailuresStillDo) {
  auto server = start_server("serve_log_off", {"--log-level", "off"});
  ASSERT_TRUE(server);
  EXPECT_EQ(ht::http_request(server->port(), "POST", "/v1/completions", R"({"prompt": "a", "max_tokens": 3})").status,
            200);
  EXPECT_EQ(ht::http_request(server->port(), "GET", "/nope").status, 404);
  ASSERT_EQ(server->stop(), 0);
  EXPECT_EQ(server->log(), "");

  const auto failed = run_process({kConveyor, "serve", "--log-level", "off", "--model", "dummy:no-such-model",
                                   "--port", std::to_string(free_loopback_port())},
                                  std::chrono::seconds(60));
  EXPECT_EQ(failed.exit_code, 2) << failed.output;
  EXPECT_NE(failed.output.find("no-such-model"), std::string::npos) << failed.output;

  const auto bad_level = run_process({kConveyor, "serve", "--log-level", "loud"}, std::chrono::seconds(60));
  EXPECT_EQ(bad_level.exit_code, 2);
  EXPECT_NE(bad_level.output.find("--log-level: 'loud' is not a log level"), std::string::npos) << bad_level.output;
}

TEST(ServeLog, TextLinesAtLevelWarnShowOnlyRefusals) {
  auto server = start_server("serve_log_warn", {"--log-level", "warn"});
  ASSERT_TRUE(server);
  EXPECT_EQ(ht::http_request(server->port(), "POST", "/v1/completions", R"({"prompt": "a", "max_tokens": 3})").status,
            200);
  EXPECT_EQ(ht::http_request(server->port(), "GET", "/nope").status, 404);
  ASSERT_EQ(server->stop(), 0);
  const std::string log = server->log();
  EXPECT_EQ(log.find("listening on"), std::string::npos) << log;
  EXPECT_EQ(log.find("status=200"), std::string::npos) << log;
  EXPECT_NE(log.find(" warn request "), std::string::npos) << log;
  EXPECT_NE(log.find("method=GET route=/nope status=404"), std::string::npos) << log;
  EXPECT_NE(log.find("error=\"no such path: /nope\""), std::string::npos) << log;
}

}  // namespace
}  // namespace conveyor::testing
