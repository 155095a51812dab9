#include "engine/kv_capacity.hpp"

#include <algorithm>
#include <cstdio>
#include <limits>
#include <string>

namespace conveyor {

Expected<KvCapacity> plan_kv_capacity(const KvCapacityRequest& r) {
  const int64_t bs = r.block_size, block_bytes = r.token_bytes * bs;
  const int64_t max_blocks = std::numeric_limits<int32_t>::max();
  auto too_many = [&](const std::string& flag, int64_t tokens) -> Error {
    return make_error(Errc::invalid_argument, flag + ": " + std::to_string(tokens / bs) +
                                                  " blocks; at most " + std::to_string(max_blocks));
  };
  KvCapacity c;
  if (r.tokens > 0) {
    c.tokens = r.tokens / bs * bs;
    if (c.tokens / bs > max_blocks) return too_many("--kv-cache-tokens", c.tokens);
    c.origin = "--kv-cache-tokens";
  } else if (r.memory > 0) {
    const int64_t blocks = block_bytes > 0 ? r.memory / block_bytes : 0;
    if (blocks < 1)
      return make_error(Errc::invalid_argument,
                        "--kv-cache-memory: " + format_bytes(r.memory) + " holds no block of " +
                            std::to_string(bs) + " tokens (a block takes " + format_bytes(block_bytes) + ")");
    if (blocks > max_blocks) return too_many("--kv-cache-memory", blocks * bs);
    c.tokens = blocks * bs;
    c.origin = "--kv-cache-memory " + format_bytes(r.memory);
  } else {
    const int64_t floor_tokens = (int64_t(std::max(r.context_length, 1)) + bs - 1) / bs * bs;
    const int64_t cap_tokens =
        std::max(floor_tokens, int64_t(std::max(r.context_length, 1)) * std::max(r.max_num_seqs, 1) / bs * bs);
    int64_t tokens = 0;
    char pct[32];
    std::snprintf(pct, sizeof pct, "%g%%", r.fraction * 100.0);
    if (r.available) {
      const double budget = double(*r.available) * r.fraction;
      tokens = block_bytes > 0 ? int64_t(budget / double(block_bytes)) * bs : cap_tokens;
      c.origin = std::string(pct) + " of " + format_bytes(*r.available) + " available";
    } else {
      tokens = 65536;
      c.origin = "available memory unknown: the fixed default";
    }
    if (tokens > cap_tokens) {
      tokens = cap_tokens;
      c.origin += ", capped at context " + std::to_string(r.context_length) + " x " +
                  std::to_string(r.max_num_seqs) + " sequences";
    } else if (tokens < floor_tokens) {
      tokens = floor_tokens;
      c.origin += ", raised to one full context";
    }
    if (tokens / bs > max_blocks) tokens = max_blocks * bs;
    c.tokens = tokens;
  }
  c.bytes = c.tokens * r.token_bytes;
  return c;
}

}  // namespace conveyor
