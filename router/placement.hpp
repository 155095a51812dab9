// Where a router sends a request: placement policies over the nodes it
// knows, without actors (router/router_actor.hpp holds one and replaces it
// at run time; tests drive them directly).
//
//   round_robin      the available nodes in turn
//   least_loaded     the node with the least load (below), then the lowest
//                    KV usage
//   prefix_affinity  the node most likely to hold the prompt's prefix in its
//                    prefix cache: the router hashes the prompt's first
//                    blocks into a chain (each block's hash covers all tokens
//                    before it, as the engine's prefix cache does) and keeps,
//                    per node, the chains it sent there (an approximate index:
//                    the most recently sent blocks, as many as the node's KV
//                    cache holds and kMaxChainsPerNode at most, the least
//                    recent forgotten first, as its cache evicts; all of them
//                    when the node goes down; a node may still have evicted
//                    some for other requests). The node that matches the most leading blocks
//                    wins, among the nodes under a load bound: a node may
//                    take a request only while its load with it stays within
//                    kLoadBound x the mean load (this request counted) + 1,
//                    so one hot prefix cannot pile up on one node
//                    (consistent hashing with bounded loads). Ties, and a
//                    prompt that matches nowhere, go where the first block's
//                    hash points among them (rendezvous hashing): a new
//                    prefix's requests gather on one node from the first,
//                    and one that spilled to a second node stays on those two
//                    rather than alternating by load.
//
// A node's load is the larger of the requests the router has in flight on it
// and what the node last reported (running + waiting), which counts other
// routers' and the node's own HTTP clients' requests.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "base/status.hpp"

namespace conveyor {

struct NodeLoad {
  std::string name;       // what the policy knows the node by (the router: its address)
  int32_t in_flight = 0;  // the router's requests on it
  int32_t running = 0;    // as last reported
  int32_t waiting = 0;
  double kv_usage = 0.0;  // blocks in use / all blocks, as last reported
  int32_t num_blocks = 0;  // its KV cache's blocks (0: not known)
  int32_t load() const { return std::max(in_flight, running + waiting); }
};

struct PlacementQuery {
  std::vector<uint64_t> chain;  // the prompt's leading full blocks, hashed as a chain
  std::vector<NodeLoad> nodes;  // the nodes a request may go to (connected, same model, not draining)
};

class PlacementPolicy {
 public:
  virtual ~PlacementPolicy() = default;
  virtual const char* name() const = 0;
  // An index into query.nodes (which is not empty).
  virtual size_t place(const PlacementQuery& query) = 0;
  // The request went to `node` (its chain is now likely cached there).
  virtual void placed(const std::string& /*node*/, const std::vector<uint64_t>& /*chain*/) {}
  // `node` lost what it held (it went down, or restarted).
  virtual void forget(const std::string& /*node*/) {}
  // How many of `chain`'s leading blocks the policy expects `node` to hold
  // (prefix_affinity's estimate; 0 for the others).
  virtual int32_t expected_hits(const std::string& /*node*/, const std::vector<uint64_t>& /*chain*/) const {
    return 0;
  }
};

// round_robin, least_loaded or prefix_affinity; an error names the choices.
Expected<std::unique_ptr<PlacementPolicy>> make_placement_policy(const std::string& name);

// The chain of hashes of `tokens`' first full blocks of `block_size`, at
// most `max_blocks` of them.
std::vector<uint64_t> prefix_chain(const std::vector<int32_t>& tokens, int32_t block_size, int32_t max_blocks = 64);

inline constexpr double kLoadBound = 1.25;
inline constexpr size_t kMaxChainsPerNode = 1 << 16;

}  // namespace conveyor
