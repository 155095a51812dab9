// `conveyor generate`, `convert` and `router` as a user runs them: bad
// arguments exit 2 with a message naming the flag, never a crash or a
// silent wrap-around, and convert never writes over its own input.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <csignal>
#include <filesystem>
#include <fstream>
#include <thread>

#include "tests/integration/process.hpp"

namespace conveyor::testing {
namespace {

const std::string kConveyor = CONVEYOR_BINARY;
const std::string kWorkDir = INTEGRATION_WORK_DIR;

ProcessResult conveyor(std::vector<std::string> args) {
  args.insert(args.begin(), kConveyor);
  return run_process(args, std::chrono::seconds(60), {"OMP_WAIT_POLICY=passive"});
}

void expect_usage_error(const std::vector<std::string>& args, const std::string& named) {
  const ProcessResult r = conveyor(args);
  EXPECT_EQ(r.exit_code, 2) << args[0] << " " << args[1] << ": " << r.output;
  EXPECT_NE(r.output.find(named), std::string::npos) << r.output;
}

TEST(GenerateCommand, BadArgumentsExitTwo) {
  // 100000 threads crashed OpenMP (serve already refused more than 4096).
  expect_usage_error({"generate", "--prompt-ids", "1", "--threads", "100000"}, "--threads");
  // An unsigned seed wrapped -1 and saturated 2^64: all gave one stream.
  expect_usage_error({"generate", "--prompt-ids", "1", "--seed", "-1"}, "--seed");
  expect_usage_error({"generate", "--prompt-ids", "1", "--seed", "18446744073709551616"}, "--seed");
  expect_usage_error({"generate", "--prompt-ids", "1", "--temperature", "nan"}, "--temperature");
  expect_usage_error({"generate", "--prompt-ids", "1", "--top-p", "nan"}, "--top-p");
  for (const char* ids : {"1,,2", ",1", "1,", "1 2 3", "1;2"})
    expect_usage_error({"generate", "--prompt-ids", ids}, "--prompt-ids");
}

TEST(GenerateCommand, IdsWithSpacesAroundCommasAndALargeSeedRun) {
  const ProcessResult r = conveyor({"generate", "--prompt-ids", "1, 2 ,3", "--max-tokens", "3", "--ids",
                                    "--seed", "18446744073709551615", "--threads", "1"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
}

TEST(GenerateCommand, SaysWhenTheContextIsFull) {
  // dummy:tiny's context is 512 positions: 1 prompt token leaves room for 511.
  const ProcessResult r = conveyor({"generate", "--model", "dummy:tiny", "--prompt-ids", "1", "--max-tokens",
                                    "1000", "--ids", "--ignore-eos", "--threads", "1"});
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("stopped after 511 tokens: the model's context of 512 tokens is full"),
            std::string::npos) << r.output;
}

TEST(ConvertCommand, RefusesToWriteOverItsInput) {
  const std::filesystem::path dir = std::filesystem::path(kWorkDir) / "convert_same_file";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  const std::string model = (dir / "model.gguf").string();
  ASSERT_EQ(conveyor({"convert", "--model", "dummy:tiny", "--out", model, "--type", "f16"}).exit_code, 0);
  const auto size = std::filesystem::file_size(model);
  const auto written = std::filesystem::last_write_time(model);
  expect_usage_error({"convert", "--model", model, "--out", model, "--type", "q8_0"}, "is the input file");
  // The same file by another name (a link) is the same file.
  const std::string link = (dir / "link.gguf").string();
  std::filesystem::create_symlink("model.gguf", link);
  expect_usage_error({"convert", "--model", model, "--out", link, "--type", "q8_0"}, "is the input file");
  EXPECT_EQ(std::filesystem::file_size(model), size);
  EXPECT_EQ(std::filesystem::last_write_time(model), written);
  // Another path is written.
  EXPECT_EQ(conveyor({"convert", "--model", model, "--out", (dir / "q8.gguf").string(), "--type", "q8_0"}).exit_code,
            0);
  std::filesystem::remove_all(dir);
}

TEST(ConvertCommand, WritesOnlyRegularFilesAndFollowsLinks) {
  // The writer's rename replaced whatever --out named: a device (as root,
  // /dev/null became a file), a pipe, the link rather than its target.
  const std::filesystem::path dir = std::filesystem::path(kWorkDir) / "convert_out_kinds";
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir / "a_directory");
  expect_usage_error({"convert", "--model", "dummy:tiny", "--out", (dir / "a_directory").string()},
                     "is not a regular file");
  expect_usage_error({"convert", "--model", "dummy:tiny", "--out", "/dev/null"}, "is not a regular file");
  EXPECT_TRUE(std::filesystem::is_character_file("/dev/null"));
  const std::filesystem::path target = dir / "target.gguf";
  std::ofstream(target) << "old";
  std::filesystem::permissions(target, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write |
                                           std::filesystem::perms::group_read);
  std::filesystem::create_symlink("target.gguf", dir / "link.gguf");
  const ProcessResult r = conveyor({"convert", "--model", "dummy:tiny", "--out", (dir / "link.gguf").string()});
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(std::filesystem::is_symlink(dir / "link.gguf"));
  EXPECT_GT(std::filesystem::file_size(target), 1000u);
  // The replaced file keeps its permissions, and no temporary file is left.
  EXPECT_EQ(std::filesystem::status(target).permissions(),
            std::filesystem::perms::owner_read | std::filesystem::perms::owner_write |
                std::filesystem::perms::group_read);
  EXPECT_EQ(std::distance(std::filesystem::directory_iterator(dir), std::filesystem::directory_iterator()), 3);
  // A dangling link gets its target created, and the link stays.
  std::filesystem::create_symlink("new_target.gguf", dir / "dangling.gguf");
  ASSERT_EQ(conveyor({"convert", "--model", "dummy:tiny", "--out", (dir / "dangling.gguf").string()}).exit_code, 0);
  EXPECT_TRUE(std::filesystem::is_symlink(dir / "dangling.gguf"));
  EXPECT_TRUE(std::filesystem::is_regular_file(dir / "new_target.gguf"));
  // A model path that does not exist is a bad argument too (as for generate and serve).
  expect_usage_error({"convert", "--model", (dir / "missing.gguf").string(), "--out", (dir / "x.gguf").string()},
                     "missing.gguf");
  std::filesystem::remove_all(dir);
}

// SIGTERM or SIGINT while the file is written: the temporary file (as large
// as the model) goes, and convert dies of the signal as it would have.
TEST(ConvertCommand, AStopSignalWhileWritingLeavesNoTemporaryFile) {
  const std::filesystem::path dir = std::filesystem::path(kWorkDir) / "convert_stopped";
  for (int sig : {SIGTERM, SIGINT}) {
    std::filesystem::remove_all(dir);
    std::filesystem::create_directories(dir);
    const std::string out = (dir / "model.gguf").string();
    const std::vector<std::string> args = {kConveyor, "convert", "--model", "dummy:llama-110m", "--type", "q8_0",
                                           "--out", out};
    std::vector<char*> argv;
    for (const std::string& a : args) argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 1, "/dev/null", O_WRONLY, 0);
    posix_spawn_file_actions_addopen(&actions, 2, "/dev/null", O_WRONLY, 0);
    // Default dispositions: a test run in the background ignores SIGINT,
    // which convert then leaves ignored.
    posix_spawnattr_t attr;
    posix_spawnattr_init(&attr);
    sigset_t defaults;
    sigemptyset(&defaults);
    sigaddset(&defaults, sig);
    posix_spawnattr_setsigdefault(&attr, &defaults);
    posix_spawnattr_setflags(&attr, POSIX_SPAWN_SETSIGDEF);
    pid_t pid = -1;
    ASSERT_EQ(posix_spawn(&pid, kConveyor.c_str(), &actions, &attr, argv.data(), environ), 0);
    posix_spawn_file_actions_destroy(&actions);
    posix_spawnattr_destroy(&attr);
    // Once the temporary file exists, the write is under way.
    const auto writing = [&] {
      for (const auto& entry : std::filesystem::directory_iterator(dir))
        if (entry.path().filename().string().starts_with("model.gguf.tmp.")) return true;
      return false;
    };
    int status = 0;
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (!writing() && waitpid(pid, &status, WNOHANG) == 0 && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    ASSERT_TRUE(writing()) << "convert never began writing";
    ::kill(pid, sig);
    ASSERT_EQ(waitpid(pid, &status, 0), pid);
    if (WIFEXITED(status) && WEXITSTATUS(status) == 0) {
      ADD_FAILURE() << "the write ended before the signal came; nothing was checked";
      continue;
    }
    EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == sig) << "status " << status;
    EXPECT_TRUE(std::filesystem::is_empty(dir)) << "a temporary file or a partial model stayed";
  }
  std::filesystem::remove_all(dir);
}

TEST(RouterCommand, BadArgumentsExitTwo) {
  expect_usage_error({"router", "--nodes", "127.0.0.1:1", "--node-timeout", "nan"}, "--node-timeout");
  expect_usage_error({"router", "--nodes", "127.0.0.1:1", "--block-size", "3"}, "--block-size");
  expect_usage_error({"router", "--nodes", "127.0.0.1:1", "--host", ""}, "--host");
}

}  // namespace
}  // namespace conveyor::testing
