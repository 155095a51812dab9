// A real third-party client: the official `openai` npm package (Node.js)
// streams a chat completion and a completion from `conveyor serve`, and
// speaks the Responses API to it.
//
// The package is installed with `npm ci` from the pinned lockfile in
// openai_client/ into the build tree on the first run (later runs reuse it).
// Without node, npm or network access the test is skipped and says why.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>

#include "tests/integration/process.hpp"
#include "tests/shared_models.hpp"

namespace conveyor::testing {
namespace {

namespace fs = std::filesystem;

const std::string kConveyor = CONVEYOR_BINARY;
const std::string kWorkDir = INTEGRATION_WORK_DIR;
const std::string kClientSource = OPENAI_CLIENT_SOURCE_DIR;
const std::string kNode = NODE_EXECUTABLE;
const std::string kNpm = NPM_EXECUTABLE;

std::string tail(const std::string& s, size_t n = 3000) { return s.size() > n ? s.substr(s.size() - n) : s; }

bool same_file_contents(const fs::path& a, const fs::path& b) {
  std::ifstream fa(a, std::ios::binary), fb(b, std::ios::binary);
  if (!fa || !fb) return false;
  return std::string(std::istreambuf_iterator<char>(fa), {}) == std::string(std::istreambuf_iterator<char>(fb), {});
}

// Copies the client into the build tree and installs its pinned packages;
// an empty string on success, else why it could not.
std::string install_client(const fs::path& dir) {
  if (kNode.empty() || kNode.ends_with("-NOTFOUND")) return "node was not found when configuring";
  if (kNpm.empty() || kNpm.ends_with("-NOTFOUND")) return "npm was not found when configuring";
  fs::create_directories(dir);
  const bool lock_unchanged = same_file_contents(fs::path(kClientSource) / "package-lock.json",
                                                 dir / "package-lock.json");
  for (const char* f : {"package.json", "package-lock.json", "stream_check.mjs", "tool_check.mjs",
                        "responses_check.mjs"})
    fs::copy_file(fs::path(kClientSource) / f, dir / f, fs::copy_options::overwrite_existing);
  if (lock_unchanged && fs::exists(dir / "node_modules" / "openai" / "package.json")) return {};
  const auto r = run_process({kNpm, "ci", "--no-audit", "--no-fund", "--fetch-retries=1", "--fetch-timeout=30000"},
                             std::chrono::seconds(300), {}, dir.string());
  if (r.exit_code != 0)
    return "`npm ci` of the openai package failed (no network?)" + std::string(r.timed_out ? " (timed out)" : "") +
           ":\n" + tail(r.output, 1500);
  return {};
}

TEST(OpenAiNodeClient, StreamsChatAndCompletionFromConveyorServe) {
  const fs::path dir = fs::path(kWorkDir) / "openai_client";
  if (const std::string why = install_client(dir); !why.empty()) GTEST_SKIP() << why;

  ServeProcess server(kConveyor, {}, kWorkDir + "/openai_node_serve.log");
  std::string error;
  ASSERT_TRUE(server.wait_ready(std::chrono::seconds(120), error)) << error;

  const auto r = run_process({kNode, "stream_check.mjs"}, std::chrono::seconds(300),
                             {"CONVEYOR_URL=" + server.url()}, dir.string());
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 0) << tail(r.output) << "\nserver log:\n" << server.log_tail();
  EXPECT_NE(r.output.find("\"failures\":[]"), std::string::npos) << tail(r.output);
  std::cout << tail(r.output, 1000) << "\n";
  EXPECT_EQ(server.stop(), 0) << "conveyor serve did not exit cleanly on SIGTERM:\n" << server.log_tail();
}

// The Responses API (openai_client/responses_check.mjs) on a model with a
// real vocabulary and chat template (Qwen's, which declares tools):
// create, stream, previous_response_id with its KV reused, retrieve and
// delete, text.format json_schema and function tools.
TEST(OpenAiNodeClient, RespondsThroughTheResponsesApi) {
  const std::string model = CONVEYOR_SHARED_MODELS "/tiny-qwen2-q4_k_m.gguf";
  if (!fs::exists(model)) GTEST_SKIP() << model << " is not there (see ../shared/models/README.md)";
  const fs::path dir = fs::path(kWorkDir) / "openai_client";
  if (const std::string why = install_client(dir); !why.empty()) GTEST_SKIP() << why;

  ServeProcess server(kConveyor, {"--model", model}, kWorkDir + "/openai_node_responses_serve.log");
  std::string error;
  ASSERT_TRUE(server.wait_ready(std::chrono::seconds(120), error)) << error;

  const auto r = run_process({kNode, "responses_check.mjs"}, std::chrono::seconds(300),
                             {"CONVEYOR_URL=" + server.url()}, dir.string());
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 0) << tail(r.output) << "\nserver log:\n" << server.log_tail();
  EXPECT_NE(r.output.find("\"failures\":[]"), std::string::npos) << tail(r.output);
  std::cout << tail(r.output, 3000) << "\n";
  EXPECT_EQ(server.stop(), 0) << "conveyor serve did not exit cleanly on SIGTERM:\n" << server.log_tail();
}

// Tool calling as agents use it (openai_client/tool_check.mjs) on real
// vocabularies with random weights: Qwen 3's template (the Hermes
// <tool_call> syntax) and a Llama 3.x-style template with tools
// (tests/http/data/llama3_tools.jinja: JSON calls, llama3_json).
void run_tool_check(const std::string& model, const std::vector<std::string>& extra_args, const std::string& log) {
  const std::string path = test::shared_model_path(model);
  if (!fs::exists(path)) GTEST_SKIP() << path << " is not there (see ../shared/models/README.md)";
  const fs::path dir = fs::path(kWorkDir) / "openai_client";
  if (const std::string why = install_client(dir); !why.empty()) GTEST_SKIP() << why;
  std::vector<std::string> args = {"--model", path, "--kv-cache-tokens", "16384"};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  ServeProcess server(kConveyor, args, kWorkDir + "/" + log);
  std::string error;
  ASSERT_TRUE(server.wait_ready(std::chrono::seconds(120), error)) << error;
  const auto r = run_process({kNode, "tool_check.mjs"}, std::chrono::seconds(600),
                             {"CONVEYOR_URL=" + server.url()}, dir.string());
  EXPECT_FALSE(r.timed_out);
  EXPECT_EQ(r.exit_code, 0) << tail(r.output) << "\nserver log:\n" << server.log_tail();
  EXPECT_NE(r.output.find("\"failures\":[]"), std::string::npos) << tail(r.output);
  std::cout << tail(r.output, 2000) << "\n";
  EXPECT_EQ(server.stop(), 0) << "conveyor serve did not exit cleanly on SIGTERM:\n" << server.log_tail();
}

TEST(OpenAiNodeClient, CallsToolsWithQwensTemplate) {
  run_tool_check("tiny-qwen2-q4_k_m.gguf", {}, "openai_node_tools_qwen.log");
}

TEST(OpenAiNodeClient, CallsToolsWithLlamasTemplate) {
  run_tool_check("tiny-llama3-q4_k_m.gguf",
                 {"--chat-template", (fs::path(CONVEYOR_SOURCE_DIR) / "tests/http/data/llama3_tools.jinja").string()},
                 "openai_node_tools_llama.log");
}

}  // namespace
}  // namespace conveyor::testing
