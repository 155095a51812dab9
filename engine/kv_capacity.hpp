// How many tokens the device KV cache holds (the byte sizes the flags give
// it in are parsed by base/bytes.hpp).
//
// Precedence: --kv-cache-tokens N when given (as before: N rounded down to
// whole blocks); else --kv-cache-memory SIZE (as many whole blocks as fit in
// SIZE bytes of the cache's dtype); else a fraction (--kv-cache-memory-fraction,
// 0.5) of the memory the kernel reports available (MemAvailable in
// /proc/meminfo) once the weights are loaded and packed, kept between
//   - at least one full context of the model (rounded up to a block), so any
//     request the scheduler admits fits even alone, and
//   - at most context_length × max_num_seqs tokens: more could only ever
//     hold prefix-cache blocks that no running sequence uses.
// Where MemAvailable cannot be read the default is 65536 tokens (the old
// fixed default), inside the same bounds.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/bytes.hpp"
#include "base/status.hpp"

namespace conveyor {

struct KvCapacityRequest {
  int64_t token_bytes = 0;  // one token's K and V in all layers, in the cache's dtype
  int32_t block_size = 16;
  int64_t tokens = 0;       // --kv-cache-tokens (0: not given)
  int64_t memory = 0;       // --kv-cache-memory in bytes (0: not given)
  double fraction = 0.5;    // of the available memory, when neither is given
  std::optional<int64_t> available;  // MemAvailable after loading the weights
  int32_t context_length = 0;
  int32_t max_num_seqs = 0;
};

struct KvCapacity {
  int64_t tokens = 0;  // a multiple of block_size
  int64_t bytes = 0;   // tokens × token_bytes
  std::string origin;  // how it was chosen, for the startup line
};

// The capacity a request gives, or an error naming the flag (a size that
// holds no block, more blocks than an int32 counts).
Expected<KvCapacity> plan_kv_capacity(const KvCapacityRequest& request);

}  // namespace conveyor
