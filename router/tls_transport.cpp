#include "router/tls_transport.hpp"

#include <caf/all.hpp>
#include <caf/io/basp_broker.hpp>
#include <caf/io/middleman.hpp>
#include <caf/io/middleman_actor_impl.hpp>
#include <caf/io/network/default_multiplexer.hpp>
#include <caf/io/network/doorman_impl.hpp>
#include <caf/io/network/stream_impl.hpp>
#include <caf/io/scribe.hpp>

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <openssl/x509.h>

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <climits>
#include <cstring>
#include <map>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

namespace conveyor {
namespace {

namespace net = caf::io::network;
using Clock = std::chrono::steady_clock;

constexpr auto kHandshakeTimeout = std::chrono::seconds(10);
// A node's peer that has sent nothing this long after connecting is closed
// (a TLS client sends its hello at once).
constexpr auto kFirstByteTimeout = std::chrono::seconds(3);
// A node's handshakes under way at once. Past it the oldest of those whose
// peer has sent nothing are closed first, then the oldest, so connections
// that stall cannot keep a router out; past twice as many a new connection
// is closed at once.
constexpr size_t kMaxPendingHandshakes = 64;
constexpr auto kRepeatInterval = std::chrono::seconds(60);

// ---- the log ------------------------------------------------------------------------

std::mutex g_log_mutex;
TlsLog g_log;
struct Repeat {
  Clock::time_point last;
  uint64_t left_out = 0;
};
std::map<std::string, Repeat> g_repeats;  // by key: peer host and what happened

void log_line(bool warning, const std::string& message) {
  std::lock_guard lock(g_log_mutex);
  if (g_log) g_log(warning, message);
}

// A line a peer retrying every second would repeat: once a minute per key,
// with the number left out since.
void log_repeating(bool warning, const std::string& key, const std::string& message) {
  std::lock_guard lock(g_log_mutex);
  if (!g_log) return;
  const auto now = Clock::now();
  if (g_repeats.size() > 1000)
    std::erase_if(g_repeats, [&](const auto& r) { return now - r.second.last >= kRepeatInterval; });
  auto [it, fresh] = g_repeats.try_emplace(key);
  if (!fresh && now - it->second.last < kRepeatInterval) {
    ++it->second.left_out;
    return;
  }
  std::string line = message;
  if (it->second.left_out > 0)
    line += " (" + std::to_string(it->second.left_out) + " more like it since the last such line)";
  it->second = Repeat{now, 0};
  g_log(warning, line);
}

std::string host_of(const std::string& peer) { return peer.substr(0, peer.rfind(':')); }

// ---- OpenSSL --------------------------------------------------------------------------

// The reasons in this thread's OpenSSL error queue, which it empties.
std::string drain_errors() {
  std::string out;
  while (const unsigned long e = ERR_get_error()) {
    const char* reason = ERR_reason_error_string(e);
    std::string r = reason != nullptr ? reason : "OpenSSL error " + std::to_string(e);
    if (out.find(r) != std::string::npos) continue;
    out += (out.empty() ? "" : "; ") + r;
  }
  return out;
}

bool has(const std::string& s, const char* part) { return s.find(part) != std::string::npos; }

// Why a handshake failed, in words (`reasons`: drain_errors() after it).
std::string explain(SSL* ssl, int code, const std::string& reasons) {
  if (reasons.empty() || has(reasons, "unexpected eof")) {
    if (code == SSL_ERROR_SYSCALL || code == SSL_ERROR_ZERO_RETURN || !reasons.empty())
      return "the peer closed the connection during the handshake";
    return "the handshake failed";
  }
  const long verify = SSL_get_verify_result(ssl);
  if (has(reasons, "certificate verify failed") && verify != X509_V_OK) {
    const bool dates = verify == X509_V_ERR_CERT_HAS_EXPIRED || verify == X509_V_ERR_CERT_NOT_YET_VALID;
    return std::string("refused the peer's certificate: ") + X509_verify_cert_error_string(verify) +
           (dates ? "" : " (it must be signed by the CA of this end's --tls-ca)");
  }
  if (has(reasons, "peer did not return a certificate")) return "the peer presented no certificate";
  if (has(reasons, "certificate expired"))
    return "the peer refused the handshake (" + reasons + "): this end's certificate has expired";
  if (has(reasons, "alert"))
    return "the peer refused the handshake (" + reasons +
           "): this end's certificate is not signed by the CA the peer trusts, or the TLS settings differ";
  if (has(reasons, "wrong version number") || has(reasons, "packet length too long") || has(reasons, "http request") ||
      has(reasons, "unknown protocol") || has(reasons, "record layer failure"))
    return "the peer does not speak TLS (" + reasons + "): is it run without --tls-*?";
  return reasons;
}

// OpenSSL writes to sockets with write(): a peer gone raises SIGPIPE, which
// is blocked around the calls unless the process ignores it (serve and
// router do), as caf::openssl does.
class SigpipeGuard {
 public:
  explicit SigpipeGuard(bool needed) : needed_(needed) {
    if (!needed_) return;
    sigemptyset(&pipe_);
    sigaddset(&pipe_, SIGPIPE);
    pthread_sigmask(SIG_BLOCK, &pipe_, &saved_);
  }
  ~SigpipeGuard() {
    if (!needed_) return;
    timespec zero{};
    while (sigtimedwait(&pipe_, nullptr, &zero) > 0) {
    }
    pthread_sigmask(SIG_SETMASK, &saved_, nullptr);
  }
  SigpipeGuard(const SigpipeGuard&) = delete;
  SigpipeGuard& operator=(const SigpipeGuard&) = delete;

 private:
  bool needed_;
  sigset_t pipe_{}, saved_{};
};

bool sigpipe_ignored() {
  struct sigaction current {};
  return sigaction(SIGPIPE, nullptr, &current) == 0 && current.sa_handler == SIG_IGN;
}

Expected<std::shared_ptr<SSL_CTX>> make_context(const TlsFiles& f) {
  if (f.cert.empty() || f.key.empty() || f.ca.empty())
    return make_error(Errc::invalid_argument, "TLS takes a certificate, its private key and a CA certificate");
  OPENSSL_init_ssl(0, nullptr);
  ERR_clear_error();
  std::shared_ptr<SSL_CTX> ctx(SSL_CTX_new(TLS_method()), SSL_CTX_free);
  if (!ctx) return make_error(Errc::internal, "cannot create a TLS context: " + drain_errors());
  SSL_CTX* c = ctx.get();
  auto fail = [](const std::string& what) { return make_error(Errc::invalid_argument, what + ": " + drain_errors()); };
  if (SSL_CTX_use_certificate_chain_file(c, f.cert.c_str()) != 1)
    return fail("cannot load the certificate '" + f.cert + "'");
  const std::string mismatch = "the private key '" + f.key + "' does not belong to the certificate '" + f.cert + "'";
  if (SSL_CTX_use_PrivateKey_file(c, f.key.c_str(), SSL_FILETYPE_PEM) != 1) {
    const std::string reasons = drain_errors();
    if (has(reasons, "key values mismatch")) return make_error(Errc::invalid_argument, mismatch);
    return make_error(Errc::invalid_argument, "cannot load the private key '" + f.key + "': " + reasons);
  }
  if (SSL_CTX_check_private_key(c) != 1) return make_error(Errc::invalid_argument, mismatch);
  if (SSL_CTX_load_verify_locations(c, f.ca.c_str(), nullptr) != 1)
    return fail("cannot load the CA certificate '" + f.ca + "'");
  if (STACK_OF(X509_NAME)* names = SSL_load_client_CA_file(f.ca.c_str())) SSL_CTX_set_client_CA_list(c, names);
  SSL_CTX_set_verify(c, SSL_VERIFY_PEER | SSL_VERIFY_FAIL_IF_NO_PEER_CERT, nullptr);
  SSL_CTX_set_min_proto_version(c, TLS1_2_VERSION);
  uint64_t options = SSL_OP_NO_TICKET | SSL_OP_NO_COMPRESSION;
#ifdef SSL_OP_NO_RENEGOTIATION
  options |= SSL_OP_NO_RENEGOTIATION;
#endif
#ifdef SSL_OP_IGNORE_UNEXPECTED_EOF
  options |= SSL_OP_IGNORE_UNEXPECTED_EOF;  // a peer's plain close is a close
#endif
  SSL_CTX_set_options(c, options);
  SSL_CTX_set_num_tickets(c, 0);
  SSL_CTX_set_session_cache_mode(c, SSL_SESS_CACHE_OFF);
  SSL_CTX_set_mode(c, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
  ERR_clear_error();
  return ctx;
}

struct TlsShared {
  std::shared_ptr<SSL_CTX> ctx;
  bool guard_sigpipe = true;
};

// One connection's TLS state. It owns the socket until release_fd() (a
// scribe's stream closes it then).
class TlsConnection {
 public:
  enum class Step { done, want_read, want_write, failed };

  TlsConnection(std::shared_ptr<TlsShared> shared, net::native_socket fd, bool server, std::string peer)
      : shared_(std::move(shared)), fd_(fd), peer_(std::move(peer)) {
    ERR_clear_error();
    ssl_ = SSL_new(shared_->ctx.get());
    if (ssl_ == nullptr || SSL_set_fd(ssl_, fd) != 1) {
      ERR_clear_error();
      return;
    }
    if (server) SSL_set_accept_state(ssl_);
    else SSL_set_connect_state(ssl_);
  }
  ~TlsConnection() {
    SSL_free(ssl_);
    if (fd_ != net::invalid_native_socket) net::close_socket(fd_);
  }
  TlsConnection(const TlsConnection&) = delete;
  TlsConnection& operator=(const TlsConnection&) = delete;

  bool valid() const { return ssl_ != nullptr; }
  const std::string& peer() const { return peer_; }
  net::native_socket fd() const { return fd_; }
  net::native_socket release_fd() { return std::exchange(fd_, net::invalid_native_socket); }

  Step handshake(std::string& why) {
    SigpipeGuard guard(shared_->guard_sigpipe);
    ERR_clear_error();
    const int r = SSL_do_handshake(ssl_);
    if (r == 1) return Step::done;
    const int code = SSL_get_error(ssl_, r);
    if (code == SSL_ERROR_WANT_READ) return Step::want_read;
    if (code == SSL_ERROR_WANT_WRITE) return Step::want_write;
    why = explain(ssl_, code, drain_errors());
    return Step::failed;
  }

  // The peer certificate's subject and issuer, for the log.
  std::string peer_certificate() const {
#if OPENSSL_VERSION_NUMBER >= 0x30000000L
    X509* cert = SSL_get1_peer_certificate(ssl_);
#else
    X509* cert = SSL_get_peer_certificate(ssl_);
#endif
    if (cert == nullptr) return "no certificate";
    char subject[256] = {}, issuer[256] = {};
    X509_NAME_oneline(X509_get_subject_name(cert), subject, sizeof subject);
    X509_NAME_oneline(X509_get_issuer_name(cert), issuer, sizeof issuer);
    X509_free(cert);
    return std::string("certificate ") + subject + ", issuer " + issuer;
  }

  // The stream policy of caf::io::network::stream_impl.
  net::rw_state read_some(size_t& result, net::native_socket, void* buf, size_t len) {
    result = 0;
    if (len == 0) return net::rw_state::indeterminate;
    SigpipeGuard guard(shared_->guard_sigpipe);
    ERR_clear_error();  // else SSL_get_error() may blame this call for an earlier one's error
    const int n = SSL_read(ssl_, buf, int(std::min<size_t>(len, INT_MAX)));
    if (n > 0) {
      result = size_t(n);
      return net::rw_state::success;
    }
    return after_failed_io(n);
  }

  net::rw_state write_some(size_t& result, net::native_socket, const void* buf, size_t len) {
    result = 0;
    if (len == 0) return net::rw_state::indeterminate;
    SigpipeGuard guard(shared_->guard_sigpipe);
    ERR_clear_error();
    const int n = SSL_write(ssl_, buf, int(std::min<size_t>(len, INT_MAX)));
    if (n > 0) {
      result = size_t(n);
      return net::rw_state::success;
    }
    return after_failed_io(n);
  }

  bool must_read_more(net::native_socket, size_t threshold) { return size_t(SSL_pending(ssl_)) >= threshold; }

 private:
  net::rw_state after_failed_io(int n) {
    const int code = SSL_get_error(ssl_, n);
    if (code == SSL_ERROR_WANT_READ || code == SSL_ERROR_WANT_WRITE) return net::rw_state::success;  // nothing now
    const std::string reasons = drain_errors();
    // A close (ZERO_RETURN, SYSCALL, an EOF) is CAF's to report; an error in
    // the TLS layer (the peer's alert after it refused this end's
    // certificate, as a TLS 1.3 server does after the client's handshake
    // ended) is worth a line.
    if (code == SSL_ERROR_SSL && !reasons.empty() && !has(reasons, "unexpected eof"))
      log_repeating(true, host_of(peer_) + " io " + reasons,
                    "TLS: the connection with " + peer_ + " failed: " + explain(ssl_, code, reasons));
    return net::rw_state::failure;
  }

  std::shared_ptr<TlsShared> shared_;
  SSL* ssl_ = nullptr;
  net::native_socket fd_;
  std::string peer_;
};

struct TlsPolicy {
  explicit TlsPolicy(std::unique_ptr<TlsConnection> c) : conn(std::move(c)) {}
  net::rw_state read_some(size_t& result, net::native_socket fd, void* buf, size_t len) {
    return conn->read_some(result, fd, buf, len);
  }
  net::rw_state write_some(size_t& result, net::native_socket fd, const void* buf, size_t len) {
    return conn->write_some(result, fd, buf, len);
  }
  bool must_read_more(net::native_socket fd, size_t threshold) { return conn->must_read_more(fd, threshold); }
  std::unique_ptr<TlsConnection> conn;
};

std::string peer_of(net::native_socket fd) {
  auto addr = net::remote_addr_of_fd(fd);
  auto port = net::remote_port_of_fd(fd);
  return (addr ? *addr : std::string("?")) + ":" + (port ? std::to_string(*port) : std::string("?"));
}

// A connection whose handshake is done (and the peer verified), as BASP's.
class TlsScribe final : public caf::io::scribe {
 public:
  TlsScribe(net::default_multiplexer& mpx, std::unique_ptr<TlsConnection> conn)
      : caf::io::scribe(net::conn_hdl_from_socket(conn->fd())), stream_(mpx, conn->release_fd(), std::move(conn)) {}

  void configure_read(caf::io::receive_policy::config config) override {
    stream_.configure_read(config);
    if (!launched_) {
      launched_ = true;
      stream_.start(this);
    }
  }
  void ack_writes(bool enable) override { stream_.ack_writes(enable); }
  std::vector<char>& wr_buf() override { return stream_.wr_buf(); }
  std::vector<char>& rd_buf() override { return stream_.rd_buf(); }
  void graceful_shutdown() override {
    stream_.graceful_shutdown();
    detach(&stream_.backend(), false);
  }
  void flush() override { stream_.flush(this); }
  std::string addr() const override {
    auto x = net::remote_addr_of_fd(stream_.fd());
    return x ? *x : std::string();
  }
  uint16_t port() const override {
    auto x = net::remote_port_of_fd(stream_.fd());
    return x ? *x : uint16_t(0);
  }
  void add_to_loop() override { stream_.activate(this); }
  void remove_from_loop() override { stream_.passivate(); }

 private:
  bool launched_ = false;
  net::stream_impl<TlsPolicy> stream_;
};

class TlsDoorman;

// A node's handshakes, on a thread of their own: CAF's event loop gets only
// connections whose peers were verified, and a peer that connects and says
// nothing (or too slowly) costs a pollfd until its deadline, not a spinning
// multiplexer, and gives its place to a newer connection when too many are
// under way (kMaxPendingHandshakes).
class Handshaker {
 public:
  explicit Handshaker(net::default_multiplexer& mpx) : mpx_(mpx) {
    if (pipe2(wake_, O_CLOEXEC | O_NONBLOCK) != 0) wake_[0] = wake_[1] = -1;
  }
  ~Handshaker() {
    stop();
    for (int fd : wake_)
      if (fd >= 0) close(fd);
  }

  // From the multiplexer's thread.
  void add(std::unique_ptr<TlsConnection> conn, caf::intrusive_ptr<TlsDoorman> door);

  void stop() {
    {
      std::lock_guard lock(mutex_);
      if (stopping_) return;
      stopping_ = true;
    }
    wake();
    if (thread_.joinable()) thread_.join();
    std::lock_guard lock(mutex_);
    incoming_.clear();
  }

 private:
  struct Pending {
    std::unique_ptr<TlsConnection> conn;
    caf::intrusive_ptr<TlsDoorman> door;
    Clock::time_point arrived;
    short events = POLLIN;
    bool heard = false;  // the peer has sent something
    Clock::time_point deadline() const { return arrived + (heard ? kHandshakeTimeout : kFirstByteTimeout); }
  };

  void wake() {
    const char byte = 0;
    if (wake_[1] >= 0) {
      [[maybe_unused]] const ssize_t n = write(wake_[1], &byte, 1);
    }
  }
  void run();
  void make_room(std::vector<Pending>& pending);
  void finish(Pending& p, bool ok);

  net::default_multiplexer& mpx_;
  int wake_[2] = {-1, -1};
  std::mutex mutex_;
  std::vector<Pending> incoming_;
  size_t pending_count_ = 0;  // incoming and in the thread's hands
  bool stopping_ = false;
  std::thread thread_;
};

class TlsDoorman final : public net::doorman_impl {
 public:
  TlsDoorman(net::default_multiplexer& mpx, net::native_socket fd, std::shared_ptr<TlsShared> shared,
             std::shared_ptr<Handshaker> handshaker)
      : net::doorman_impl(mpx, fd), shared_(std::move(shared)), handshaker_(std::move(handshaker)) {}

  bool new_connection() override {
    if (detached()) return false;
    const net::native_socket fd = acceptor_.accepted_socket();
    acceptor_.accepted_socket() = net::invalid_native_socket;
    net::nonblocking(fd, true);
    net::child_process_inherit(fd, false);
    auto conn = std::make_unique<TlsConnection>(shared_, fd, true, peer_of(fd));
    if (!conn->valid()) return false;
    handshaker_->add(std::move(conn), caf::intrusive_ptr<TlsDoorman>(this));
    return true;
  }

  // On the multiplexer's thread: a connection whose handshake succeeded.
  void adopt(std::unique_ptr<TlsConnection> conn) {
    if (detached()) return;  // the port was closed meanwhile
    auto& mpx = acceptor_.backend();
    auto scribe = caf::make_counted<TlsScribe>(mpx, std::move(conn));
    const auto hdl = scribe->hdl();
    parent()->add_scribe(std::move(scribe));
    caf::io::doorman::new_connection(&mpx, hdl);
  }

 private:
  std::shared_ptr<TlsShared> shared_;
  std::shared_ptr<Handshaker> handshaker_;
};

void Handshaker::add(std::unique_ptr<TlsConnection> conn, caf::intrusive_ptr<TlsDoorman> door) {
  std::lock_guard lock(mutex_);
  if (stopping_) return;
  if (pending_count_ >= 2 * kMaxPendingHandshakes) {
    log_repeating(true, host_of(conn->peer()) + " busy",
                  "TLS: closed a connection from " + conn->peer() + ": " + std::to_string(pending_count_) +
                      " handshakes are under way");
    return;
  }
  ++pending_count_;
  incoming_.push_back(Pending{std::move(conn), std::move(door), Clock::now()});
  if (!thread_.joinable()) thread_ = std::thread([this] { run(); });
  wake();
}

void Handshaker::finish(Pending& p, bool ok) {
  {
    std::lock_guard lock(mutex_);
    --pending_count_;
  }
  // The doorman and the connection go back to the multiplexer's thread,
  // which owns them (a connection it never adopts closes with the closure).
  mpx_.post([conn = std::move(p.conn), door = std::move(p.door), ok]() mutable {
    if (ok) door->adopt(std::move(conn));
  });
}

// Past kMaxPendingHandshakes, closes the oldest connections whose peers
// have sent nothing, then (all of them talking) the oldest: a peer that
// sends a byte and stalls holds a place only until newer ones come.
void Handshaker::make_room(std::vector<Pending>& pending) {
  if (pending.size() <= kMaxPendingHandshakes) return;
  size_t excess = pending.size() - kMaxPendingHandshakes;
  std::vector<Pending> kept;
  for (Pending& p : pending) {
    if (excess > 0 && !p.heard) {
      log_repeating(true, host_of(p.conn->peer()) + " evicted",
                    "TLS: closed a connection from " + p.conn->peer() + " that had sent nothing: " +
                        std::to_string(pending.size()) + " handshakes were under way");
      finish(p, false);
      --excess;
      continue;
    }
    kept.push_back(std::move(p));
  }
  size_t first = 0;
  for (; first < excess; ++first) {
    log_repeating(true, host_of(kept[first].conn->peer()) + " evicted",
                  "TLS: closed the oldest of " + std::to_string(kept.size()) + " handshakes under way, from " +
                      kept[first].conn->peer());
    finish(kept[first], false);
  }
  pending.assign(std::make_move_iterator(kept.begin() + ptrdiff_t(first)), std::make_move_iterator(kept.end()));
}

void Handshaker::run() {
  sigset_t pipe_signal;  // this thread's writes never raise SIGPIPE
  sigemptyset(&pipe_signal);
  sigaddset(&pipe_signal, SIGPIPE);
  pthread_sigmask(SIG_BLOCK, &pipe_signal, nullptr);
  std::vector<Pending> pending;
  std::vector<pollfd> fds;
  while (true) {
    {
      std::lock_guard lock(mutex_);
      if (stopping_) break;
      for (Pending& p : incoming_) pending.push_back(std::move(p));
      incoming_.clear();
    }
    make_room(pending);
    fds.assign(1, pollfd{wake_[0], POLLIN, 0});
    auto wait = std::chrono::milliseconds(1000);
    const auto now = Clock::now();
    for (const Pending& p : pending) {
      fds.push_back(pollfd{p.conn->fd(), p.events, 0});
      wait = std::min(wait, std::chrono::duration_cast<std::chrono::milliseconds>(p.deadline() - now) +
                                std::chrono::milliseconds(1));
    }
    if (poll(fds.data(), fds.size(), int(std::max<int64_t>(0, wait.count()))) < 0 && errno != EINTR) break;
    if (fds[0].revents != 0) {
      char buf[64];
      while (read(wake_[0], buf, sizeof buf) > 0) {
      }
    }
    const auto after = Clock::now();
    std::vector<Pending> still;
    for (size_t i = 0; i < pending.size(); ++i) {
      Pending& p = pending[i];
      const std::string& peer = p.conn->peer();
      if (fds[i + 1].revents == 0) {
        if (after < p.deadline()) {
          still.push_back(std::move(p));
        } else if (p.heard) {
          log_repeating(true, host_of(peer) + " timeout",
                        "TLS: closed a connection from " + peer + ": no TLS handshake within " +
                            std::to_string(kHandshakeTimeout.count()) + " s");
          finish(p, false);
        } else {
          log_repeating(true, host_of(peer) + " silent",
                        "TLS: closed a connection from " + peer + ": it sent nothing within " +
                            std::to_string(kFirstByteTimeout.count()) + " s");
          finish(p, false);
        }
        continue;
      }
      p.heard = true;
      std::string why;
      switch (p.conn->handshake(why)) {
        case TlsConnection::Step::done:
          log_repeating(false, host_of(peer) + " accepted " + p.conn->peer_certificate(),
                        "TLS: accepted " + peer + " (" + p.conn->peer_certificate() + ")");
          finish(p, true);
          break;
        case TlsConnection::Step::want_read:
          p.events = POLLIN;
          still.push_back(std::move(p));
          break;
        case TlsConnection::Step::want_write:
          p.events = POLLOUT;
          still.push_back(std::move(p));
          break;
        case TlsConnection::Step::failed:
          log_repeating(true, host_of(peer) + " refused " + why, "TLS: closed the connection from " + peer + ": " + why);
          finish(p, false);
          break;
      }
    }
    pending = std::move(still);
  }
  pending.clear();  // stopping: the connections close here
}

// A TCP connection to host:port within `timeout` (CAF's blocks until the
// kernel gives up, minutes for an address that drops packets); the socket
// is left non-blocking.
caf::expected<net::native_socket> connect_within(const std::string& host, uint16_t port,
                                                 std::chrono::milliseconds timeout) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (const int rc = getaddrinfo(host.c_str(), std::to_string(port).c_str(), &hints, &found); rc != 0)
    return caf::make_error(caf::sec::cannot_connect_to_node, "cannot resolve " + host + ": " + gai_strerror(rc));
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> addresses(found, freeaddrinfo);
  const auto deadline = Clock::now() + timeout;
  std::string why = "no address";
  for (addrinfo* a = found; a != nullptr; a = a->ai_next) {
    const int fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC | SOCK_NONBLOCK, a->ai_protocol);
    if (fd < 0) continue;
    int rc = ::connect(fd, a->ai_addr, a->ai_addrlen);
    if (rc != 0 && errno == EINPROGRESS) {
      pollfd p{fd, POLLOUT, 0};
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      rc = left.count() > 0 ? poll(&p, 1, int(left.count())) : 0;
      if (rc == 1) {
        int error = 0;
        socklen_t len = sizeof error;
        getsockopt(fd, SOL_SOCKET, SO_ERROR, &error, &len);
        rc = error == 0 ? 0 : -1;
        errno = error;
      } else {
        rc = -1;
        errno = ETIMEDOUT;
      }
    }
    if (rc == 0) {
      const int one = 1;
      setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
      return fd;
    }
    why = errno == ETIMEDOUT ? "no connection within " + std::to_string(timeout.count() / 1000) + " s" : strerror(errno);
    close(fd);
  }
  return caf::make_error(caf::sec::cannot_connect_to_node, "cannot connect to " + host + ":" + std::to_string(port) +
                                                               ": " + why);
}

// The middleman actor's interface over TLS: CAF's implementation
// (publish, connect, the cache of connected nodes) with TLS connections.
class TlsMiddleman final : public caf::io::middleman_actor_impl {
 public:
  TlsMiddleman(caf::actor_config& cfg, caf::actor broker, std::shared_ptr<TlsShared> shared,
               std::shared_ptr<Handshaker> handshaker)
      : caf::io::middleman_actor_impl(cfg, std::move(broker)),
        shared_(std::move(shared)),
        handshaker_(std::move(handshaker)) {}

  const char* name() const override { return "conveyor_tls_middleman"; }

  void on_exit() override {
    if (handshaker_) handshaker_->stop();
    caf::io::middleman_actor_impl::on_exit();
  }

 protected:
  // On this actor's own thread (it is detached), as CAF's: the TCP connect
  // and the handshake block it, up to kHandshakeTimeout each. Without TLS
  // (a plain connector) the TCP connection is the scribe.
  caf::expected<caf::io::scribe_ptr> connect(const std::string& host, uint16_t port) override {
    auto fd = connect_within(host, port, kHandshakeTimeout);
    if (!fd) return std::move(fd.error());
    if (!shared_) return mpx().new_scribe(*fd);
    const std::string peer = host + ":" + std::to_string(port);
    auto conn = std::make_unique<TlsConnection>(shared_, *fd, false, peer);
    if (!conn->valid()) return caf::make_error(caf::sec::cannot_connect_to_node, "TLS: cannot create a session");
    const auto deadline = Clock::now() + kHandshakeTimeout;
    for (std::string why;;) {
      const auto step = conn->handshake(why);
      if (step == TlsConnection::Step::done) break;
      if (step == TlsConnection::Step::failed) {
        log_repeating(true, host_of(peer) + " connect " + why, "TLS: cannot connect to " + peer + ": " + why);
        return caf::make_error(caf::sec::cannot_connect_to_node, "TLS: " + why);
      }
      const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
      if (left.count() <= 0) {
        why = "no TLS handshake within " + std::to_string(kHandshakeTimeout.count()) + " s";
        log_repeating(true, host_of(peer) + " connect timeout", "TLS: cannot connect to " + peer + ": " + why);
        return caf::make_error(caf::sec::cannot_connect_to_node, "TLS: " + why);
      }
      pollfd p{conn->fd(), short(step == TlsConnection::Step::want_read ? POLLIN : POLLOUT), 0};
      poll(&p, 1, int(left.count()));
    }
    // (Under TLS 1.3 the node checks this end's certificate after this:
    // a refusal shows as the connection failing at its first read.)
    log_repeating(false, host_of(peer) + " verified " + conn->peer_certificate(),
                  "TLS: verified " + peer + " (" + conn->peer_certificate() + ")");
    return caf::io::scribe_ptr(caf::make_counted<TlsScribe>(mpx(), std::move(conn)));
  }

  caf::expected<caf::io::doorman_ptr> open(uint16_t port, const char* addr, bool reuse) override {
    if (!handshaker_) return caf::make_error(caf::sec::feature_disabled, "a node connector does not publish");
    auto fd = net::new_tcp_acceptor_impl(port, addr, reuse);
    if (!fd) return std::move(fd.error());
    return caf::io::doorman_ptr(caf::make_counted<TlsDoorman>(mpx(), *fd, shared_, handshaker_));
  }

  // No UDP under TLS.
  caf::expected<caf::io::datagram_servant_ptr> contact(const std::string&, uint16_t) override {
    return caf::make_error(caf::sec::feature_disabled, "no UDP over TLS");
  }
  caf::expected<caf::io::datagram_servant_ptr> open_udp(uint16_t, const char*, bool) override {
    return caf::make_error(caf::sec::feature_disabled, "no UDP over TLS");
  }

 private:
  net::default_multiplexer& mpx() { return static_cast<net::default_multiplexer&>(system().middleman().backend()); }

  std::shared_ptr<TlsShared> shared_;
  std::shared_ptr<Handshaker> handshaker_;
};

// A system's middlemen of ours: under TLS the one that publishes (and
// connects where no connector is asked for), and a connector per peer (TLS
// or plain). They end with the BASP broker (the middleman's stop): the
// system waits for detached actors' threads before it goes.
struct SystemTls {
  std::shared_ptr<TlsShared> shared;  // null until tls_middleman()
  caf::io::middleman_actor main;
  std::map<std::string, caf::io::middleman_actor> connectors;  // by peer
  bool watching = false;              // the broker's functor is attached
};

std::recursive_mutex g_middlemen_mutex;  // recursive: a functor attached to a dead broker runs at once
std::map<caf::actor_system*, SystemTls> g_middlemen;

caf::actor basp_broker(caf::actor_system& sys) {
  return sys.middleman().named_broker<caf::io::basp_broker>(caf::atom("BASP"));
}

// Under g_middlemen_mutex: the system's entry, stopped with its broker.
SystemTls* system_entry(caf::actor_system& sys) {
  SystemTls& tls = g_middlemen[&sys];
  if (tls.watching) return &tls;
  tls.watching = true;
  caf::actor_system* key = &sys;
  caf::actor_cast<caf::abstract_actor*>(basp_broker(sys))->attach_functor([key] {
    std::lock_guard lock(g_middlemen_mutex);
    auto it = g_middlemen.find(key);
    if (it == g_middlemen.end()) return;
    if (it->second.main) caf::anon_send_exit(it->second.main, caf::exit_reason::kill);
    for (const auto& [peer, connector] : it->second.connectors) caf::anon_send_exit(connector, caf::exit_reason::kill);
    g_middlemen.erase(it);
  });
  // A broker already gone ran the functor at once, erasing the entry.
  auto it = g_middlemen.find(&sys);
  return it == g_middlemen.end() ? nullptr : &it->second;
}

}  // namespace

Status check_tls_files(const TlsFiles& files) {
  auto ctx = make_context(files);
  if (!ctx) return ctx.error();
  return Status::ok();
}

void set_tls_log(TlsLog log) {
  std::lock_guard lock(g_log_mutex);
  g_log = std::move(log);
}

caf::io::middleman_actor tls_middleman(caf::actor_system& sys) {
  std::lock_guard lock(g_middlemen_mutex);
  if (auto it = g_middlemen.find(&sys); it != g_middlemen.end() && it->second.main) return it->second.main;
  const auto& cfg = sys.config();
  auto ctx = make_context({cfg.openssl_certificate, cfg.openssl_key, cfg.openssl_cafile});
  if (!ctx) {
    log_line(true, "TLS: " + ctx.error().message);
    return {};
  }
  SystemTls* tls = system_entry(sys);
  if (tls == nullptr) return {};
  auto shared = std::make_shared<TlsShared>();
  shared->ctx = std::move(ctx).value();
  shared->guard_sigpipe = !sigpipe_ignored();
  auto& mm = sys.middleman();
  auto handshaker = std::make_shared<Handshaker>(static_cast<net::default_multiplexer&>(mm.backend()));
  tls->shared = shared;
  tls->main = sys.spawn<TlsMiddleman, caf::detached + caf::hidden>(basp_broker(sys), shared, handshaker);
  caf::actor_cast<caf::abstract_actor*>(basp_broker(sys))->attach_functor([handshaker] { handshaker->stop(); });
  return tls->main;
}

caf::io::middleman_actor node_connector(caf::actor_system& sys, const std::string& peer, bool tls) {
  std::lock_guard lock(g_middlemen_mutex);
  if (tls && !tls_middleman(sys)) return {};
  SystemTls* entry = system_entry(sys);
  if (entry == nullptr) return {};  // the middleman stopped already
  if (auto c = entry->connectors.find(peer); c != entry->connectors.end()) return c->second;
  auto handle = sys.spawn<TlsMiddleman, caf::detached + caf::hidden>(basp_broker(sys),
                                                                     tls ? entry->shared : nullptr, nullptr);
  entry->connectors.emplace(peer, handle);
  return handle;
}

void release_node_connector(caf::actor_system& sys, const std::string& peer) {
  std::lock_guard lock(g_middlemen_mutex);
  auto it = g_middlemen.find(&sys);
  if (it == g_middlemen.end()) return;
  auto c = it->second.connectors.find(peer);
  if (c == it->second.connectors.end()) return;
  caf::anon_send_exit(c->second, caf::exit_reason::kill);
  it->second.connectors.erase(c);
}

}  // namespace conveyor
