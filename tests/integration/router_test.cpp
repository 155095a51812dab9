// `conveyor router` over engine nodes (`conveyor serve --node-port`), every
// one a separate process on loopback, with real clients: streams through the
// router equal a node's own (greedy ids, SSE and WebSocket); each placement
// policy spreads requests as it says, and a policy named in --nodes-file
// replaces the old one on SIGHUP; kill -9 of a node under load loses no
// request (every stream complete, its seeded ids equal to an undisturbed
// run's) and the router keeps serving, nor does a node that hangs (SIGSTOP); a node restarted on its port rejoins,
// a node added to --nodes-file while the router runs receives work, and a full
// queue on the only node answers 429 as `serve` does.
#include <gtest/gtest.h>

#include <signal.h>

#include <atomic>
#include <fstream>
#include <memory>
#include <mutex>
#include <regex>
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
const std::string kModel = CONVEYOR_SHARED_MODELS "/stories260K.bin";

struct Node {
  std::string name;
  uint16_t node_port = 0;
  std::unique_ptr<ServeProcess> process;  // with an HTTP port too, for direct requests and readiness
  std::string address() const { return "127.0.0.1:" + std::to_string(node_port); }
};

Node start_node(const std::string& name, uint16_t node_port = 0, const std::string& model = kModel) {
  Node n;
  n.name = name;
  n.node_port = node_port != 0 ? node_port : free_loopback_port();
  n.process = std::make_unique<ServeProcess>(
      kConveyor,
      std::vector<std::string>{"--model", model, "--kv-cache-tokens", "8192", "--threads", "1", "--node-port",
                               std::to_string(n.node_port), "--node-name", name},
      kWorkDir + "/router_" + name + ".log");
  std::string error;
  if (!n.process->wait_ready(std::chrono::seconds(60), error)) ADD_FAILURE() << error;
  return n;
}

std::unique_ptr<ServeProcess> start_router(const std::vector<std::string>& args, const std::string& log,
                                           const std::string& model = kModel) {
  std::vector<std::string> all{"--model", model};
  all.insert(all.end(), args.begin(), args.end());
  auto r = std::make_unique<ServeProcess>(kConveyor, all, kWorkDir + "/" + log + ".log", std::vector<std::string>{},
                                          "router");
  std::string error;
  if (!r->wait_ready(std::chrono::seconds(60), error)) ADD_FAILURE() << error;
  return r;
}

std::string nodes_arg(const std::vector<Node>& nodes) {
  std::string out;
  for (const Node& n : nodes) out += (out.empty() ? "" : ",") + n.address();
  return out;
}

// The router's conveyor:router_node_up for `n` in `state` (-1: not in that state).
double node_up(uint16_t router_port, const Node& n, const std::string& state = "up") {
  return ht::metric(router_port, "conveyor:router_node_up{node=\"" + n.name + "\",address=\"" + n.address() +
                                     "\",state=\"" + state + "\"}");
}

double routed(uint16_t router_port, const Node& n) {
  return ht::metric(router_port, "conveyor:router_node_requests_routed_total{node=\"" + n.name + "\",address=\"" +
                                     n.address() + "\"}");
}

bool all_up(uint16_t router_port, const std::vector<Node>& nodes) {
  return ht::eventually(
      [&] {
        for (const Node& n : nodes)
          if (node_up(router_port, n) != 1) return false;
        return true;
      },
      std::chrono::seconds(20));
}

std::vector<int32_t> prompt_of(int i, int length = 8) {
  std::vector<int32_t> p{1};
  for (int t = 1; t < length; ++t) p.push_back(3 + (t * 37 + i * 101) % 500);
  return p;
}

json::object completion(const std::vector<int32_t>& prompt, int max_tokens, bool stream, int seed = -1) {
  json::object o{{"prompt", ht::ids_json(prompt)}, {"max_tokens", max_tokens}, {"ignore_eos", true},
                 {"stream", stream}, {"return_token_ids", true}};
  if (seed >= 0) {
    o["temperature"] = 0.9;
    o["seed"] = seed;
  } else {
    o["temperature"] = 0;
  }
  return o;
}

struct Stream {
  std::vector<int32_t> ids;         // of choice 0
  std::vector<int32_t> second_ids;  // of choice 1 (n = 2)
  std::string finish, second_finish;
  int status = 0;
};

Stream stream_of(uint16_t port, const json::object& body, const std::function<void()>& on_token = {}) {
  Stream s;
  const auto r = ht::sse_request(port, "/v1/completions", ht::body_of(body), [&](const std::string& payload) {
    if (payload == "[DONE]") return true;
    auto v = json::parse(payload).as_object();
    if (v.contains("error")) {
      s.finish = "error: " + json::serialize(v["error"]);
      return true;
    }
    for (const auto& c : v.at("choices").as_array()) {
      const bool second = c.at("index").as_int64() == 1;
      if (const auto* ids = c.as_object().if_contains("token_ids"))
        for (int32_t id : ht::ids_of(*ids)) (second ? s.second_ids : s.ids).push_back(id);
      if (!c.at("finish_reason").is_null())
        (second ? s.second_finish : s.finish) = std::string(c.at("finish_reason").as_string());
    }
    if (on_token) on_token();
    return true;
  });
  s.status = r.status;
  if (r.status != 200 && s.finish.empty()) s.finish = "status " + std::to_string(r.status) + ": " + r.body;
  return s;
}

std::vector<int32_t> ids_of_response(const ht::Response& r) {
  auto v = ht::parse_object(r.body);
  if (!v.contains("choices")) {
    ADD_FAILURE() << r.body;
    return {};
  }
  return ht::ids_of(v["choices"].as_array()[0].at("token_ids"));
}

class Router : public ::testing::Test {
 protected:
  void SetUp() override {
    if (!std::ifstream(kModel)) GTEST_SKIP() << kModel << " is missing";
  }
};

TEST_F(Router, StreamsEqualANodesOwnOverSseAndWebSocket) {
  std::vector<Node> nodes;
  for (const char* name : {"a1", "a2", "a3"}) nodes.push_back(start_node(name));
  auto router = start_router({"--nodes", nodes_arg(nodes), "--policy", "round_robin"}, "router_equal");
  ASSERT_TRUE(all_up(router->port(), nodes)) << router->log_tail();

  for (int i = 0; i < 6; ++i) {
    const auto body = completion(prompt_of(i), 40, false);
    const auto direct = ht::http_request(nodes[0].process->port(), "POST", "/v1/completions", ht::body_of(body));
    ASSERT_EQ(direct.status, 200) << direct.body;
    const std::vector<int32_t> expected = ids_of_response(direct);
    ASSERT_EQ(expected.size(), 40u);
    const Stream s = stream_of(router->port(), completion(prompt_of(i), 40, true));
    EXPECT_EQ(s.finish, "length");
    EXPECT_EQ(s.ids, expected) << "request " << i << " through the router";

    ht::WsClient ws(router->port());
    ASSERT_TRUE(ws.connected());
    json::object w = completion(prompt_of(i), 40, false);
    w.erase("stream");
    w["id"] = i;
    ws.send(ht::body_of(w));
    std::vector<int32_t> got;
    std::string finish;
    while (auto m = ws.read()) {
      auto e = ht::parse_object(*m);
      if (e["type"] == "delta" && e.contains("token_ids"))
        for (int32_t id : ht::ids_of(e["token_ids"])) got.push_back(id);
      if (e["type"] == "final") {
        finish = std::string(e["finish_reason"].as_string());
        break;
      }
      if (e["type"] == "error") {
        ADD_FAILURE() << *m;
        break;
      }
    }
    EXPECT_EQ(finish, "length");
    EXPECT_EQ(got, expected) << "request " << i << " over the router's WebSocket";
  }
  // Round robin: 12 requests, 4 on each node.
  for (const Node& n : nodes) EXPECT_EQ(routed(router->port(), n), 4) << n.name;
}

TEST_F(Router, PoliciesSpreadAsTheySayAndSwapOnSighup) {
  std::vector<Node> nodes;
  for (const char* name : {"b1", "b2", "b3"}) nodes.push_back(start_node(name));
  const std::string file = kWorkDir + "/router_policies.nodes";
  {
    std::ofstream out(file);
    out << "# three nodes\n";
    for (const Node& n : nodes) out << n.address() << "\n";
    out << "policy = least_loaded\n";
  }
  auto router = start_router({"--nodes-file", file, "--policy", "round_robin"}, "router_policies");
  const uint16_t port = router->port();
  ASSERT_TRUE(all_up(port, nodes)) << router->log_tail();
  EXPECT_EQ(ht::metric(port, "conveyor:router_policy_info{policy=\"least_loaded\"}"), 1) << "the file's policy wins";

  // least_loaded: six long streams at once go two to each node.
  std::vector<std::thread> threads;
  std::vector<Stream> streams(6);
  for (int i = 0; i < 6; ++i)
    threads.emplace_back([&, i] { streams[size_t(i)] = stream_of(port, completion(prompt_of(i), 400, true)); });
  for (auto& t : threads) t.join();
  threads.clear();
  for (const Stream& s : streams) EXPECT_EQ(s.finish, "length");
  for (const Node& n : nodes) EXPECT_EQ(routed(port, n), 2) << n.name;

  // prefix_affinity after SIGHUP: four prefixes of four blocks each, three
  // requests per prefix, interleaved: each prefix stays on one node, which
  // finds its blocks cached from the second request on.
  {
    std::ofstream out(file);
    for (const Node& n : nodes) out << n.address() << "\n";
    out << "policy = prefix_affinity\n";
  }
  router->signal(SIGHUP);
  ASSERT_TRUE(ht::eventually([&] { return ht::metric(port, "conveyor:router_policy_info{policy=\"prefix_affinity\"}") == 1; }));
  std::vector<double> before;
  for (const Node& n : nodes) before.push_back(routed(port, n));
  for (int round = 0; round < 3; ++round) {
    for (int prefix = 0; prefix < 4; ++prefix) {
      std::vector<int32_t> p = prompt_of(100 + prefix, 64);
      p.push_back(3 + round);  // a different question after the shared prefix
      const auto r = ht::http_request(port, "POST", "/v1/completions", ht::body_of(completion(p, 4, false)));
      ASSERT_EQ(r.status, 200) << r.body;
      if (round > 0) {
        auto usage = ht::parse_object(r.body)["usage"].as_object();
        EXPECT_EQ(usage["prompt_tokens_details"].as_object()["cached_tokens"].as_int64(), 64)
            << "prefix " << prefix << " round " << round << ": its node should hold the prefix";
      }
    }
  }
  EXPECT_EQ(ht::metric(port, "conveyor:router_prefix_expected_hit_blocks_total"), 2 * 4 * 4);
  EXPECT_EQ(ht::metric(port, "conveyor:router_requests_routed_total{policy=\"prefix_affinity\"}"), 12);

  // A file the start would refuse changes nothing: a bad policy (its node
  // list, one node here, is not applied either), or no nodes at all (an
  // editor's half-written file).
  {
    std::ofstream out(file);
    out << nodes[0].address() << "\n";
    out << "policy = fastest\n";
  }
  router->signal(SIGHUP);
  EXPECT_TRUE(ht::eventually([&] { return router->log().find("stay as they were") != std::string::npos; }));
  EXPECT_EQ(ht::metric(port, "conveyor:router_policy_info{policy=\"prefix_affinity\"}"), 1);
  { std::ofstream(file) << "# nothing yet\n"; }
  router->signal(SIGHUP);
  EXPECT_TRUE(ht::eventually([&] { return router->log().find("no nodes") != std::string::npos; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_TRUE(all_up(port, nodes)) << router->log_tail();
}

TEST_F(Router, KillNineOfANodeUnderLoadLosesNoRequest) {
  std::vector<Node> nodes;
  for (const char* name : {"c1", "c2", "c3"}) nodes.push_back(start_node(name));
  auto router = start_router({"--nodes", nodes_arg(nodes), "--policy", "least_loaded"}, "router_kill");
  const uint16_t port = router->port();
  ASSERT_TRUE(all_up(port, nodes)) << router->log_tail();

  // 24 streams; the last 4 ask for n = 2 samples.
  constexpr int kStreams = 24;
  constexpr int kTokens = 300;
  auto body_of_stream = [&](int i, bool stream) {
    json::object b = completion(prompt_of(i, 12), kTokens, stream, /*seed=*/1000 + i);
    if (i >= kStreams - 4) b["n"] = 2;
    return b;
  };
  std::vector<Stream> streams(kStreams);
  std::atomic<int> tokens_seen{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kStreams; ++i)
    threads.emplace_back([&, i] { streams[size_t(i)] = stream_of(port, body_of_stream(i, true), [&] { ++tokens_seen; }); });
  // Mid-stream: every stream has begun, none can have ended.
  ASSERT_TRUE(ht::eventually([&] { return tokens_seen.load() >= kStreams * 20; }, std::chrono::seconds(60)));
  ::kill(nodes[0].process->pid(), SIGKILL);
  for (auto& t : threads) t.join();

  // Every stream complete: as many tokens as asked, the seeded ids of an
  // undisturbed run (each request again, alone, on a surviving node).
  for (int i = 0; i < kStreams; ++i) {
    const Stream& s = streams[size_t(i)];
    EXPECT_EQ(s.finish, "length") << "stream " << i;
    ASSERT_EQ(s.ids.size(), size_t(kTokens)) << "stream " << i;
    const auto direct = ht::http_request(nodes[1].process->port(), "POST", "/v1/completions",
                                         ht::body_of(body_of_stream(i, false)));
    ASSERT_EQ(direct.status, 200) << direct.body;
    EXPECT_EQ(s.ids, ids_of_response(direct)) << "stream " << i << ": a gap, a duplicate or another sample";
    if (i >= kStreams - 4) {
      EXPECT_EQ(s.second_finish, "length") << "stream " << i;
      EXPECT_EQ(s.second_ids, ht::ids_of(ht::parse_object(direct.body)["choices"].as_array()[1].at("token_ids")))
          << "stream " << i << ", second sample";
    }
  }
  EXPECT_GT(ht::metric(port, "conveyor:router_failovers_total"), 0);
  EXPECT_EQ(ht::metric(port, "conveyor:router_unplaced_requests_total"), 0);
  EXPECT_TRUE(ht::eventually([&] { return node_up(port, nodes[0], "down") == 0; })) << router->log_tail();

  // The router goes on serving; the node restarted on its port rejoins and gets work.
  const Stream after = stream_of(port, completion(prompt_of(99), 10, true));
  EXPECT_EQ(after.finish, "length");
  nodes[0].process->wait_exit(std::chrono::milliseconds(5000));
  nodes[0] = start_node("c1", nodes[0].node_port);
  ASSERT_TRUE(ht::eventually([&] { return node_up(port, nodes[0]) == 1; }, std::chrono::seconds(20)))
      << router->log_tail();
  const double before = routed(port, nodes[0]);
  for (int i = 0; i < 6; ++i) EXPECT_EQ(stream_of(port, completion(prompt_of(i), 5, true)).finish, "length");
  EXPECT_GT(routed(port, nodes[0]), before);
}

// A node that stops answering without dropping its connection (SIGSTOP)
// is taken for dead after --node-timeout: its streams move on and complete
// with the ids of an undisturbed run; woken up, it rejoins.
TEST_F(Router, AHungNodeIsTakenForDeadAndItsStreamsMoveOn) {
  std::vector<Node> nodes;
  for (const char* name : {"h1", "h2"}) nodes.push_back(start_node(name));
  auto router = start_router({"--nodes", nodes_arg(nodes), "--policy", "round_robin", "--node-timeout", "2"},
                             "router_hung");
  const uint16_t port = router->port();
  ASSERT_TRUE(all_up(port, nodes)) << router->log_tail();

  constexpr int kStreams = 6;
  constexpr int kTokens = 300;
  std::vector<Stream> streams(kStreams);
  std::atomic<int> tokens_seen{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kStreams; ++i)
    threads.emplace_back([&, i] {
      streams[size_t(i)] = stream_of(port, completion(prompt_of(i, 12), kTokens, true, 2000 + i), [&] { ++tokens_seen; });
    });
  ASSERT_TRUE(ht::eventually([&] { return tokens_seen.load() >= kStreams * 20; }, std::chrono::seconds(60)));
  ::kill(nodes[0].process->pid(), SIGSTOP);
  for (auto& t : threads) t.join();
  ::kill(nodes[0].process->pid(), SIGCONT);

  for (int i = 0; i < kStreams; ++i) {
    const Stream& s = streams[size_t(i)];
    EXPECT_EQ(s.finish, "length") << "stream " << i;
    const auto direct = ht::http_request(nodes[1].process->port(), "POST", "/v1/completions",
                                         ht::body_of(completion(prompt_of(i, 12), kTokens, false, 2000 + i)));
    ASSERT_EQ(direct.status, 200) << direct.body;
    EXPECT_EQ(s.ids, ids_of_response(direct)) << "stream " << i;
  }
  EXPECT_GT(ht::metric(port, "conveyor:router_failovers_total"), 0);
  EXPECT_NE(router->log().find("node h1 (" + nodes[0].address() + ") is down: no answer for"), std::string::npos)
      << router->log_tail();
  // Awake again, it rejoins and gets work.
  ASSERT_TRUE(ht::eventually([&] { return node_up(port, nodes[0]) == 1; }, std::chrono::seconds(20)))
      << router->log_tail();
  const double before = routed(port, nodes[0]);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(stream_of(port, completion(prompt_of(i), 5, true)).finish, "length");
  EXPECT_GT(routed(port, nodes[0]), before);
}

TEST_F(Router, ADrainingNodeFinishesItsRequestsAndGetsNoNewOnes) {
  // The router sees a node draining at its next poll (every 0.25 s), so the
  // node's streams must outlast that: stories260K decodes 400 tokens in
  // about 0.2 s on an idle machine, llama2.c's 15M shape 200 in over 1 s.
  const std::string model = "dummy:llama-15m";
  const int kTokens = 200;
  std::vector<Node> nodes;
  for (const char* name : {"f1", "f2"}) nodes.push_back(start_node(name, 0, model));
  auto router = start_router({"--nodes", nodes_arg(nodes), "--policy", "round_robin"}, "router_drain", model);
  const uint16_t port = router->port();
  ASSERT_TRUE(all_up(port, nodes)) << router->log_tail();

  std::vector<Stream> streams(4);
  std::atomic<int> events{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i)
    threads.emplace_back([&, i] {
      streams[size_t(i)] = stream_of(port, completion(prompt_of(i), kTokens, true), [&] { ++events; });
    });
  ASSERT_TRUE(ht::eventually([&] { return events.load() >= 40; }, std::chrono::seconds(30)));
  nodes[0].process->signal(SIGTERM);
  ASSERT_TRUE(ht::eventually([&] { return node_up(port, nodes[0], "draining") == 0; })) << router->log_tail();
  const double before = routed(port, nodes[0]);
  for (int i = 0; i < 4; ++i) EXPECT_EQ(stream_of(port, completion(prompt_of(10 + i), 5, true)).finish, "length");
  EXPECT_EQ(routed(port, nodes[0]), before) << "a draining node got new work";
  for (auto& t : threads) t.join();
  for (const Stream& s : streams) {
    EXPECT_EQ(s.finish, "length");
    EXPECT_EQ(s.ids.size(), size_t(kTokens));
  }
  EXPECT_EQ(ht::metric(port, "conveyor:router_failovers_total"), 0) << "the draining node finished its own";
  EXPECT_EQ(nodes[0].process->wait_exit(std::chrono::milliseconds(20000)), 0) << nodes[0].process->log_tail();
}

TEST_F(Router, ANodeAddedToTheNodesFileReceivesWork) {
  std::vector<Node> nodes;
  nodes.push_back(start_node("d1"));
  const std::string file = kWorkDir + "/router_added.nodes";
  { std::ofstream(file) << nodes[0].address() << "\n"; }
  auto router = start_router({"--nodes-file", file, "--policy", "round_robin"}, "router_added");
  const uint16_t port = router->port();
  ASSERT_TRUE(all_up(port, nodes)) << router->log_tail();

  nodes.push_back(start_node("d2"));
  { std::ofstream(file, std::ios::app) << nodes[1].address() << "\n"; }
  router->signal(SIGHUP);
  ASSERT_TRUE(all_up(port, nodes)) << router->log_tail();
  for (int i = 0; i < 4; ++i) EXPECT_EQ(stream_of(port, completion(prompt_of(i), 5, true)).finish, "length");
  EXPECT_EQ(routed(port, nodes[1]), 2);

  // A valid file that names no node up now (a typo in the port) is applied,
  // with a warning.
  { std::ofstream(file) << "127.0.0.1:" << free_loopback_port() << "\n"; }
  router->signal(SIGHUP);
  EXPECT_TRUE(ht::eventually([&] { return router->log().find("no node that is up now") != std::string::npos; }))
      << router->log_tail();
}

// A router's /health says whether it can serve: 503 "unavailable" while no
// node is up (a load balancer then sends it nothing), 200 once one is.
TEST_F(Router, HealthIsUnavailableUntilANodeIsUp) {
  const uint16_t node_port = free_loopback_port();
  auto router = start_router({"--nodes", "127.0.0.1:" + std::to_string(node_port)}, "router_health");
  const uint16_t port = router->port();
  const ht::Response down = ht::http_request(port, "GET", "/health");
  EXPECT_EQ(down.status, 503) << down.body;
  EXPECT_EQ(ht::parse_object(down.body)["status"], "unavailable") << down.body;
  std::vector<Node> nodes;
  nodes.push_back(start_node("h1", node_port));
  ASSERT_TRUE(all_up(port, nodes)) << router->log_tail();
  EXPECT_EQ(ht::http_request(port, "GET", "/health").status, 200);
}

// --api-key-file guards the router as it guards `serve`, and SIGHUP reads
// it again; a bad file fails the start.
TEST_F(Router, ApiKeyFileGuardsTheRouterAndReloadsOnSighup) {
  const std::string keys = kWorkDir + "/router_keys.toml";
  std::ofstream(keys) << "[[key]]\nkey = \"sk-first\"\nname = \"first\"\n";
  std::vector<Node> nodes;
  nodes.push_back(start_node("k1"));
  auto router = start_router({"--nodes", nodes_arg(nodes), "--api-key-file", keys}, "router_keys");
  const uint16_t port = router->port();
  ASSERT_TRUE(all_up(port, nodes)) << router->log_tail();
  const std::string body = ht::body_of(completion(prompt_of(1), 4, false));
  auto post = [&](const std::string& key) {
    return ht::http_request(port, "POST", "/v1/completions", body,
                            key.empty() ? ht::Headers{} : ht::Headers{{"Authorization", "Bearer " + key}});
  };
  EXPECT_EQ(post("").status, 401);
  EXPECT_EQ(post("sk-first").status, 200);
  EXPECT_EQ(ht::http_request(port, "GET", "/health").status, 200);  // no key needed

  std::ofstream(keys) << "[[key]]\nkey = \"sk-second\"\n";
  router->signal(SIGHUP);
  EXPECT_TRUE(ht::eventually([&] { return post("sk-second").status == 200; })) << router->log_tail();
  EXPECT_EQ(post("sk-first").status, 401);

  std::ofstream(keys) << "[[key]]\nname = \"no key\"\n";
  const auto bad = run_process({kConveyor, "router", "--model", kModel, "--nodes", nodes_arg(nodes),
                                "--api-key-file", keys},
                               std::chrono::seconds(30));
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("--api-key-file"), std::string::npos) << bad.output;
}

TEST_F(Router, RefusesBadNodeListsAndNodesOfAnotherModel) {
  const auto bad = run_process({kConveyor, "router", "--model", kModel, "--nodes", "localhost"}, std::chrono::seconds(30));
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
  EXPECT_NE(bad.output.find("not host:port"), std::string::npos) << bad.output;
  const auto none = run_process({kConveyor, "router", "--model", kModel}, std::chrono::seconds(30));
  EXPECT_EQ(none.exit_code, 2) << none.output;

  // A node serving the embedded tiny model, behind a router for stories260K.
  Node other;
  other.name = "e1";
  other.node_port = free_loopback_port();
  other.process = std::make_unique<ServeProcess>(
      kConveyor, std::vector<std::string>{"--kv-cache-tokens", "4096", "--node-port", std::to_string(other.node_port),
                                          "--node-name", "e1"},
      kWorkDir + "/router_other.log");
  std::string error;
  ASSERT_TRUE(other.process->wait_ready(std::chrono::seconds(60), error)) << error;
  auto router = start_router({"--nodes", other.address()}, "router_other");
  const uint16_t port = router->port();
  EXPECT_TRUE(ht::eventually([&] {
    return ht::metric(port, "conveyor:router_node_up{node=\"e1\",address=\"" + other.address() +
                                "\",state=\"incompatible\"}") == 0;
  }));
  const auto r = ht::http_request(port, "POST", "/v1/completions", ht::body_of(completion(prompt_of(1), 4, false)));
  EXPECT_EQ(r.status, 503) << r.body;
  EXPECT_NE(r.body.find("no engine node is available"), std::string::npos) << r.body;

  // The same shape with other weights: another quantization of one file.
  const std::string q8 = CONVEYOR_SHARED_MODELS "/tiny-llama2-q8_0.gguf", q4 = CONVEYOR_SHARED_MODELS "/tiny-llama2-q4_0.gguf";
  if (!std::ifstream(q8) || !std::ifstream(q4)) GTEST_SKIP() << q8 << " or " << q4 << " is missing";
  Node quantized = start_node("q4", 0, q4);
  auto q8_router = start_router({"--nodes", quantized.address()}, "router_other_weights", q8);
  const uint16_t q8_port = q8_router->port();
  EXPECT_TRUE(ht::eventually([&] {
    return ht::metric(q8_port, "conveyor:router_node_up{node=\"q4\",address=\"" + quantized.address() +
                                   "\",state=\"incompatible\"}") == 0;
  })) << q8_router->log_tail();
  EXPECT_NE(q8_router->log().find("the same shape with other weights"), std::string::npos) << q8_router->log_tail();
}

// A node whose waiting queue is full refuses a request; with no other node
// to take it the router answers as `serve` does: 429 queue_full with
// Retry-After (it said 503 "no engine node is available").
TEST_F(Router, AFullQueueOnTheOnlyNodeIs429) {
  Node node;
  node.name = "full";
  node.node_port = free_loopback_port();
  node.process = std::make_unique<ServeProcess>(
      kConveyor,
      std::vector<std::string>{"--model", "dummy:llama-15m", "--kv-cache-tokens", "2048", "--threads", "1",
                               "--max-num-seqs", "1", "--max-waiting", "1", "--node-port",
                               std::to_string(node.node_port), "--node-name", node.name},
      kWorkDir + "/router_full.log");
  std::string error;
  ASSERT_TRUE(node.process->wait_ready(std::chrono::seconds(60), error)) << error;
  auto router = start_router({"--nodes", node.address()}, "router_full", "dummy:llama-15m");
  const uint16_t port = router->port();
  std::vector<Node> nodes;
  nodes.push_back(std::move(node));
  ASSERT_TRUE(all_up(port, nodes)) << router->log_tail();
  // Room for one running and one waiting: three clients keep it full (the
  // model's context is 256 tokens, so each request is short), while a
  // fourth asks until it is refused.
  std::atomic<bool> done{false};
  std::atomic<int> unavailable{0};
  std::vector<std::thread> busy;
  for (int i = 0; i < 3; ++i)
    busy.emplace_back([&, i] {
      while (!done) {
        const auto r = ht::http_request(port, "POST", "/v1/completions", ht::body_of(completion(prompt_of(i), 240, false)));
        if (r.status == 503) ++unavailable;
      }
    });
  ht::Response refused;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  while (refused.status != 429 && std::chrono::steady_clock::now() < deadline) {
    refused = ht::http_request(port, "POST", "/v1/completions", ht::body_of(completion(prompt_of(3), 4, false)));
    if (refused.status == 503) ++unavailable;
  }
  done = true;
  for (std::thread& t : busy) t.join();
  EXPECT_EQ(refused.status, 429) << refused.body;
  EXPECT_EQ(refused.headers.count("retry-after"), 1u);
  EXPECT_NE(refused.body.find("\"queue_full\""), std::string::npos) << refused.body;
  EXPECT_EQ(unavailable.load(), 0) << "a full queue answered 503";
}

// A node whose HTTP port is taken exits as `serve` does (it lived on with
// its node port open, and aborted when a router connected).
TEST_F(Router, ANodeWhoseHttpPortIsTakenExits) {
  Node taken = start_node("t1");
  const uint16_t node_port = free_loopback_port();
  const auto r = run_process({kConveyor, "serve", "--model", kModel, "--threads", "1", "--kv-cache-tokens", "4096",
                              "--node-port", std::to_string(node_port), "--port",
                              std::to_string(taken.process->port())},
                             std::chrono::seconds(60));
  EXPECT_FALSE(r.timed_out) << r.output;
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("cannot bind"), std::string::npos) << r.output;
}

// Constrained requests (a regular expression here) survive a killed node as
// any request does: the node they move to compiles the grammar again from its
// IR, which is what crosses the wire, and replays the tokens so far through
// its matcher, so each stream ends where the grammar does with the text and
// ids of an undisturbed run.
TEST(RouterConstrained, KillNineOfANodeKeepsConstrainedStreamsExact) {
  const std::string model = CONVEYOR_SHARED_MODELS "/tiny-llama3-q4_k_m.gguf";
  if (!std::ifstream(model)) GTEST_SKIP() << model << " is missing";
  std::vector<Node> nodes;
  for (const char* name : {"g1", "g2"}) nodes.push_back(start_node(name, 0, model));
  auto router = start_router({"--nodes", nodes_arg(nodes), "--policy", "least_loaded"}, "router_grammar", model);
  const uint16_t port = router->port();
  ASSERT_TRUE(all_up(port, nodes)) << router->log_tail();

  const std::string pattern = "(yes|no)(, [a-z]{1,8}){40}\\.";
  auto body = [&](int i, bool stream) {
    return json::object{{"prompt", "Answer:"}, {"max_tokens", 1000}, {"temperature", 0.9}, {"seed", 500 + i},
                        {"stream", stream}, {"return_token_ids", true},
                        {"structured_outputs", json::object{{"regex", pattern}}}};
  };
  constexpr int kStreams = 8;
  std::vector<Stream> streams(kStreams);
  std::vector<std::string> texts(kStreams);
  std::atomic<int> tokens_seen{0};
  std::vector<std::thread> threads;
  for (int i = 0; i < kStreams; ++i) {
    threads.emplace_back([&, i] {
      Stream& s = streams[size_t(i)];
      const auto r = ht::sse_request(port, "/v1/completions", ht::body_of(body(i, true)), [&](const std::string& p) {
        if (p == "[DONE]") return true;
        auto v = json::parse(p).as_object();
        for (const auto& c : v.at("choices").as_array()) {
          texts[size_t(i)] += std::string(c.at("text").as_string());
          if (const auto* ids = c.as_object().if_contains("token_ids"))
            for (int32_t id : ht::ids_of(*ids)) s.ids.push_back(id);
          if (!c.at("finish_reason").is_null()) s.finish = std::string(c.at("finish_reason").as_string());
        }
        ++tokens_seen;
        return true;
      });
      s.status = r.status;
    });
  }
  ASSERT_TRUE(ht::eventually([&] { return tokens_seen.load() >= kStreams * 10; }, std::chrono::seconds(60)));
  ::kill(nodes[0].process->pid(), SIGKILL);
  for (auto& t : threads) t.join();

  const std::regex re(pattern);
  for (int i = 0; i < kStreams; ++i) {
    EXPECT_EQ(streams[size_t(i)].finish, "stop") << "stream " << i << ": " << texts[size_t(i)];
    EXPECT_TRUE(std::regex_match(texts[size_t(i)], re)) << "stream " << i << ": " << texts[size_t(i)];
    const auto direct = ht::http_request(nodes[1].process->port(), "POST", "/v1/completions",
                                         ht::body_of(body(i, false)));
    ASSERT_EQ(direct.status, 200) << direct.body;
    EXPECT_EQ(streams[size_t(i)].ids, ids_of_response(direct)) << "stream " << i;
  }
  EXPECT_GT(ht::metric(port, "conveyor:router_failovers_total"), 0);
}

}  // namespace
}  // namespace conveyor::testing
