// The router's Prometheus text (router/router_actor.hpp's RouterMetrics):
// every node's series are distinct, even for nodes that share a name.
#include <gtest/gtest.h>

#include <set>
#include <sstream>

#include "router/router_actor.hpp"

namespace conveyor {
namespace {

TEST(RouterMetrics, NodesOfOneNameGetSeriesOfTheirOwn) {
  RouterMetrics metrics;
  metrics.policy = "round_robin";
  for (const char* address : {"10.0.0.1:7000", "10.0.0.2:7000"}) {
    RouterMetrics::Node n;
    n.name = "same";
    n.address = address;
    n.state = "up";
    n.routed = 2;
    metrics.nodes.push_back(n);
  }
  std::istringstream text(metrics.render());
  std::set<std::string> series;
  int node_samples = 0;
  for (std::string line; std::getline(text, line);) {
    if (line.empty() || line[0] == '#') continue;
    const std::string name = line.substr(0, line.rfind(' '));
    EXPECT_TRUE(series.insert(name).second) << "repeated series: " << name;
    if (name.find("node=\"same\"") != std::string::npos) {
      ++node_samples;
      EXPECT_NE(name.find("address=\"10.0.0."), std::string::npos) << name;
    }
  }
  EXPECT_EQ(node_samples, 2 * 9);  // nine families a node
}

}  // namespace
}  // namespace conveyor
