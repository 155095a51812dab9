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
  if (sessions_.empty()) sessions_closed_.notify_all();
}

size_t ServerState::session_count() {
  std::lock_guard lock(sessions_mutex_);
  return sessions_.size();
}

bool ServerState::wait_sessions_closed(std::chrono::steady_clock::time_point deadline) {
  std::unique_lock lock(sessions_mutex_);
  return sessions_closed_.wait_until(lock, deadline, [this] { return sessions_.empty(); });
}

std::vector<std::shared_ptr<SessionBase>> ServerState::live_sessions() {
  std::vector<std::shared_ptr<SessionBase>> live;
  std::lock_guard lock(sessions_mutex_);
  for (auto& [id, weak] : sessions_) {
    if (auto s = weak.lock()) live.push_back(std::move(s));
  }
  return live;
}

void ServerState::shutdown_sessions() {
  stopping_ = true;
  for (auto& s : live_sessions()) s->shutdown();
}

void ServerState::cancel_requests(const std::string& reason) {
  for (auto& s : live_sessions()) s->cancel_requests(reason);
}

ConnectionSlot::~ConnectionSlot() {
  if (state_) state_->connections_.fetch_sub(1);
}

ConnectionSlot ServerState::open_connection() {
  const size_t cap = options_.max_connections;
  size_t open = connections_.load();
  do {
    if (cap > 0 && open >= cap) return ConnectionSlot();
  } while (!connections_.compare_exchange_weak(open, open + 1));
  return ConnectionSlot(this);
}

void ServerState::request_started() {
  std::lock_guard lock(in_flight_mutex_);
  ++in_flight_;
}

void ServerState::request_ended() {
  std::function<void()> idle;
  {
    std::lock_guard lock(in_flight_mutex_);
    if (in_flight_ > 0) --in_flight_;
    if (in_flight_ == 0) std::swap(idle, when_idle_);
  }
  if (idle) idle();
}

size_t ServerState::requests_in_flight() {
  std::lock_guard lock(in_flight_mutex_);
  return in_flight_;
}

void ServerState::when_idle(std::function<void()> idle) {
  {
    std::lock_guard lock(in_flight_mutex_);
    if (in_flight_ > 0 || !idle) {
      when_idle_ = std::move(idle);
      return;
    }
  }
  idle();
}

}  // namespace conveyor::http
