// Shared-prefix waits (EngineConfig::prefix_wait): the leading full blocks
// that sequences are computing, keyed by the hash chain of their tokens
// (engine/prefix_index.hpp's prefix_key_hash; a collision only makes a
// request wait). A request whose leading blocks another sequence is still
// computing waits for them, and then finds them in the prefix cache, rather
// than computing them too; otherwise it claims the blocks nobody computes,
// so that later arrivals wait for it.
//
// Thread-safety: none; the scheduler core is its only user.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "engine/sequence.hpp"

namespace conveyor {

class PrefixClaims {
 public:
  using Sequences = std::unordered_map<seq_id, Sequence>;

  // True when a live sequence (in the batch, or admitted in `iteration` and
  // planned; not in `cancelled`) has claimed one of s's leading full blocks
  // of `block_size` tokens and not computed it yet: s waits. Otherwise s
  // claims every one of them that no sequence in the batch holds (they are
  // recorded in s.prefix) and the answer is false.
  bool must_wait(Sequence& s, int32_t block_size, uint64_t iteration, const Sequences& all,
                 std::span<const seq_id> cancelled);
  // Lets go of s's claims.
  void release(Sequence& s);
  void clear() { claims_.clear(); }

 private:
  struct Claim {
    seq_id owner = 0;
    int32_t end = 0;  // the token index where the block ends
  };
  std::unordered_map<uint64_t, Claim> claims_;
  std::vector<uint64_t> hashes_;  // scratch
};

}  // namespace conveyor
