// Engine faults in `conveyor serve`, as real clients see them: the built
// binary with --debug-fault-injection and CONVEYOR_FAULTS, streams over SSE
// while the executor throws. Recovered streams equal undisturbed ones; a
// request the engine gives up on gets a 500 naming the engine failure;
// /metrics counts the restarts and the log warns of them. Without the debug
// flag the environment variable is ignored.
#include <gtest/gtest.h>

#include <memory>
#include <thread>

#include "tests/http/test_client.hpp"
#include "tests/http/test_util.hpp"
#include "tests/integration/process.hpp"

namespace conveyor::testing {
namespace {

namespace json = boost::json;
namespace ht = conveyor::http::testing;

const std::string kConveyor = CONVEYOR_BINARY;
const std::string kWorkDir = INTEGRATION_WORK_DIR;

std::unique_ptr<ServeProcess> start_server(const std::string& name, const std::string& faults, bool debug_flag,
                                           std::vector<std::string> extra = {}) {
  std::vector<std::string> args{"--model", "dummy:llama-15m", "--kv-cache-tokens", "8192", "--threads", "1",
                                "--log-format", "json"};
  if (debug_flag) args.push_back("--debug-fault-injection");
  args.insert(args.end(), extra.begin(), extra.end());
  auto server = std::make_unique<ServeProcess>(kConveyor, args, kWorkDir + "/" + name + ".log",
                                               std::vector<std::string>{"CONVEYOR_FAULTS=" + faults});
  std::string error;
  if (!server->wait_ready(std::chrono::seconds(120), error)) {
    ADD_FAILURE() << error;
    return nullptr;
  }
  return server;
}

std::string request(int i, bool stream) {
  json::array prompt;
  for (int t = 0; t < 6 + i; ++t) prompt.push_back(3 + (t * 7 + i * 13) % 200);
  return ht::body_of(json::object{{"prompt", prompt}, {"max_tokens", 24}, {"temperature", 0},
                                  {"ignore_eos", true}, {"stream", stream}, {"return_token_ids", true}});
}

// The text and token ids of each of n concurrent streams, and their finish reasons.
struct Streamed {
  std::vector<std::string> text, finish;
};

Streamed stream_all(uint16_t port, int n) {
  Streamed out;
  out.text.resize(size_t(n));
  out.finish.resize(size_t(n));
  std::vector<std::thread> threads;
  for (int i = 0; i < n; ++i) {
    threads.emplace_back([&, i] {
      const auto r = ht::sse_request(port, "/v1/completions", request(i, true), [&](const std::string& payload) {
        if (payload == "[DONE]") return true;
        auto v = json::parse(payload);
        if (v.as_object().contains("error")) {  // an error after the stream began
          out.finish[size_t(i)] = "error";
          return true;
        }
        for (const auto& c : v.at("choices").as_array()) {
          out.text[size_t(i)] += std::string(c.at("text").as_string());  // "" without a tokenizer
          if (const auto* ids = c.as_object().if_contains("token_ids")) out.text[size_t(i)] += json::serialize(*ids);
          if (!c.at("finish_reason").is_null()) out.finish[size_t(i)] = std::string(c.at("finish_reason").as_string());
        }
        return true;
      });
      if (r.status != 200) out.finish[size_t(i)] = "error";  // an error before the first token
    });
  }
  for (auto& t : threads) t.join();
  return out;
}

std::string metric(uint16_t port, const std::string& name) {
  const auto r = ht::http_request(port, "GET", "/metrics");
  const size_t at = r.body.find("\n" + name + " ");
  if (at == std::string::npos) return "(missing)";
  const size_t begin = at + name.size() + 2;
  return r.body.substr(begin, r.body.find('\n', begin) - begin);
}

TEST(ServeFaults, StreamsSurviveAnExecutorFaultAndEqualUndisturbedOnes) {
  auto server = start_server("fault-recompute", "executor=6", true);
  ASSERT_NE(server, nullptr);
  const Streamed disturbed = stream_all(server->port(), 8);
  EXPECT_EQ(metric(server->port(), "conveyor:engine_restarts_total"), "1");
  const Streamed again = stream_all(server->port(), 8);  // the fault fired once: undisturbed now
  EXPECT_EQ(metric(server->port(), "conveyor:engine_restarts_total"), "1");
  for (int i = 0; i < 8; ++i) {
    EXPECT_EQ(disturbed.finish[size_t(i)], "length") << i;
    EXPECT_FALSE(disturbed.text[size_t(i)].empty()) << i;
    EXPECT_EQ(disturbed.text[size_t(i)], again.text[size_t(i)]) << i;
  }
  EXPECT_EQ(ht::http_request(server->port(), "GET", "/health").status, 200);
  EXPECT_EQ(server->stop(), 0);
  EXPECT_NE(server->log().find("engine restarted after a fault (executor: injected fault: executor step 6)"),
            std::string::npos)
      << server->log_tail();
}

TEST(ServeFaults, GivingUpIsA500ThatNamesTheEngineFailure) {
  auto server = start_server("fault-persistent", "executor=1+", true, {"--max-fault-retries", "1"});
  ASSERT_NE(server, nullptr);
  const auto r = ht::http_request(server->port(), "POST", "/v1/completions", request(0, false));
  EXPECT_EQ(r.status, 500) << r.body;
  const auto body = json::parse(r.body);
  EXPECT_EQ(body.at("error").at("code").as_string(), "engine_failure") << r.body;
  EXPECT_NE(std::string(body.at("error").at("message").as_string()).find("the engine failed"), std::string::npos);
  EXPECT_EQ(metric(server->port(), "conveyor:engine_restarts_total"), "2");
  EXPECT_EQ(ht::http_request(server->port(), "GET", "/health").status, 200) << "the engine itself runs on";
  EXPECT_EQ(server->stop(), 0);
}

TEST(ServeFaults, FailModeEndsTheRunningStreamsWithAnError) {
  auto server = start_server("fault-fail", "executor=4", true, {"--fault-recovery", "fail"});
  ASSERT_NE(server, nullptr);
  const Streamed s = stream_all(server->port(), 2);
  EXPECT_EQ(metric(server->port(), "conveyor:engine_restarts_total"), "1");
  int errors = 0;
  for (const auto& f : s.finish) errors += f == "error";
  EXPECT_GE(errors, 1);
  EXPECT_EQ(server->stop(), 0);
}

TEST(ServeFaults, TheEnvironmentIsIgnoredWithoutTheDebugFlag) {
  auto server = start_server("fault-ignored", "executor=1+", false);
  ASSERT_NE(server, nullptr);
  const auto r = ht::http_request(server->port(), "POST", "/v1/completions", request(0, false));
  EXPECT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(metric(server->port(), "conveyor:engine_restarts_total"), "0");
  EXPECT_EQ(server->stop(), 0);
}

}  // namespace
}  // namespace conveyor::testing
