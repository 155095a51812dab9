#include "tests/integration/process.hpp"

#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <thread>

#include "tools/conveyor/bench_client.hpp"

namespace conveyor::testing {
namespace {

using Clock = std::chrono::steady_clock;

// fork + exec with stdout/stderr to `out_fd`, in its own process group so a
// timeout can kill its children too (npm spawns some).
pid_t spawn(const std::vector<std::string>& argv, const std::vector<std::string>& env, const std::string& cwd,
            int out_fd) {
  std::vector<char*> args;
  for (const auto& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  const pid_t pid = fork();
  if (pid != 0) return pid;
  setpgid(0, 0);
  dup2(out_fd, STDOUT_FILENO);
  dup2(out_fd, STDERR_FILENO);
  const int devnull = open("/dev/null", O_RDONLY);
  if (devnull >= 0) dup2(devnull, STDIN_FILENO);
  for (const auto& e : env) putenv(const_cast<char*>(e.c_str()));
  if (!cwd.empty() && chdir(cwd.c_str()) != 0) _exit(126);
  execvp(args[0], args.data());
  _exit(127);
}

// waitpid with a deadline; true when the process ended (status filled).
bool wait_until(pid_t pid, Clock::time_point deadline, int& status) {
  while (true) {
    const pid_t r = waitpid(pid, &status, WNOHANG);
    if (r == pid || r < 0) return true;
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

}  // namespace

ProcessResult run_process(const std::vector<std::string>& argv, std::chrono::seconds timeout,
                          const std::vector<std::string>& env, const std::string& cwd) {
  ProcessResult result;
  char path[] = "/tmp/conveyor-test-output-XXXXXX";
  const int fd = mkstemp(path);
  if (fd < 0) {
    result.output = "mkstemp failed";
    return result;
  }
  const pid_t pid = spawn(argv, env, cwd, fd);
  close(fd);
  int status = 0;
  if (pid < 0) {
    result.output = "fork failed";
  } else if (!wait_until(pid, Clock::now() + timeout, status)) {
    result.timed_out = true;
    kill(-pid, SIGKILL);
    waitpid(pid, &status, 0);
  } else if (WIFEXITED(status)) {
    result.exit_code = WEXITSTATUS(status);
  }
  result.output = read_file(path);
  unlink(path);
  return result;
}

uint16_t free_loopback_port() {
  const int s = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof addr;
  uint16_t port = 0;
  if (bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      getsockname(s, reinterpret_cast<sockaddr*>(&addr), &len) == 0)
    port = ntohs(addr.sin_port);
  close(s);
  return port;
}

ServeProcess::ServeProcess(const std::string& conveyor_binary, const std::vector<std::string>& extra_args,
                           const std::string& log_path, const std::vector<std::string>& env,
                           const std::string& command)
    : port_(free_loopback_port()), log_path_(log_path) {
  std::vector<std::string> argv{conveyor_binary, command, "--host", "127.0.0.1", "--port", std::to_string(port_)};
  argv.insert(argv.end(), extra_args.begin(), extra_args.end());
  const int fd = open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
  if (fd < 0) return;
  pid_ = spawn(argv, env, {}, fd);
  close(fd);
}

ServeProcess::~ServeProcess() { stop(); }

bool ServeProcess::wait_ready(std::chrono::seconds timeout, std::string& error) {
  if (pid_ <= 0) {
    error = "conveyor serve did not start";
    return false;
  }
  const auto url = bench::ServerUrl::parse(this->url());
  const auto deadline = Clock::now() + timeout;
  while (Clock::now() < deadline) {
    int status = 0;
    if (waitpid(pid_, &status, WNOHANG) == pid_) {
      pid_ = -1;
      error = "conveyor serve exited (status " + std::to_string(status) + "):\n" + log_tail();
      return false;
    }
    // Ready once /v1/models answers: with its list, or a 401 when keys guard it.
    const auto models = bench::fetch_models(*url, 2);
    if (models || models.error().message.find("answered HTTP 401") != std::string::npos) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  error = "conveyor serve did not answer GET /v1/models within the time limit:\n" + log_tail();
  return false;
}

std::string ServeProcess::log() const { return read_file(log_path_); }

void ServeProcess::signal(int signal) {
  if (pid_ > 0) kill(pid_, signal);
}

int ServeProcess::wait_exit(std::chrono::milliseconds timeout) {
  if (pid_ <= 0) return -1;
  int status = 0;
  int code = -1;
  if (!wait_until(pid_, Clock::now() + timeout, status)) {
    kill(-pid_, SIGKILL);
    waitpid(pid_, &status, 0);
    code = -2;
  } else if (WIFEXITED(status)) {
    code = WEXITSTATUS(status);
  }
  pid_ = -1;
  return code;
}

std::string ServeProcess::log_tail(size_t bytes) const {
  const std::string log = read_file(log_path_);
  return log.size() > bytes ? log.substr(log.size() - bytes) : log;
}

int ServeProcess::stop(std::chrono::seconds grace) {
  if (pid_ <= 0) return -1;
  kill(pid_, SIGTERM);
  int status = 0;
  int code = -1;
  if (!wait_until(pid_, Clock::now() + grace, status)) {
    kill(-pid_, SIGKILL);
    waitpid(pid_, &status, 0);
  } else if (WIFEXITED(status)) {
    code = WEXITSTATUS(status);
  }
  pid_ = -1;
  return code;
}

}  // namespace conveyor::testing
