#include <sstream>

#include "router/router_actor.hpp"

namespace conveyor {

bool RouterMetrics::any_node_up() const {
  std::lock_guard lock(mutex);
  for (const Node& n : nodes)
    if (n.state == "up") return true;
  return false;
}

std::string RouterMetrics::render() const {
  std::lock_guard lock(mutex);
  std::ostringstream out;
  auto family = [&](const char* name, const char* type, const char* help) {
    out << "# HELP conveyor:" << name << ' ' << help << "\n# TYPE conveyor:" << name << ' ' << type << '\n';
  };
  auto label = [](const std::string& v) {
    std::string s;
    for (char c : v) {
      if (c == '\\' || c == '"') s += '\\';
      if (c == '\n') { s += "\\n"; continue; }
      s += c;
    }
    return s;
  };
  // Every node's series carry its address too: two nodes may share a name
  // (--node-name), never an address, and a scrape must not repeat a series.
  auto node = [&](const Node& n) { return "node=\"" + label(n.name) + "\",address=\"" + label(n.address) + "\""; };
  family("router_node_up", "gauge", "1 while the node is connected, serves the router's model and is not draining.");
  for (const Node& n : nodes)
    out << "conveyor:router_node_up{" << node(n) << ",state=\"" << n.state << "\"} " << (n.state == "up" ? 1 : 0) << '\n';
  family("router_node_in_flight", "gauge", "Requests the router has on the node.");
  for (const Node& n : nodes) out << "conveyor:router_node_in_flight{" << node(n) << "} " << n.in_flight << '\n';
  family("router_node_running", "gauge", "Sequences running on the node, as it last reported.");
  for (const Node& n : nodes) out << "conveyor:router_node_running{" << node(n) << "} " << n.stats.num_running << '\n';
  family("router_node_waiting", "gauge", "Requests waiting on the node, as it last reported.");
  for (const Node& n : nodes) out << "conveyor:router_node_waiting{" << node(n) << "} " << n.stats.num_waiting << '\n';
  family("router_node_kv_cache_usage_ratio", "gauge", "KV blocks in use on the node / all its blocks, as it last reported.");
  for (const Node& n : nodes)
    out << "conveyor:router_node_kv_cache_usage_ratio{" << node(n) << "} "
        << (n.stats.blocks.total > 0 ? double(n.stats.blocks.used) / n.stats.blocks.total : 0.0) << '\n';
  family("router_node_prefix_cache_query_tokens_total", "counter", "Prompt tokens the node looked up in its prefix cache.");
  for (const Node& n : nodes)
    out << "conveyor:router_node_prefix_cache_query_tokens_total{" << node(n) << "} "
        << n.stats.blocks.prefix_query_tokens << '\n';
  family("router_node_prefix_cache_hit_tokens_total", "counter", "Of those, the tokens it found cached.");
  for (const Node& n : nodes)
    out << "conveyor:router_node_prefix_cache_hit_tokens_total{" << node(n) << "} "
        << n.stats.blocks.prefix_hit_tokens << '\n';
  family("router_node_requests_routed_total", "counter", "Requests (and resubmissions) the router sent to the node.");
  for (const Node& n : nodes) out << "conveyor:router_node_requests_routed_total{" << node(n) << "} " << n.routed << '\n';
  family("router_node_failovers_total", "counter", "Requests moved off the node when it died.");
  for (const Node& n : nodes) out << "conveyor:router_node_failovers_total{" << node(n) << "} " << n.failovers << '\n';
  family("router_policy_info", "gauge", "The placement policy in use.");
  out << "conveyor:router_policy_info{policy=\"" << label(policy) << "\"} 1\n";
  family("router_requests_routed_total", "counter", "Requests placed, by the policy that placed them.");
  for (const auto& [p, count] : routed_by_policy)
    out << "conveyor:router_requests_routed_total{policy=\"" << label(p) << "\"} " << count << '\n';
  family("router_failovers_total", "counter", "Resubmissions of requests whose node died.");
  out << "conveyor:router_failovers_total " << failovers << '\n';
  family("router_unplaced_requests_total", "counter", "Requests ended because no node could take them.");
  out << "conveyor:router_unplaced_requests_total " << failed << '\n';
  family("router_prompt_blocks_total", "counter", "Full prompt blocks of placed requests (their prefix chains).");
  out << "conveyor:router_prompt_blocks_total " << prompt_blocks << '\n';
  family("router_prefix_expected_hit_blocks_total", "counter",
         "Of those, the blocks the policy expected the chosen node to hold (prefix_affinity's estimate).");
  out << "conveyor:router_prefix_expected_hit_blocks_total " << expected_hit_blocks << '\n';
  return out.str();
}

}  // namespace conveyor
