// The router's placement policies (router/placement.hpp) on made-up loads.
#include <gtest/gtest.h>

#include <map>

#include "router/placement.hpp"

namespace conveyor {
namespace {

PlacementQuery query(std::vector<int32_t> loads, std::vector<uint64_t> chain = {}) {
  PlacementQuery q;
  q.chain = std::move(chain);
  for (size_t i = 0; i < loads.size(); ++i) {
    NodeLoad n;
    n.name = "n" + std::to_string(i);
    n.in_flight = loads[i];
    q.nodes.push_back(n);
  }
  return q;
}

std::unique_ptr<PlacementPolicy> policy(const std::string& name) {
  auto p = make_placement_policy(name);
  EXPECT_TRUE(p.has_value());
  return std::move(p).value();
}

TEST(Placement, UnknownPolicyIsRefusedWithTheChoices) {
  auto p = make_placement_policy("fastest");
  ASSERT_FALSE(p.has_value());
  EXPECT_NE(p.error().message.find("round_robin, least_loaded or prefix_affinity"), std::string::npos);
}

TEST(Placement, RoundRobinTakesEachNodeInTurn) {
  auto p = policy("round_robin");
  std::vector<size_t> got;
  for (int i = 0; i < 6; ++i) got.push_back(p->place(query({5, 0, 9})));
  EXPECT_EQ(got, (std::vector<size_t>{0, 1, 2, 0, 1, 2}));
}

TEST(Placement, LeastLoadedTakesTheLightestThenTheLowerKvUsage) {
  auto p = policy("least_loaded");
  EXPECT_EQ(p->place(query({3, 1, 2})), 1u);
  PlacementQuery q = query({2, 2, 2});
  q.nodes[0].kv_usage = 0.5;
  q.nodes[1].kv_usage = 0.1;
  q.nodes[2].kv_usage = 0.9;
  EXPECT_EQ(p->place(q), 1u);
  // A node's own report counts when it is above the router's count.
  q = query({0, 0, 0});
  q.nodes[0].running = 4;
  q.nodes[2].waiting = 1;
  EXPECT_EQ(p->place(q), 1u);
}

TEST(Placement, PrefixChainsCoverFullBlocksAndEverythingBefore) {
  const std::vector<int32_t> a{1, 2, 3, 4, 5, 6, 7, 8, 9};
  std::vector<int32_t> b = a;
  b[5] = 99;  // second block differs
  const auto ca = prefix_chain(a, 4), cb = prefix_chain(b, 4);
  ASSERT_EQ(ca.size(), 2u);  // the ninth token is not a full block
  EXPECT_EQ(ca[0], cb[0]);
  EXPECT_NE(ca[1], cb[1]);
  EXPECT_EQ(prefix_chain(a, 4, 1).size(), 1u);
  std::vector<int32_t> c{9, 9, 9, 9, 5, 6, 7, 8};  // same second block after another first
  EXPECT_NE(prefix_chain(c, 4)[1], ca[1]);
}

TEST(Placement, PrefixAffinityKeepsAPrefixOnOneNode) {
  auto p = policy("prefix_affinity");
  std::map<int, size_t> home;
  for (int round = 0; round < 4; ++round) {
    for (int prefix = 0; prefix < 8; ++prefix) {
      std::vector<int32_t> tokens(64, prefix + 1);
      const auto chain = prefix_chain(tokens, 16);
      const PlacementQuery q = query({0, 0, 0}, chain);
      const size_t node = p->place(q);
      if (round == 0) {
        home[prefix] = node;
        EXPECT_EQ(p->expected_hits(q.nodes[node].name, chain), 0);
      } else {
        EXPECT_EQ(node, home[prefix]) << "prefix " << prefix;
        EXPECT_EQ(p->expected_hits(q.nodes[node].name, chain), 4);
      }
      p->placed(q.nodes[node].name, chain);
    }
  }
  // New prefixes spread over the nodes (rendezvous hashing), not all on one.
  std::map<size_t, int> per_node;
  for (auto [prefix, node] : home) ++per_node[node];
  EXPECT_GE(per_node.size(), 2u);
}

TEST(Placement, PrefixAffinityLeavesANodeOverTheLoadBound) {
  auto p = policy("prefix_affinity");
  const auto chain = prefix_chain(std::vector<int32_t>(32, 7), 16);
  p->placed("n0", chain);
  EXPECT_EQ(p->place(query({0, 0, 0}, chain)), 0u);
  EXPECT_EQ(p->place(query({2, 1, 1}, chain)), 0u);  // within 1.25 x mean + 1
  // A hot prefix: n0 far above the mean (bound ceil(1.25 x 18/3) + 1 = 9)
  // takes no more; another node does.
  EXPECT_NE(p->place(query({12, 3, 2}, chain)), 0u);
}

TEST(Placement, PrefixAffinityPrefersTheLongestMatch) {
  auto p = policy("prefix_affinity");
  std::vector<int32_t> tokens(64, 3);
  const auto chain = prefix_chain(tokens, 16);
  p->placed("n1", std::vector<uint64_t>(chain.begin(), chain.begin() + 1));
  p->placed("n2", std::vector<uint64_t>(chain.begin(), chain.begin() + 3));
  EXPECT_EQ(p->place(query({0, 0, 0}, chain)), 2u);
  EXPECT_EQ(p->expected_hits("n2", chain), 3);
  EXPECT_EQ(p->expected_hits("n0", chain), 0);
}

// The index holds as many blocks per node as its KV cache does, dropping
// the least recently placed first, and all of them when the node goes down.
TEST(Placement, PrefixAffinityForgetsWhatANodesCacheCannotHold) {
  auto p = policy("prefix_affinity");
  PlacementQuery q = query({0, 0});
  for (NodeLoad& n : q.nodes) n.num_blocks = 4;
  (void)p->place(q);  // learns the capacities
  std::vector<int32_t> a(48, 3), b(48, 5);
  const auto chain_a = prefix_chain(a, 16), chain_b = prefix_chain(b, 16);  // 3 blocks each
  p->placed("n0", chain_a);
  EXPECT_EQ(p->expected_hits("n0", chain_a), 3);
  p->placed("n0", chain_b);  // 6 blocks placed, 4 held: a's first two are gone
  EXPECT_EQ(p->expected_hits("n0", chain_b), 3);
  EXPECT_EQ(p->expected_hits("n0", chain_a), 0);
  p->placed("n1", chain_a);
  p->forget("n1");
  EXPECT_EQ(p->expected_hits("n1", chain_a), 0);
  EXPECT_EQ(p->expected_hits("n0", chain_b), 3);
}

}  // namespace
}  // namespace conveyor
