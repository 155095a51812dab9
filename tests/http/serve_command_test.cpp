// `conveyor serve` as a program: bad flags exit 2 with a message; it logs the
// model and the KV capacity, serves, and exits 0 soon after SIGTERM or SIGINT.
#include <gtest/gtest.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <fstream>
#include <functional>
#include <mutex>
#include <regex>
#include <string>
#include <thread>
#include <vector>

#include "tests/http/test_client.hpp"

namespace conveyor::http::testing {
namespace {

const std::string kConveyor = CONVEYOR_BINARY;

int exit_code_of(const std::string& args, std::string* output = nullptr) {
  FILE* pipe = popen((kConveyor + " serve " + args + " 2>&1").c_str(), "r");
  std::string out;
  char buf[512];
  for (size_t n; (n = fread(buf, 1, sizeof buf, pipe)) > 0;) out.append(buf, n);
  const int status = pclose(pipe);
  if (output) *output = out;
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

TEST(ServeCommand, BadFlagsExitTwoWithAMessage) {
  std::string out;
  EXPECT_EQ(exit_code_of("--block-size 3", &out), 2);
  EXPECT_NE(out.find("block-size"), std::string::npos) << out;
  EXPECT_EQ(exit_code_of("--preemption sometimes", &out), 2);
  EXPECT_EQ(exit_code_of("--port 70000", &out), 2);
  EXPECT_EQ(exit_code_of("--no-such-flag", &out), 2);
  EXPECT_EQ(exit_code_of("--config /nonexistent.toml", &out), 2);
  EXPECT_EQ(exit_code_of("--config /tmp", &out), 2);
  EXPECT_NE(out.find("is a directory"), std::string::npos) << out;
  EXPECT_EQ(exit_code_of("--host ''", &out), 2);  // every interface to some programs, the default to others
  EXPECT_NE(out.find("--host (host) is empty"), std::string::npos) << out;
  EXPECT_EQ(exit_code_of("--max-body-bytes 0", &out), 2);  // every request would be a 413
  EXPECT_NE(out.find("max-body-bytes"), std::string::npos) << out;
  EXPECT_EQ(exit_code_of("--chat-template jinja", &out), 2);
  EXPECT_EQ(exit_code_of("--kv-cache-memory 4XB", &out), 2);
  EXPECT_NE(out.find("--kv-cache-memory: '4XB' is not a size: unknown unit"), std::string::npos) << out;
  EXPECT_EQ(exit_code_of("--kv-cache-memory 0", &out), 2);
  EXPECT_EQ(exit_code_of("--kv-cache-tokens 4096 --kv-cache-memory 1GiB", &out), 2);
  EXPECT_NE(out.find("not both"), std::string::npos) << out;
  EXPECT_EQ(exit_code_of("--kv-cache-dtype f8", &out), 2);
  EXPECT_NE(out.find("--kv-cache-dtype"), std::string::npos) << out;
  EXPECT_EQ(exit_code_of("--kv-cache-memory-fraction 1.5", &out), 2);
  // More KV cache or swap space than the machine has: a message, not std::bad_alloc's abort.
  EXPECT_EQ(exit_code_of("--kv-cache-memory 10TB --port 0", &out), 2);
  EXPECT_NE(out.find("of memory available after loading the weights"), std::string::npos) << out;
  EXPECT_EQ(exit_code_of("--swap-space-tokens 30000000000 --port 0", &out), 2);
  EXPECT_NE(out.find("the swap space (--swap-space-tokens: 30000000000 tokens"), std::string::npos) << out;
  EXPECT_EQ(exit_code_of("--swap-space-tokens 100000000000000 --port 0", &out), 2);
  EXPECT_NE(out.find("6250000000000 blocks; at most"), std::string::npos) << out;
  EXPECT_EQ(exit_code_of("--shutdown-timeout -1", &out), 2);
  EXPECT_EQ(exit_code_of("--log-format xml", &out), 2);
  EXPECT_NE(out.find("--log-format: 'xml' is not a log format"), std::string::npos) << out;
  EXPECT_EQ(exit_code_of("--device tpu", &out), 2);
  EXPECT_NE(out.find("--device: must be cpu, cuda or cuda:N"), std::string::npos) << out;
  // No CUDA in the build, no device, or (so far) no CUDA runner: a message, not a crash.
  EXPECT_EQ(exit_code_of("--device cuda --kv-cache-tokens 1024 --port 0", &out), 2);
  EXPECT_NE(out.find("--device cuda"), std::string::npos) << out;
  EXPECT_EQ(exit_code_of("--help", &out), 0);
  for (const char* flag : {"--model", "--tokenizer", "--host", "--port", "--config", "--block-size",
                           "--kv-cache-tokens", "--kv-cache-memory", "--kv-cache-memory-fraction",
                           "--kv-cache-dtype", "--swap-space-tokens", "--max-num-seqs", "--max-batched-tokens",
                           "--prefill-chunk", "--preemption", "--admission", "--batching", "--max-waiting",
                           "--api-key", "--threads", "--device", "--shutdown-timeout", "--log-level",
                           "--log-format", "--log-stats-interval"})
    EXPECT_NE(out.find(flag), std::string::npos) << flag;
}

// Starts `conveyor serve --port 0`, reads its log up to the listening line.
struct Child {
  pid_t pid = -1;
  FILE* out = nullptr;
  std::string log;
  uint16_t port = 0;
};

// Starts `conveyor serve ARGS` with its output on c.out, and returns at once.
Child spawn_serve(std::vector<std::string> args) {
  Child c;
  args.insert(args.begin(), {kConveyor, "serve"});
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  int fds[2];
  if (pipe(fds) != 0) return c;
  c.pid = fork();
  if (c.pid == 0) {
    dup2(fds[1], STDOUT_FILENO);
    dup2(fds[1], STDERR_FILENO);
    close(fds[0]);
    execv(kConveyor.c_str(), argv.data());
    _exit(127);
  }
  close(fds[1]);
  c.out = fdopen(fds[0], "r");
  return c;
}

Child start_serve(const char* capacity_flag = "--kv-cache-tokens", const char* capacity = "4096",
                  const char* dtype = "auto", const std::vector<std::string>& extra = {}) {
  std::vector<std::string> args = {"--port", "0", capacity_flag, capacity, "--kv-cache-dtype", dtype, "--threads", "1"};
  args.insert(args.end(), extra.begin(), extra.end());
  Child c = spawn_serve(std::move(args));
  if (c.out == nullptr) return c;
  const std::regex listening("listening on http://127\\.0\\.0\\.1:([0-9]+)");
  char line[1024];
  while (fgets(line, sizeof line, c.out)) {
    c.log += line;
    std::cmatch m;
    if (std::regex_search(line, m, listening)) {
      c.port = uint16_t(std::stoi(m[1]));
      break;
    }
  }
  return c;
}

// Its exit code, -1 if a signal ended it, -2 (and it is killed) if it still
// runs after `timeout`; `raw` gets waitpid's status.
int wait_exit(Child& c, std::chrono::seconds timeout, int* raw = nullptr) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  int status = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    if (waitpid(c.pid, &status, WNOHANG) == c.pid) {
      if (raw) *raw = status;
      return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  kill(c.pid, SIGKILL);
  waitpid(c.pid, &status, 0);
  return -2;  // hung
}

TEST(ServeCommand, LogsServesAndStopsOnSignals) {
  for (int sig : {SIGTERM, SIGINT}) {
    Child c = start_serve();
    ASSERT_GT(c.port, 0) << c.log;
    EXPECT_NE(c.log.find("conveyor-tiny"), std::string::npos) << c.log;
    EXPECT_NE(c.log.find("KV cache 4096 tokens in 256 blocks of 16"), std::string::npos) << c.log;
    EXPECT_EQ(http_request(c.port, "GET", "/health").status, 200);
    EXPECT_EQ(http_request(c.port, "POST", "/v1/completions", R"({"prompt": "a", "max_tokens": 3})").status, 200);
    kill(c.pid, sig);
    EXPECT_EQ(wait_exit(c, std::chrono::seconds(10)), 0) << "signal " << sig;
    fclose(c.out);
  }
}

// A stop signal while the server starts (here: while it builds a 110M
// model's random weights) ends it at once, with 128 + the signal's number:
// there is nothing to drain yet. Before, it finished starting, listened, and
// only then drained.
TEST(ServeCommand, AStopSignalWhileStartingExitsAtOnce) {
  for (int sig : {SIGTERM, SIGINT}) {
    Child c = spawn_serve({"--port", "0", "--model", "dummy:llama-110m", "--kv-cache-tokens", "4096", "--threads", "1"});
    ASSERT_NE(c.out, nullptr);
    std::this_thread::sleep_for(std::chrono::milliseconds(300));
    const auto sent = std::chrono::steady_clock::now();
    kill(c.pid, sig);
    int status = 0;
    ASSERT_NE(wait_exit(c, std::chrono::seconds(30), &status), -2) << "signal " << sig << ": still running 30 s later";
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - sent).count();
    std::string log;
    char buf[512];
    for (size_t n; (n = fread(buf, 1, sizeof buf, c.out)) > 0;) log.append(buf, n);
    fclose(c.out);
    // Killed by the signal itself if it came before the handler was installed.
    const bool stopped = (WIFEXITED(status) && WEXITSTATUS(status) == 128 + sig) ||
                         (WIFSIGNALED(status) && WTERMSIG(status) == sig);
    EXPECT_TRUE(stopped) << "signal " << sig << ", status " << status << "\n" << log;
    EXPECT_EQ(log.find("listening on"), std::string::npos) << log;
    EXPECT_LT(seconds, 2.0) << "signal " << sig;
  }
}

// The startup line gives the capacity in tokens and bytes, and the dtype:
// conveyor-tiny keeps 4 layers × 2 × 4 KV heads × 8 values per token, 512
// bytes in f16, so 1 MiB holds 128 blocks of 16 tokens.
TEST(ServeCommand, KvCacheMemoryFlagSizesTheCache) {
  Child c = start_serve("--kv-cache-memory", "1MiB", "f16");
  ASSERT_GT(c.port, 0) << c.log;
  EXPECT_NE(c.log.find("KV cache 2048 tokens in 128 blocks of 16, f16, 1.0 MiB (--kv-cache-memory 1.0 MiB)"),
            std::string::npos)
      << c.log;
  EXPECT_EQ(http_request(c.port, "POST", "/v1/completions", R"({"prompt": "a", "max_tokens": 3})").status, 200);
  kill(c.pid, SIGTERM);
  EXPECT_EQ(wait_exit(c, std::chrono::seconds(10)), 0);
  fclose(c.out);
}

// The rest of a child's output, read on a thread as it comes (a child whose
// pipe fills up would block on its log).
struct LogReader {
  std::mutex mutex;
  std::string text;
  std::thread thread;
  explicit LogReader(FILE* out) {
    thread = std::thread([this, out] {
      char line[1024];
      while (fgets(line, sizeof line, out)) {
        std::lock_guard lock(mutex);
        text += line;
      }
    });
  }
  bool has(const std::string& s) {
    std::lock_guard lock(mutex);
    return text.find(s) != std::string::npos;
  }
  std::string all() {
    std::lock_guard lock(mutex);
    return text;
  }
  void join() {  // after the child exits (EOF)
    if (thread.joinable()) thread.join();
  }
  ~LogReader() { join(); }
};

bool eventually(const std::function<bool()>& condition) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
  while (!condition()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return true;
}

TEST(ServeCommand, LimitFlagsAreCheckedAndABadKeyFileFailsTheStart) {
  std::string out;
  EXPECT_EQ(exit_code_of("--port 0 --api-key-file /nonexistent/keys.toml", &out), 2);
  EXPECT_NE(out.find("--api-key-file: cannot open '/nonexistent/keys.toml'"), std::string::npos) << out;
  const std::string bad = ::testing::TempDir() + "serve_bad_keys.toml";
  std::ofstream(bad) << "[[key]]\nkey = \"sk-x\"\nmax_concurrent = 0\n";
  EXPECT_EQ(exit_code_of("--port 0 --api-key-file " + bad, &out), 2);
  EXPECT_NE(out.find("key[0].max_concurrent must be an integer of 1 or more"), std::string::npos) << out;
  EXPECT_EQ(exit_code_of("--header-timeout 0", &out), 2);
  EXPECT_EQ(exit_code_of("--idle-timeout -1", &out), 2);
  EXPECT_EQ(exit_code_of("--ws-max-messages-per-second -1", &out), 2);
  EXPECT_EQ(exit_code_of("--max-connections many", &out), 2);
  EXPECT_EQ(exit_code_of("--help", &out), 0);
  for (const char* flag : {"--api-key-file", "--header-timeout", "--idle-timeout", "--max-connections",
                           "--ws-max-messages-per-second"})
    EXPECT_NE(out.find(flag), std::string::npos) << flag;
}

// SIGHUP reads the key file again: new keys work and old ones stop; a bad
// file keeps the keys there were, with a warning.
TEST(ServeCommand, SighupReloadsTheApiKeyFile) {
  const std::string path = ::testing::TempDir() + "serve_sighup_keys.toml";
  std::ofstream(path) << "[[key]]\nkey = \"sk-before\"\n";
  Child c = start_serve("--kv-cache-tokens", "4096", "auto", {"--api-key-file", path});
  ASSERT_GT(c.port, 0) << c.log;
  EXPECT_NE(c.log.find("(API key required: 1 keys)"), std::string::npos) << c.log;
  LogReader log(c.out);
  auto status_with = [&](const std::string& key) {
    return http_request(c.port, "GET", "/v1/models", "", {{"Authorization", "Bearer " + key}}).status;
  };
  EXPECT_EQ(status_with("sk-before"), 200);
  EXPECT_EQ(status_with("sk-after"), 401);

  std::ofstream(path) << "[[key]]\nkey = \"sk-after\"\n";
  kill(c.pid, SIGHUP);
  EXPECT_TRUE(eventually([&] { return log.has("API keys reloaded"); })) << log.all();
  EXPECT_EQ(status_with("sk-before"), 401);
  EXPECT_EQ(status_with("sk-after"), 200);

  std::ofstream(path) << "this is not TOML [";
  kill(c.pid, SIGHUP);
  EXPECT_TRUE(eventually([&] { return log.has("API key file not reloaded"); })) << log.all();
  EXPECT_EQ(status_with("sk-after"), 200);

  kill(c.pid, SIGTERM);
  EXPECT_EQ(wait_exit(c, std::chrono::seconds(10)), 0);
  log.join();
  fclose(c.out);
}

}  // namespace
}  // namespace conveyor::http::testing
