#include "tests/browser/cdp_pipe.hpp"

#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <filesystem>
#include <thread>

namespace conveyor::browser_testing {

namespace json = boost::json;
using Clock = std::chrono::steady_clock;

std::string HeadlessChromium::find_binary() {
  if (const char* env = std::getenv("CHROMIUM"); env && *env) return env;
  const char* path = std::getenv("PATH");
  if (!path) return {};
  for (const char* name : {"chromium", "chromium-browser", "google-chrome"}) {
    std::string dirs = path;
    size_t start = 0;
    while (start <= dirs.size()) {
      const size_t end = std::min(dirs.find(':', start), dirs.size());
      const std::filesystem::path candidate = std::filesystem::path(dirs.substr(start, end - start)) / name;
      if (!candidate.parent_path().empty() && ::access(candidate.c_str(), X_OK) == 0) return candidate.string();
      start = end + 1;
    }
  }
  return {};
}

HeadlessChromium::HeadlessChromium(const std::string& binary, const std::string& profile_dir,
                                   const std::string& log_path) {
  ::signal(SIGPIPE, SIG_IGN);  // a browser that died is a failed write, not a dead test
  std::vector<std::string> args = {binary,
                                   "--headless=new",
                                   "--remote-debugging-pipe",
                                   "--no-sandbox",  // tests run as root in containers
                                   "--user-data-dir=" + profile_dir,
                                   "--no-first-run",
                                   "--no-default-browser-check",
                                   "--disable-gpu",
                                   "--disable-dev-shm-usage",
                                   "--disable-extensions",
                                   "--disable-background-networking",
                                   "--disable-component-update",
                                   "--disable-sync",
                                   "--mute-audio",
                                   "--window-size=1280,900",
                                   "about:blank"};
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  int to[2], from[2];
  if (::pipe2(to, O_CLOEXEC) != 0) return;
  if (::pipe2(from, O_CLOEXEC) != 0) {
    ::close(to[0]);
    ::close(to[1]);
    return;
  }
  const int log = ::open(log_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  pid_ = ::fork();
  if (pid_ == 0) {
    ::setpgid(0, 0);
    // Out of the way of 3 and 4 first: a pipe end may be one of them.
    const int in = ::fcntl(to[0], F_DUPFD, 10);
    const int out = ::fcntl(from[1], F_DUPFD, 10);
    ::dup2(in, 3);  // dup2 clears close-on-exec on the copy
    ::dup2(out, 4);
    const int null = ::open("/dev/null", O_RDONLY);
    ::dup2(null, 0);
    if (log >= 0) {
      ::dup2(log, 1);
      ::dup2(log, 2);
    }
    ::execvp(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(to[0]);
  ::close(from[1]);
  if (log >= 0) ::close(log);
  if (pid_ < 0) {
    ::close(to[1]);
    ::close(from[0]);
    return;
  }
  to_browser_ = to[1];
  from_browser_ = from[0];
}

HeadlessChromium::~HeadlessChromium() {
  if (to_browser_ >= 0) ::close(to_browser_);
  if (from_browser_ >= 0) ::close(from_browser_);
  if (pid_ <= 0) return;
  ::kill(-pid_, SIGTERM);
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  int status = 0;
  while (::waitpid(pid_, &status, WNOHANG) == 0) {
    if (Clock::now() > deadline) {
      ::kill(-pid_, SIGKILL);
      ::waitpid(pid_, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  ::kill(-pid_, SIGKILL);  // renderers and helpers left in its group
}

bool HeadlessChromium::read_message(Clock::time_point deadline, std::string& message, std::string& error) {
  for (;;) {
    if (const size_t end = pending_.find('\0'); end != std::string::npos) {
      message = pending_.substr(0, end);
      pending_.erase(0, end + 1);
      return true;
    }
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) {
      error = "timed out";
      return false;
    }
    pollfd p{from_browser_, POLLIN, 0};
    const int ready = ::poll(&p, 1, int(left.count()));
    if (ready < 0 && errno == EINTR) continue;
    if (ready <= 0) continue;  // the deadline check above ends it
    char chunk[65536];
    const ssize_t n = ::read(from_browser_, chunk, sizeof chunk);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      error = "the browser closed its pipe (it exited?)";
      return false;
    }
    pending_.append(chunk, size_t(n));
  }
}

HeadlessChromium::Reply HeadlessChromium::call(const std::string& method, json::object params,
                                               const std::string& session, std::chrono::milliseconds timeout) {
  Reply reply;
  if (to_browser_ < 0) {
    reply.error = "the browser did not start";
    return reply;
  }
  const int64_t id = next_id_++;
  json::object command{{"id", id}, {"method", method}, {"params", std::move(params)}};
  if (!session.empty()) command["sessionId"] = session;
  std::string text = json::serialize(command);
  text.push_back('\0');
  for (size_t sent = 0; sent < text.size();) {
    const ssize_t n = ::write(to_browser_, text.data() + sent, text.size() - sent);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      reply.error = "cannot write to the browser's pipe";
      return reply;
    }
    sent += size_t(n);
  }
  const auto deadline = Clock::now() + timeout;
  std::string message;
  while (read_message(deadline, message, reply.error)) {
    json::error_code ec;
    json::value v = json::parse(message, ec);
    if (ec || !v.is_object()) continue;
    json::object& o = v.as_object();
    if (!o.contains("id")) {
      events_.push_back(std::move(o));
      continue;
    }
    if (o["id"].to_number<int64_t>() != id) continue;  // a late answer to a timed-out call
    if (o.contains("error")) {
      reply.error = json::serialize(o["error"]);
      return reply;
    }
    reply.ok = true;
    if (o.contains("result") && o["result"].is_object()) reply.result = std::move(o["result"].as_object());
    return reply;
  }
  reply.error = method + ": " + reply.error;
  return reply;
}

}  // namespace conveyor::browser_testing
