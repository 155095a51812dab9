// An admission policy of a program's own, written against conveyor's public
// headers only: each tenant (GenerateRequest::tenant; the server sets the
// API key's name) may hold at most `share` of the KV cache, so one tenant's
// backlog cannot fill the cache while another tenant waits.
//
// The rule (TenantShare) walks the waiting candidates in queue order, as the
// built-ins do, charging each the blocks it can grow to (prompt plus
// max_tokens, per sample, as the conservative built-in does):
//   - a candidate whose prompt alone exceeds the cache is refused;
//   - one whose tenant's running blocks plus the blocks charged to that
//     tenant in this walk plus its own would pass share × total blocks is
//     skipped: it waits, and the walk goes on, so other tenants' requests
//     behind it are not held up by it (that is the point of a share). A
//     tenant that holds nothing may always start one request that fits the
//     cache, or a share smaller than one request would starve it;
//   - one that does not fit the free blocks (less those owed to running
//     requests) stops the walk, as in the built-ins, so that a large request
//     is not overtaken forever by small ones of other tenants;
//   - the walk also stops at max_running.
// Requests without a tenant ("") are not capped.
//
// The cap holds at admission, on what a tenant's running sequences hold at
// that moment plus what is admitted: sequences already running keep growing
// into their max_tokens, and the preemption policy may later move blocks
// around, so a tenant's share of the blocks held can pass `share` for a
// while when its sequences were admitted while they held little.
//
// The actor (tenant_share_policy) wraps the rule.
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <string>

#include "actors/policy_actors.hpp"

namespace conveyor::examples {

struct TenantShare {
  double share = 0.5;  // of the whole KV cache, per tenant

  static int32_t blocks_for(int64_t tokens, int32_t block_size) {
    return int32_t((tokens + block_size - 1) / block_size);
  }

  // The blocks a candidate may come to hold (capped at the whole cache).
  static int32_t footprint(const AdmissionCandidate& c, const AdmissionQuery& q) {
    const int64_t samples = std::max<int32_t>(1, c.num_samples);
    const int64_t blocks = blocks_for(c.prompt_tokens + int64_t(c.max_tokens) * samples, q.block_size) +
                           (samples - 1);  // the copy-on-write of the shared last prompt block
    return int32_t(std::min<int64_t>(blocks, q.total_blocks));
  }

  AdmissionDecision operator()(const AdmissionQuery& q) const {
    AdmissionDecision d;
    std::map<std::string, int64_t> held;  // running blocks, plus what this walk charged
    for (const TenantUsage& t : q.tenants) held[t.tenant] += t.blocks;
    const int64_t cap = int64_t(share * q.total_blocks);
    int64_t budget = int64_t(q.free_blocks) - q.reserved_blocks;
    int32_t running = q.num_running;
    const bool cache_empty = q.num_running == 0 && q.reserved_blocks == 0;
    for (const AdmissionCandidate& c : q.candidates) {
      // The prompt and its first token's slot must fit the whole cache.
      if (blocks_for(int64_t(c.prompt_tokens) + 1, q.block_size) > q.total_blocks) {
        d.rejected.emplace_back(c.id, "the prompt is larger than the whole KV cache");
        continue;
      }
      const int32_t samples = std::max<int32_t>(1, c.num_samples);
      if (running + samples > q.max_running) break;
      const int32_t need = footprint(c, q);
      int64_t& tenant = held[c.tenant];
      if (!c.tenant.empty() && tenant > 0 && tenant + need > cap) continue;  // waits: over its share
      // Into an empty cache the head goes whatever its footprint (it fits alone).
      if (need > budget && !(cache_empty && d.admitted.empty())) break;
      d.admitted.push_back(c.id);
      d.footprints.push_back(need);
      budget -= need;
      tenant += need;
      running += samples;
    }
    return d;
  }
};

// The actor: the admission protocol of actors/policy_actors.hpp. It learns
// nothing from finished requests.
inline admission_actor::behavior_type tenant_share_policy(admission_actor::pointer, TenantShare rule) {
  return {
      [rule](admit_atom, const AdmissionQuery& q) { return rule(q); },
      [](finished_atom, int32_t) {},
  };
}

}  // namespace conveyor::examples
