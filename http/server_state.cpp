#include "http/server_state.hpp"

#include <vector>

namespace conveyor::http {

uint64_t ServerState::add_session(std::weak_ptr<SessionBase> session) {
  std::lock_guard lock(sessions_mutex_);
  const uint64_t id = next_session_++;
  sessions_.emplace(id, std::move(session));
  return id;
}

void ServerState::remove_session(uint64_t id) {
  std::lock_guard lock(sessions_mutex_);
  sessions_.erase(id);
}

size_t ServerState::session_count() {
  std::lock_guard lock(sessions_mutex_);
  return sessions_.size();
}

void ServerState::shutdown_sessions() {
  stopping_ = true;
  std::vector<std::shared_ptr<SessionBase>> live;
  {
    std::lock_guard lock(sessions_mutex_);
    for (auto& [id, weak] : sessions_) {
      if (auto s = weak.lock()) live.push_back(std::move(s));
    }
  }
  for (auto& s : live) s->shutdown();
}

}  // namespace conveyor::http
