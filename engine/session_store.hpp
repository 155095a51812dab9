// Sessions' kept KV blocks (GenerateRequest::session). When a session's
// request ends, a sequence forked from it (its keeper, an id from the
// samples' range) holds the request's blocks for the session's next
// request, until that request is admitted, the session expires or is
// released, or the blocks are wanted. The store keeps the books; the
// scheduler core forks the keepers and frees them like any sequence: each
// call that lets a session go appends its keeper to `freed`.
//
// Thread-safety: none; the scheduler core is its only user.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/engine_types.hpp"

namespace conveyor {

class SessionStore {
 public:
  // `name` keeps `blocks` blocks, held by `keeper`, until `expires`. The
  // caller has released the session's earlier turn.
  void keep(const std::string& name, seq_id keeper, int32_t blocks, double expires);
  // Lets go of `name`'s blocks (nothing for an unknown name).
  void release(const std::string& name, std::vector<seq_id>& freed);
  // Lets go of the oldest sessions until `blocks` blocks are released or
  // none is left; the blocks released.
  int32_t release_oldest(int32_t blocks, std::vector<seq_id>& freed);
  // Lets go of the sessions whose time is up at `now`.
  void expire(double now, std::vector<seq_id>& freed);
  std::optional<double> next_expiry() const;
  // Forgets every session: the block manager that held their blocks is gone.
  void clear();

  bool empty() const { return sessions_.empty(); }
  int32_t size() const { return int32_t(sessions_.size()); }
  int32_t blocks() const { return blocks_; }  // kept by all sessions

 private:
  struct Kept {
    seq_id keeper = 0;
    int32_t blocks = 0;
    double expires = 0.0;
    uint64_t order = 0;  // when kept: the oldest goes first
  };
  std::unordered_map<std::string, Kept> sessions_;
  int32_t blocks_ = 0;
  uint64_t next_order_ = 0;
};

}  // namespace conveyor
