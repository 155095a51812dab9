#include "router/placement.hpp"

#include <algorithm>
#include <cmath>
#include <list>

namespace conveyor {
namespace {

uint64_t mix(uint64_t h) {  // splitmix64's finaliser
  h ^= h >> 30;
  h *= 0xbf58476d1ce4e5b9ULL;
  h ^= h >> 27;
  h *= 0x94d049bb133111ebULL;
  return h ^ (h >> 31);
}

class RoundRobin final : public PlacementPolicy {
 public:
  const char* name() const override { return "round_robin"; }
  size_t place(const PlacementQuery& q) override { return next_++ % q.nodes.size(); }

 private:
  size_t next_ = 0;
};

// The least loaded node; ties go to the lower KV usage, then in turn.
size_t least_loaded_of(const PlacementQuery& q, const std::vector<size_t>& among, size_t start) {
  size_t best = among[start % among.size()];
  for (size_t k = 1; k < among.size(); ++k) {
    const size_t i = among[(start + k) % among.size()];
    const NodeLoad& a = q.nodes[i];
    const NodeLoad& b = q.nodes[best];
    if (a.load() < b.load() || (a.load() == b.load() && a.kv_usage < b.kv_usage)) best = i;
  }
  return best;
}

std::vector<size_t> all_of(const PlacementQuery& q) {
  std::vector<size_t> out(q.nodes.size());
  for (size_t i = 0; i < out.size(); ++i) out[i] = i;
  return out;
}

class LeastLoaded final : public PlacementPolicy {
 public:
  const char* name() const override { return "least_loaded"; }
  size_t place(const PlacementQuery& q) override { return least_loaded_of(q, all_of(q), turn_++); }

 private:
  size_t turn_ = 0;
};

class PrefixAffinity final : public PlacementPolicy {
 public:
  const char* name() const override { return "prefix_affinity"; }

  size_t place(const PlacementQuery& q) override {
    // The bound: kLoadBound x the mean load counting this request, plus one
    // (so that at low load one request more, or a load reported a moment
    // ago, does not push a request off its prefix's node).
    int64_t total = 0;
    for (const NodeLoad& n : q.nodes) {
      total += n.load();
      if (n.num_blocks > 0) nodes_[n.name].capacity = size_t(n.num_blocks);
    }
    const double mean = double(total + 1) / double(q.nodes.size());
    const int32_t bound = int32_t(std::ceil(kLoadBound * mean)) + 1;
    std::vector<size_t> under;
    for (size_t i = 0; i < q.nodes.size(); ++i)
      if (q.nodes[i].load() + 1 <= bound) under.push_back(i);
    if (under.empty()) under = all_of(q);  // cannot happen (some node is at or below the mean)
    if (q.chain.empty()) return least_loaded_of(q, under, turn_++);

    int32_t best_hits = 0;
    std::vector<size_t> best;
    for (size_t i : under) {
      const int32_t hits = expected_hits(q.nodes[i].name, q.chain);
      if (hits > best_hits) best.clear(), best_hits = hits;
      if (hits == best_hits) best.push_back(i);
    }
    // Among the best matches (or, when no node holds it, among all under the
    // bound): rendezvous hashing on the first block's hash, so a prefix
    // that spilled to a second node does not alternate between the two and
    // fill both caches with it.
    return rendezvous(q, best_hits > 0 ? best : under);
  }

  void placed(const std::string& node, const std::vector<uint64_t>& chain) override {
    Index& index = nodes_[node];
    for (uint64_t h : chain) {
      if (auto it = index.present.find(h); it != index.present.end()) {  // used again: newest now
        index.order.splice(index.order.end(), index.order, it->second);
        continue;
      }
      index.order.push_back(h);
      index.present.emplace(h, std::prev(index.order.end()));
      if (index.order.size() > std::min(index.capacity, kMaxChainsPerNode)) {
        index.present.erase(index.order.front());
        index.order.pop_front();
      }
    }
  }

  void forget(const std::string& node) override {
    if (auto it = nodes_.find(node); it != nodes_.end()) {
      it->second.order.clear();
      it->second.present.clear();
    }
  }

  int32_t expected_hits(const std::string& node, const std::vector<uint64_t>& chain) const override {
    auto it = nodes_.find(node);
    if (it == nodes_.end()) return 0;
    int32_t hits = 0;
    while (size_t(hits) < chain.size() && it->second.present.count(chain[size_t(hits)])) ++hits;
    return hits;
  }

 private:
  struct Index {
    std::list<uint64_t> order;  // least recently placed first
    std::unordered_map<uint64_t, std::list<uint64_t>::iterator> present;
    size_t capacity = kMaxChainsPerNode;  // the node's KV blocks, once known
  };

  static size_t rendezvous(const PlacementQuery& q, const std::vector<size_t>& among) {
    size_t pick = among.front();
    uint64_t top = 0;
    for (size_t i : among) {
      const uint64_t score = mix(q.chain.front() ^ std::hash<std::string>{}(q.nodes[i].name));
      if (score >= top) top = score, pick = i;
    }
    return pick;
  }
  std::unordered_map<std::string, Index> nodes_;
  size_t turn_ = 0;
};

}  // namespace

Expected<std::unique_ptr<PlacementPolicy>> make_placement_policy(const std::string& name) {
  if (name == "round_robin") return std::unique_ptr<PlacementPolicy>(new RoundRobin);
  if (name == "least_loaded") return std::unique_ptr<PlacementPolicy>(new LeastLoaded);
  if (name == "prefix_affinity") return std::unique_ptr<PlacementPolicy>(new PrefixAffinity);
  return make_error(Errc::invalid_argument, "placement policy must be round_robin, least_loaded or "
                                            "prefix_affinity, not '" + name + "'");
}

std::vector<uint64_t> prefix_chain(const std::vector<int32_t>& tokens, int32_t block_size, int32_t max_blocks) {
  std::vector<uint64_t> chain;
  if (block_size < 1) return chain;
  uint64_t h = 0x9e3779b97f4a7c15ULL;
  for (size_t b = 0; b < size_t(max_blocks) && (b + 1) * size_t(block_size) <= tokens.size(); ++b) {
    for (size_t i = b * size_t(block_size); i < (b + 1) * size_t(block_size); ++i)
      h = mix(h ^ (uint64_t(uint32_t(tokens[i])) + 0x632be59bd9b4e019ULL));
    chain.push_back(h);
  }
  return chain;
}

}  // namespace conveyor
