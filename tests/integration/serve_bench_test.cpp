// `conveyor bench` as a user runs it: the real binary against a real
// `conveyor serve` (the embedded default model) on a free loopback port, and
// its exit codes for bad arguments and an unreachable server.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>

#include <boost/json.hpp>

#include "tests/integration/process.hpp"

namespace conveyor::testing {
namespace {

const std::string kConveyor = CONVEYOR_BINARY;
const std::string kWorkDir = INTEGRATION_WORK_DIR;

boost::json::value read_json(const std::string& path) {
  std::ifstream in(path);
  std::ostringstream s;
  s << in.rdbuf();
  boost::system::error_code ec;
  auto v = boost::json::parse(s.str(), ec);
  return ec ? boost::json::value() : v;
}

std::vector<std::string> bench_argv(const std::vector<std::string>& args) {
  std::vector<std::string> argv{kConveyor, "bench"};
  argv.insert(argv.end(), args.begin(), args.end());
  return argv;
}

TEST(BenchCommand, BadArgumentsExitTwo) {
  for (const std::vector<std::string>& args : std::vector<std::vector<std::string>>{
           {"--input-dist", "normal:3"},
           {"--output-dist", "uniform:9:2"},
           {"--url", "localhost:8000"},
           {"--rate", "-1"},
           {"--concurrency", "0"},
           {"--endpoint", "embeddings"},
           {"--input-len", "4", "--input-dist", "fixed:4"},
           {"--dataset", "/nonexistent.jsonl"},
           {"--temperature", "nan"},  // CLI11's own range check lets nan through
           {"--rate", "0"},
           {"--timeout", "inf"},
           {"--json", "/nonexistent/results.json"},  // before the load, not after it
           {"--json", ""},
       }) {
    const auto r = run_process(bench_argv(args), std::chrono::seconds(30));
    EXPECT_EQ(r.exit_code, 2) << args[0] << ": " << r.output;
  }
}

TEST(BenchCommand, UnreachableServerExitsOneWithAClearMessage) {
  const uint16_t port = free_loopback_port();
  const auto r = run_process(bench_argv({"--url", "http://127.0.0.1:" + std::to_string(port), "--num-requests", "1"}),
                             std::chrono::seconds(30));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("cannot reach"), std::string::npos) << r.output;
}

// A server that wants a key: bench sends it (--api-key, or $CONVEYOR_API_KEY),
// to the completions and to /metrics alike, and without it stops at once.
TEST(BenchCommand, SendsTheServersKey) {
  ::unsetenv("CONVEYOR_API_KEY");  // the first run must go without a key
  ServeProcess server(kConveyor, {"--api-key", "sk-bench-key"}, kWorkDir + "/serve_bench_key.log");
  std::string error;
  ASSERT_TRUE(server.wait_ready(std::chrono::seconds(120), error)) << error;
  const std::vector<std::string> load = {"--url", server.url(), "--num-requests", "2", "--input-len", "4",
                                         "--output-len", "2", "--quiet"};
  const auto refused = run_process(bench_argv(load), std::chrono::seconds(60));
  EXPECT_EQ(refused.exit_code, 1) << refused.output;
  EXPECT_NE(refused.output.find("401"), std::string::npos) << refused.output;

  const std::string out = kWorkDir + "/serve_bench_key.json";
  std::vector<std::string> keyed = load;
  for (const char* a : {"--api-key", "sk-bench-key", "--metrics-interval", "0.05", "--json"}) keyed.push_back(a);
  keyed.push_back(out);
  const auto r = run_process(bench_argv(keyed), std::chrono::seconds(120));
  ASSERT_EQ(r.exit_code, 0) << r.output << "\nserver log:\n" << server.log_tail();
  const auto json = read_json(out);
  ASSERT_TRUE(json.is_object()) << out;
  EXPECT_EQ(json.at("summary").at("completed").to_number<int64_t>(), 2) << r.output;
  EXPECT_EQ(boost::json::serialize(json).find("sk-bench-key"), std::string::npos) << "the key is not a result";
  EXPECT_EQ(r.output.find("/metrics answered"), std::string::npos) << r.output;
  EXPECT_EQ(server.stop(), 0);
}

class ServeBench : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = std::make_unique<ServeProcess>(kConveyor, std::vector<std::string>{}, kWorkDir + "/serve_bench.log");
    if (!server_->wait_ready(std::chrono::seconds(120), start_error_)) server_.reset();
  }
  static void TearDownTestSuite() {
    if (server_) {
      const int code = server_->stop();
      EXPECT_EQ(code, 0) << "conveyor serve did not exit cleanly on SIGTERM:\n" << server_->log_tail();
    }
    server_.reset();
  }
  void SetUp() override {
    ASSERT_TRUE(server_) << start_error_;
  }

  static inline std::unique_ptr<ServeProcess> server_;
  static inline std::string start_error_;
};

TEST_F(ServeBench, ClosedLoopAgainstTheEmbeddedModel) {
  const std::string out = kWorkDir + "/serve_bench.json";
  std::remove(out.c_str());
  const auto r = run_process(bench_argv({"--url", server_->url(), "--concurrency", "4", "--num-requests", "20",
                                         "--input-len", "16", "--output-len", "8", "--json", out}),
                             std::chrono::seconds(300));
  ASSERT_EQ(r.exit_code, 0) << r.output << "\nserver log:\n" << server_->log_tail();
  EXPECT_NE(r.output.find("Successful requests:"), std::string::npos) << r.output;

  const auto json = read_json(out);
  ASSERT_TRUE(json.is_object()) << out << " is not JSON";
  const auto& s = json.at("summary");
  EXPECT_EQ(s.at("completed").to_number<int64_t>(), 20) << r.output;
  EXPECT_EQ(s.at("failed").to_number<int64_t>(), 0) << r.output;
  EXPECT_EQ(s.at("total_output_tokens").to_number<int64_t>(), 20 * 8);
  EXPECT_GE(s.at("total_input_tokens").to_number<int64_t>(), 20 * 16);
  for (const char* rate : {"request_throughput", "output_throughput", "input_throughput", "duration_s"})
    EXPECT_GT(s.at(rate).to_number<double>(), 0) << rate;
  for (const char* metric : {"ttft_ms", "itl_ms", "tpot_ms", "e2e_ms"}) {
    const auto& d = s.at(metric);
    EXPECT_GT(d.at("count").to_number<int64_t>(), 0) << metric;
    EXPECT_GT(d.at("mean").to_number<double>(), 0) << metric;
    EXPECT_LE(d.at("p50").to_number<double>(), d.at("p90").to_number<double>()) << metric;
    EXPECT_LE(d.at("p90").to_number<double>(), d.at("p99").to_number<double>()) << metric;
    EXPECT_LE(d.at("p99").to_number<double>(), d.at("max").to_number<double>()) << metric;
  }
  // One gap per token after the first, however the server groups tokens in chunks.
  EXPECT_LE(s.at("itl_ms").at("count").to_number<int64_t>(), 20 * 7);
  EXPECT_GE(s.at("e2e_ms").at("mean").to_number<double>(), s.at("ttft_ms").at("mean").to_number<double>());
  EXPECT_EQ(json.at("config").at("concurrency").to_number<int64_t>(), 4);
  const auto& requests = json.at("requests").as_array();
  ASSERT_EQ(requests.size(), 20u);
  for (const auto& q : requests) {
    EXPECT_TRUE(q.at("ok").as_bool());
    EXPECT_EQ(q.at("output_tokens").to_number<int64_t>(), 8);
    EXPECT_EQ(q.at("finish_reason").as_string(), "length");
  }
}

TEST_F(ServeBench, ChatEndpointAndPoissonArrivals) {
  const std::string out = kWorkDir + "/serve_bench_chat.json";
  const auto r = run_process(bench_argv({"--url", server_->url(), "--endpoint", "chat", "--rate", "20",
                                         "--num-requests", "6", "--input-dist", "uniform:4:12", "--output-dist",
                                         "uniform:2:6", "--seed", "5", "--json", out}),
                             std::chrono::seconds(300));
  ASSERT_EQ(r.exit_code, 0) << r.output << "\nserver log:\n" << server_->log_tail();
  const auto json = read_json(out);
  ASSERT_TRUE(json.is_object());
  EXPECT_EQ(json.at("summary").at("completed").to_number<int64_t>(), 6) << r.output;
  EXPECT_EQ(json.at("config").at("mode").as_string(), "poisson");
  for (const auto& q : json.at("requests").as_array()) {
    const auto n = q.at("output_tokens").to_number<int64_t>();
    EXPECT_GE(n, 2);
    EXPECT_LE(n, 6);
  }
}

// --report: two runs of one label at two concurrencies and a figures file,
// into one directory; results.json keeps what --json writes, with the
// server's gauges, and index.html draws them.
TEST_F(ServeBench, ReportDirectoryCollectsRunsAndDrawsThem) {
  const std::string dir = kWorkDir + "/serve_bench_report";
  std::filesystem::remove_all(dir);
  const std::string single = kWorkDir + "/serve_bench_report_single.json";
  for (const char* concurrency : {"2", "4"}) {
    const auto r = run_process(bench_argv({"--url", server_->url(), "--concurrency", concurrency, "--num-requests",
                                           "24", "--input-len", "16", "--output-len", "24", "--metrics-interval",
                                           "0.01", "--report", dir, "--label", "embedded <model>", "--group",
                                           "sweep", "--note", "serve (defaults)", "--json", single, "--quiet"}),
                               std::chrono::seconds(120));
    ASSERT_EQ(r.exit_code, 0) << r.output << "\nserver log:\n" << server_->log_tail();
    EXPECT_NE(r.output.find("report in " + dir + "/index.html"), std::string::npos) << r.output;
  }
  const std::string figures = kWorkDir + "/serve_bench_report_figures.json";
  { std::ofstream(figures) << R"({"figures": {"throughput_tok_s": 12.5}, "ttft_ms": [1, 2, 3]})"; }
  const auto added = run_process(bench_argv({"--report", dir, "--add-figures", figures, "--label", "swarm",
                                             "--group", "agents"}),
                                 std::chrono::seconds(30));
  ASSERT_EQ(added.exit_code, 0) << added.output;

  const auto results = read_json(dir + "/results.json");
  ASSERT_TRUE(results.is_object());
  const auto& runs = results.at("runs").as_array();
  ASSERT_EQ(runs.size(), 3u);
  // The last bench run is what --json wrote, plus the report's fields.
  const auto json = read_json(single);
  ASSERT_TRUE(json.is_object());
  for (const char* key : {"config", "summary", "errors", "requests", "metrics"})
    EXPECT_EQ(runs[1].at(key), json.at(key)) << key;
  EXPECT_EQ(runs[1].at("label").as_string(), "embedded <model>");
  EXPECT_EQ(runs[1].at("group").as_string(), "sweep");
  EXPECT_EQ(runs[1].at("note").as_string(), "serve (defaults)");
  EXPECT_EQ(runs[0].at("config").at("concurrency").to_number<int64_t>(), 2);
  EXPECT_EQ(runs[1].at("summary").at("completed").to_number<int64_t>(), 24);
  EXPECT_EQ(runs[1].at("summary").at("itl_ms_quantiles").as_array().size(), 101u);
  for (size_t i = 0; i < 2; ++i) {
    // The server's gauges, polled from the start: at least the first answer,
    // each in range, in time order.
    const auto& m = runs[i].at("metrics").as_object();
    EXPECT_FALSE(m.contains("error")) << m.at("error");
    const auto& t = m.at("t_s").as_array();
    ASSERT_GE(t.size(), 1u);
    ASSERT_EQ(m.at("kv_cache_usage_ratio").as_array().size(), t.size());
    for (size_t k = 0; k < t.size(); ++k) {
      const double usage = m.at("kv_cache_usage_ratio").as_array()[k].to_number<double>();
      EXPECT_GE(usage, 0);
      EXPECT_LE(usage, 1);
      if (k > 0) {
        EXPECT_GE(t[k].to_number<double>(), t[k - 1].to_number<double>());
      }
    }
  }
  EXPECT_EQ(runs[2].at("kind").as_string(), "figures");
  EXPECT_EQ(runs[2].at("figures").at("throughput_tok_s").to_number<double>(), 12.5);

  std::ifstream in(dir + "/index.html");
  std::ostringstream page;
  page << in.rdbuf();
  const std::string html = page.str();
  EXPECT_NE(html.find("3 runs in 2 groups"), std::string::npos);
  EXPECT_NE(html.find("embedded &lt;model&gt; c=4"), std::string::npos);
  EXPECT_EQ(html.find("embedded <model>"), std::string::npos);
  // Sweep: 3 plots against concurrency, 3 CDFs, 3 series over time; figures: 2 CDFs (one empty, not drawn).
  size_t svgs = 0;
  for (size_t at = html.find("<svg"); at != std::string::npos; at = html.find("<svg", at + 1)) ++svgs;
  EXPECT_EQ(svgs, 10u);
  EXPECT_NE(html.find("<title>Output throughput against concurrency</title>"), std::string::npos);
  EXPECT_NE(html.find("<title>KV cache usage over time (server /metrics)</title>"), std::string::npos);

  // A second --add-figures without --report, or with a bad file, is refused.
  EXPECT_EQ(run_process(bench_argv({"--add-figures", figures}), std::chrono::seconds(30)).exit_code, 2);
  EXPECT_EQ(run_process(bench_argv({"--report", dir, "--add-figures", dir + "/index.html"}), std::chrono::seconds(30))
                .exit_code,
            2);
}

TEST_F(ServeBench, DatasetPromptsAndErrorsByStatus) {
  // Two good lines and one the server must refuse (token id far outside any
  // vocabulary): the refusals are counted by status, the rest succeed.
  const std::string dataset = kWorkDir + "/serve_bench_dataset.jsonl";
  {
    std::ofstream f(dataset);
    f << "{\"prompt\": \"Once upon a time\", \"max_tokens\": 4}\n"
      << "{\"prompt\": [10, 20, 30], \"max_tokens\": 3}\n"
      << "{\"prompt\": [2000000000], \"max_tokens\": 3}\n";
  }
  const std::string out = kWorkDir + "/serve_bench_dataset.json";
  const auto r = run_process(bench_argv({"--url", server_->url(), "--dataset", dataset, "--num-requests", "6",
                                         "--concurrency", "2", "--json", out}),
                             std::chrono::seconds(300));
  ASSERT_EQ(r.exit_code, 0) << r.output << "\nserver log:\n" << server_->log_tail();
  const auto json = read_json(out);
  ASSERT_TRUE(json.is_object());
  EXPECT_EQ(json.at("summary").at("completed").to_number<int64_t>(), 4) << r.output;
  EXPECT_EQ(json.at("summary").at("failed").to_number<int64_t>(), 2) << r.output;
  EXPECT_EQ(json.at("errors").at("http 400").to_number<int64_t>(), 2) << r.output;
}

}  // namespace
}  // namespace conveyor::testing
