// TLS between `conveyor router` and an engine node (`conveyor serve
// --node-port`) with --tls-cert/--tls-key/--tls-ca, every one a process of
// the built binary on loopback, with certificates the `openssl` command
// makes at test time: a CA, a certificate from it for the node and one for
// the router, and a second CA with a "stranger" certificate. The
// certificates name hosts that are not the address used (CN=node.invalid,
// no subjectAltName): names are not checked, only the CA's signature
// (router/tls_transport.hpp says what is verified).
//
// A router with a certificate from the node's CA gets completions through
// the node. A router without TLS, one whose certificate comes from another
// CA, and one that trusts the node's CA but holds the stranger's
// certificate (so only the node's check of the client stops it) never see
// the node up: their requests fail with "no engine node is available"
// (503), /metrics shows the node down, and the node's log says why it
// closed each connection. Meanwhile the legitimate router stays connected
// without a break and keeps getting completions (with caf::openssl, each
// refused handshake closed the node's other TLS connections), and a peer
// that connects and says nothing neither spins a core of the node nor stays
// past its first-byte deadline; a hundred such keep no router out, and a
// node address that accepts and never answers keeps no other node down.
// Without the `openssl` command the tests skip.
#include <gtest/gtest.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <thread>

#include "tests/http/test_client.hpp"
#include "tests/http/test_util.hpp"
#include "tests/integration/process.hpp"

namespace conveyor::testing {
namespace {

namespace json = boost::json;
namespace ht = conveyor::http::testing;
using namespace std::chrono_literals;

const std::string kConveyor = CONVEYOR_BINARY;
const std::string kWorkDir = INTEGRATION_WORK_DIR;
const std::string kCerts = kWorkDir + "/tls_cluster_certs";

// Extensions for the CA (may sign) and the leaves (may not; TLS client and
// server use). A config file of our own: the system's openssl.cnf is not needed.
constexpr const char* kOpensslConfig = R"([req]
distinguished_name = dn
prompt = no
[dn]
CN = unused
[ca]
basicConstraints = critical, CA:TRUE
keyUsage = critical, keyCertSign, cRLSign
subjectKeyIdentifier = hash
[leaf]
basicConstraints = critical, CA:FALSE
keyUsage = critical, digitalSignature
extendedKeyUsage = serverAuth, clientAuth
subjectKeyIdentifier = hash
authorityKeyIdentifier = keyid
)";

std::string openssl_failure;  // why the certificates could not be made ("" when they were)

bool run_openssl(const std::vector<std::string>& args) {
  std::vector<std::string> argv{"openssl"};
  argv.insert(argv.end(), args.begin(), args.end());
  const ProcessResult r = run_process(argv, 60s, {}, kCerts);
  if (r.exit_code == 0) return true;
  std::string line;
  for (const auto& a : argv) line += a + " ";
  openssl_failure = line + "exited " + std::to_string(r.exit_code) + ":\n" + r.output;
  return false;
}

// NAME.pem and NAME.key in kCerts: a CA (self-signed) when `ca` is empty,
// else a leaf certificate signed by `ca`.
bool make_certificate(const std::string& name, const std::string& cn, const std::string& ca, int serial) {
  const std::vector<std::string> key{"-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
                                     "-keyout", name + ".key"};
  if (ca.empty()) {
    std::vector<std::string> args{"req", "-config", "openssl.cnf", "-x509", "-days", "2", "-subj", "/CN=" + cn,
                                  "-extensions", "ca", "-out", name + ".pem"};
    args.insert(args.end(), key.begin(), key.end());
    return run_openssl(args);
  }
  std::vector<std::string> request{"req", "-config", "openssl.cnf", "-new", "-subj", "/CN=" + cn, "-out", name + ".csr"};
  request.insert(request.end(), key.begin(), key.end());
  return run_openssl(request) &&
         run_openssl({"x509", "-req", "-in", name + ".csr", "-CA", ca + ".pem", "-CAkey", ca + ".key", "-set_serial",
                      std::to_string(serial), "-days", "2", "-extfile", "openssl.cnf", "-extensions", "leaf", "-out",
                      name + ".pem"});
}

bool make_certificates() {
  std::filesystem::remove_all(kCerts);
  std::filesystem::create_directories(kCerts);
  std::ofstream(kCerts + "/openssl.cnf") << kOpensslConfig;
  return make_certificate("ca", "conveyor test CA", "", 0) &&               //
         make_certificate("node", "node.invalid", "ca", 2) &&               //
         make_certificate("router", "router.invalid", "ca", 3) &&           //
         make_certificate("stranger_ca", "stranger CA", "", 0) &&           //
         make_certificate("stranger", "stranger.invalid", "stranger_ca", 4);
}

std::string cert(const std::string& name) { return kCerts + "/" + name + ".pem"; }
std::string key(const std::string& name) { return kCerts + "/" + name + ".key"; }

std::vector<std::string> tls_args(const std::string& who, const std::string& ca) {
  return {"--tls-cert", cert(who), "--tls-key", key(who), "--tls-ca", cert(ca)};
}

struct Node {
  uint16_t node_port = 0;
  std::unique_ptr<ServeProcess> process;
  std::string address() const { return "127.0.0.1:" + std::to_string(node_port); }
};

// The embedded tiny model on node and routers: no files needed.
Node start_node(const std::string& log, const std::vector<std::string>& tls) {
  Node n;
  n.node_port = free_loopback_port();
  std::vector<std::string> args{"--kv-cache-tokens", "4096", "--threads", "1", "--node-port",
                                std::to_string(n.node_port)};
  args.insert(args.end(), tls.begin(), tls.end());
  n.process = std::make_unique<ServeProcess>(kConveyor, args, kWorkDir + "/" + log + ".log");
  std::string error;
  if (!n.process->wait_ready(60s, error)) ADD_FAILURE() << error;
  return n;
}

std::unique_ptr<ServeProcess> start_router(const Node& node, const std::vector<std::string>& tls,
                                           const std::string& log) {
  std::vector<std::string> args{"--nodes", node.address()};
  args.insert(args.end(), tls.begin(), tls.end());
  auto r = std::make_unique<ServeProcess>(kConveyor, args, kWorkDir + "/" + log + ".log", std::vector<std::string>{},
                                          "router");
  std::string error;
  if (!r->wait_ready(60s, error)) ADD_FAILURE() << error;
  return r;
}

// Whether the router's /metrics shows the node in `state`
// (conveyor:router_node_up's label).
bool shown(const ServeProcess& router, const Node& node, const std::string& state) {
  return ht::metric(router.port(), "conveyor:router_node_up{node=\"" + node.address() + "\",address=\"" +
                                       node.address() + "\",state=\"" + state + "\"}") >= 0;
}

ht::Response complete(const ServeProcess& router) {
  const json::object body{{"prompt", ht::ids_json({1, 5, 9, 13})}, {"max_tokens", 8}, {"temperature", 0},
                          {"ignore_eos", true}};
  return ht::http_request(router.port(), "POST", "/v1/completions", ht::body_of(body));
}

void expect_completion(const ServeProcess& router, const std::string& when) {
  const ht::Response r = complete(router);
  ASSERT_EQ(r.status, 200) << when << ": " << r.body << "\n" << router.log_tail();
  EXPECT_EQ(ht::parse_object(r.body)["usage"].at("completion_tokens").as_int64(), 8) << when << ": " << r.body;
}

// User and system CPU seconds the process has used.
double cpu_seconds(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  std::istringstream rest(stat.substr(stat.rfind(')') + 2));
  std::string field;
  unsigned long long utime = 0, stime = 0;
  for (int i = 3; i <= 15 && rest >> field; ++i) {  // fields 14 and 15 of proc(5)
    if (i == 14) utime = std::stoull(field);
    if (i == 15) stime = std::stoull(field);
  }
  return double(utime + stime) / double(sysconf(_SC_CLK_TCK));
}

// A TCP connection that sends nothing; -1 if it could not connect.
int connect_silently(uint16_t port) {
  const int s = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = htons(port);
  if (connect(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
    close(s);
    return -1;
  }
  return s;
}

// Whether the peer closes `s` within `timeout` (recv returns 0).
bool closed_by_peer(int s, std::chrono::seconds timeout) {
  timeval tv{};
  tv.tv_sec = timeout.count();
  setsockopt(s, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof tv);
  char byte = 0;
  return recv(s, &byte, 1, 0) == 0;
}

bool contains(const std::string& text, const std::string& part) { return text.find(part) != std::string::npos; }

class TlsCluster : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    const ProcessResult r = run_process({"openssl", "version"}, 30s);
    openssl_available_ = r.exit_code == 0;
    if (openssl_available_) certificates_made_ = make_certificates();
  }

  void SetUp() override {
    if (!openssl_available_) GTEST_SKIP() << "the openssl command line tool is missing (it makes the test certificates)";
    ASSERT_TRUE(certificates_made_) << openssl_failure;
  }

  static inline bool openssl_available_ = false;
  static inline bool certificates_made_ = false;
};

TEST_F(TlsCluster, OnlyARouterWithACertificateFromTheNodesCaGetsIn) {
  Node node = start_node("tls_node", tls_args("node", "ca"));
  ASSERT_NE(node.process, nullptr);
  auto router = start_router(node, tls_args("router", "ca"), "tls_router");
  ASSERT_TRUE(ht::eventually([&] { return shown(*router, node, "up"); }, 20s)) << router->log_tail();
  expect_completion(*router, "before any intruder");

  auto plain = start_router(node, {}, "tls_plain_router");
  auto stranger = start_router(node, tls_args("stranger", "stranger_ca"), "tls_stranger_router");
  // Trusts the node's CA, so it accepts the node: only the node's check of
  // the client's certificate keeps it out.
  auto impostor = start_router(node, tls_args("stranger", "ca"), "tls_impostor_router");
  const std::vector<ServeProcess*> intruders{plain.get(), stranger.get(), impostor.get()};

  // Five seconds of reconnection attempts (a down node is retried each
  // second): no intruder ever sees the node up, the legitimate router
  // never sees it otherwise.
  bool intruder_saw_up = false, router_saw_other = false;
  const auto until = std::chrono::steady_clock::now() + 5s;
  while (std::chrono::steady_clock::now() < until) {
    for (ServeProcess* r : intruders) intruder_saw_up |= shown(*r, node, "up");
    router_saw_other |= !shown(*router, node, "up");
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_FALSE(intruder_saw_up);
  EXPECT_FALSE(router_saw_other) << router->log_tail();

  for (ServeProcess* r : intruders) {
    EXPECT_TRUE(ht::eventually([&] { return shown(*r, node, "down"); }, 5s)) << r->log_tail();
    const ht::Response refused = complete(*r);
    EXPECT_EQ(refused.status, 503) << refused.body;
    EXPECT_TRUE(contains(refused.body, "no engine node is available to take the request")) << refused.body;
  }
  expect_completion(*router, "while the intruders retry");
  expect_completion(*router, "while the intruders retry (again)");
  for (ServeProcess* r : intruders) EXPECT_EQ(r->stop(), 0);
  expect_completion(*router, "after the intruders");

  // A peer that connects and never starts a handshake: the node waits on it
  // without spinning (caf::openssl's event loop spun a core on it, and its
  // handshake calls then hid the error-queue bug above) and closes it at
  // its first-byte deadline (3 s).
  const int silent = connect_silently(node.node_port);
  ASSERT_GE(silent, 0);
  const double cpu_before = cpu_seconds(node.process->pid());
  std::this_thread::sleep_for(3s);
  EXPECT_LT(cpu_seconds(node.process->pid()) - cpu_before, 1.0) << "the node spins on a connection that says nothing";
  expect_completion(*router, "while a silent peer is connected");
  EXPECT_TRUE(closed_by_peer(silent, 5s)) << "the node kept a connection that never started a handshake";
  close(silent);
  expect_completion(*router, "at the end");
  EXPECT_TRUE(shown(*router, node, "up"));
  EXPECT_EQ(router->stop(), 0);
  EXPECT_EQ(node.process->stop(), 0);

  // Why each was refused, in the node's log and the intruders' own.
  const std::string node_log = node.process->log();
  EXPECT_TRUE(contains(node_log, "TLS: accepted 127.0.0.1:")) << node_log;
  EXPECT_TRUE(contains(node_log, "CN=router.invalid, issuer /CN=conveyor test CA")) << node_log;
  EXPECT_TRUE(contains(node_log, "the peer does not speak TLS")) << node_log;                 // plain
  EXPECT_TRUE(contains(node_log, "alert unknown ca")) << node_log;                            // stranger refused the node
  EXPECT_TRUE(contains(node_log, "refused the peer's certificate: unable to get local issuer certificate"))
      << node_log;                                                                            // impostor
  EXPECT_TRUE(contains(node_log, "it sent nothing within 3 s")) << node_log;                 // silent
  EXPECT_FALSE(contains(node_log, "CN=stranger.invalid")) << node_log;                        // never accepted
  EXPECT_TRUE(contains(stranger->log(), "TLS: cannot connect to " + node.address() + ": refused the peer's certificate"))
      << stranger->log();
  EXPECT_TRUE(contains(impostor->log(), "the peer refused the handshake")) << impostor->log();
  EXPECT_TRUE(contains(plain->log(), "if the node runs with --tls-*, so must the router")) << plain->log();
}

// A listening socket nobody answers on (a hung machine's port: the kernel
// completes the TCP handshake, nothing more); -1 if none could be made.
int silent_listener(uint16_t& port) {
  const int s = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (bind(s, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 || listen(s, 16) != 0 ||
      getsockname(s, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    close(s);
    return -1;
  }
  port = ntohs(addr.sin_port);
  return s;
}

// A node that accepts and never answers holds up no other: the router's TLS
// handshake with it blocks for 10 s, on a connector of that node's own (it
// was one for every node, so the healthy node's connect waited behind the
// hung one's and timed out, again and again).
TEST_F(TlsCluster, AHungNodeKeepsNoOtherDown) {
  uint16_t hung_port = 0;
  const int hung = silent_listener(hung_port);
  ASSERT_GE(hung, 0);
  Node node = start_node("tls_node_beside_hung", tls_args("node", "ca"));
  ASSERT_NE(node.process, nullptr);
  std::vector<std::string> args{"--nodes", "127.0.0.1:" + std::to_string(hung_port) + "," + node.address()};
  for (const std::string& a : tls_args("router", "ca")) args.push_back(a);
  ServeProcess router(kConveyor, args, kWorkDir + "/tls_router_hung.log", std::vector<std::string>{}, "router");
  std::string error;
  ASSERT_TRUE(router.wait_ready(60s, error)) << error;
  EXPECT_TRUE(ht::eventually([&] { return shown(router, node, "up"); }, 8s)) << router.log_tail();
  expect_completion(router, "beside a hung node");
  EXPECT_EQ(router.stop(), 0);
  EXPECT_EQ(node.process->stop(), 0);
  close(hung);
}

// Connections that say nothing cannot keep a router out: a stranger
// holding a hundred silent connections to the node (more than the 64
// handshakes it runs at once, reopening each the node closes) loses the
// oldest of them to each newcomer, and a router's, which talks, gets in.
TEST_F(TlsCluster, SilentConnectionsKeepNoRouterOut) {
  Node node = start_node("tls_node_flooded", tls_args("node", "ca"));
  ASSERT_NE(node.process, nullptr);
  std::atomic<bool> flooding{true};
  std::thread flood([&] {
    std::vector<int> open;
    while (flooding) {
      for (auto it = open.begin(); it != open.end();) {  // reopen what the node closed
        char byte = 0;
        if (recv(*it, &byte, 1, MSG_DONTWAIT) == 0) {
          close(*it);
          it = open.erase(it);
        } else {
          ++it;
        }
      }
      while (open.size() < 100) {
        const int s = connect_silently(node.node_port);
        if (s < 0) break;
        open.push_back(s);
      }
      std::this_thread::sleep_for(20ms);
    }
    for (int s : open) close(s);
  });
  std::this_thread::sleep_for(500ms);
  auto router = start_router(node, tls_args("router", "ca"), "tls_router_flooded");
  EXPECT_TRUE(ht::eventually([&] { return shown(*router, node, "up"); }, 10s)) << router->log_tail();
  expect_completion(*router, "while a stranger floods the node");
  flooding = false;
  flood.join();
  EXPECT_EQ(router->stop(), 0);
  EXPECT_EQ(node.process->stop(), 0);
  EXPECT_TRUE(contains(node.process->log(), "that had sent nothing")) << node.process->log_tail();
}

TEST_F(TlsCluster, ATlsRouterRefusesANodeWithoutTls) {
  Node node = start_node("tls_plain_node", {});
  ASSERT_NE(node.process, nullptr);
  auto router = start_router(node, tls_args("router", "ca"), "tls_router_plain_node");
  EXPECT_TRUE(ht::eventually([&] { return shown(*router, node, "down"); }, 10s)) << router->log_tail();
  const ht::Response refused = complete(*router);
  EXPECT_EQ(refused.status, 503) << refused.body;
  EXPECT_EQ(router->stop(), 0);
  EXPECT_TRUE(contains(router->log(), "the peer does not speak TLS")) << router->log();
  EXPECT_EQ(node.process->stop(), 0);
}

TEST_F(TlsCluster, FilesThatDoNotFitAreRefusedAtStartUp) {
  struct Case {
    std::vector<std::string> args;
    std::string says;
  };
  const std::vector<Case> cases{
      {{"--tls-cert", cert("router"), "--tls-key", key("stranger"), "--tls-ca", cert("ca")},
       "does not belong to the certificate"},
      {{"--tls-cert", cert("router"), "--tls-key", key("router"), "--tls-ca", key("ca")},
       "cannot load the CA certificate"},
      {{"--tls-cert", key("router"), "--tls-key", key("router"), "--tls-ca", cert("ca")}, "cannot load the certificate"},
      {{"--tls-cert", cert("router")}, "go together"},
  };
  for (const Case& c : cases) {
    std::vector<std::string> router{kConveyor, "router", "--nodes", "127.0.0.1:1", "--port", "0"};
    router.insert(router.end(), c.args.begin(), c.args.end());
    const ProcessResult r = run_process(router, 60s);
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_TRUE(contains(r.output, c.says)) << r.output;
    std::vector<std::string> node{kConveyor, "serve", "--port", "0", "--node-port", "0"};
    node.insert(node.end(), c.args.begin(), c.args.end());
    const ProcessResult n = run_process(node, 60s);
    EXPECT_EQ(n.exit_code, 2) << n.output;
    EXPECT_TRUE(contains(n.output, c.says)) << n.output;
  }
}

}  // namespace
}  // namespace conveyor::testing
