#include "http/response_store.hpp"

namespace conveyor::http {
namespace {

bool same_scope(const ResponseScope& a, const ResponseScope& b) {
  return !a.owner_before(b) && !b.owner_before(a);
}

// What an entry holds, roughly: its text plus a little for each message.
size_t estimate_bytes(const StoredResponse& r) {
  size_t n = r.id.size() + r.json.size() + r.input_items_json.size() + r.session.size() + r.tokens.size() * sizeof(int32_t) + 128;
  for (const ChatMessage& m : r.conversation)
    n += m.role.size() + m.content.size() + m.tool_calls_json.size() + m.tool_call_id.size() + m.name.size() + 64;
  return n;
}

}  // namespace

ResponseStore::ResponseStore(ResponseStoreLimits limits, Release release)
    : limits_(limits), release_(std::move(release)) {}

bool ResponseStore::put(const ResponseScope& scope, StoredResponse response, Clock::time_point now) {
  std::vector<std::string> released;
  bool stored = false;
  {
    std::lock_guard lock(mutex_);
    stored = insert(scope, std::move(response), now, released);
  }
  release_all(released);
  return stored;
}

bool ResponseStore::complete(const ResponseScope& scope, StoredResponse response, Clock::time_point now) {
  std::vector<std::string> released;
  bool stored = false;
  {
    std::lock_guard lock(mutex_);
    if (deleted_running_.erase(response.id) == 0)  // evicted or expired meanwhile: stored as the newest
      stored = insert(scope, std::move(response), now, released);
    else
      let_go_unless_continued(response.session, released);
  }
  release_all(released);
  return stored;
}

bool ResponseStore::insert(const ResponseScope& scope, StoredResponse response, Clock::time_point now,
                           std::vector<std::string>& released) {
  const size_t bytes = estimate_bytes(response);
  if (auto it = by_id_.find(response.id); it != by_id_.end()) remove(it->second, released);
  expire(now, released);
  if (bytes > limits_.max_bytes || limits_.max_responses == 0) {
    let_go_unless_continued(response.session, released);
    return false;
  }
  // A session whose latest response changes hands is not let go, not even
  // when the response it continues is the one evicted to make room.
  if (!response.session.empty()) latest_of_session_[response.session] = response.id;
  while (!order_.empty() && (order_.size() + 1 > limits_.max_responses || bytes_ + bytes > limits_.max_bytes))
    remove(order_.begin(), released);
  const auto ttl = std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(limits_.ttl_seconds));
  auto shared = std::make_shared<const StoredResponse>(std::move(response));
  order_.push_back(Entry{scope, shared, bytes, now + ttl});
  by_id_[shared->id] = std::prev(order_.end());
  bytes_ += bytes;
  return true;
}

std::shared_ptr<const StoredResponse> ResponseStore::get(const ResponseScope& scope, const std::string& id,
                                                         Clock::time_point now) {
  std::vector<std::string> released;
  std::shared_ptr<const StoredResponse> found;
  {
    std::lock_guard lock(mutex_);
    expire(now, released);
    if (auto it = find(scope, id); it != order_.end()) found = it->response;
  }
  release_all(released);
  return found;
}

bool ResponseStore::erase(const ResponseScope& scope, const std::string& id, Clock::time_point now) {
  std::vector<std::string> released;
  bool erased = false;
  {
    std::lock_guard lock(mutex_);
    expire(now, released);
    if (auto it = find(scope, id); it != order_.end()) {
      if (it->response->in_progress) deleted_running_.insert(id);  // complete() must not bring it back
      remove(it, released);
      erased = true;
    }
  }
  release_all(released);
  return erased;
}

void ResponseStore::withdraw(const ResponseScope& scope, const std::string& id) {
  std::vector<std::string> released;
  {
    std::lock_guard lock(mutex_);
    deleted_running_.erase(id);
    if (auto it = find(scope, id); it != order_.end()) remove(it, released);
  }
  release_all(released);
}

size_t ResponseStore::size() const {
  std::lock_guard lock(mutex_);
  return order_.size();
}

size_t ResponseStore::bytes() const {
  std::lock_guard lock(mutex_);
  return bytes_;
}

void ResponseStore::remove(Order::iterator it, std::vector<std::string>& released) {
  const StoredResponse& r = *it->response;
  if (auto s = latest_of_session_.find(r.session); s != latest_of_session_.end() && s->second == r.id) {
    released.push_back(r.session);
    latest_of_session_.erase(s);
  }
  bytes_ -= it->bytes;
  by_id_.erase(r.id);
  order_.erase(it);
}

// Every entry lives as long: the oldest expire first.
void ResponseStore::expire(Clock::time_point now, std::vector<std::string>& released) {
  while (!order_.empty() && order_.front().expires <= now) remove(order_.begin(), released);
}

ResponseStore::Order::iterator ResponseStore::find(const ResponseScope& scope, const std::string& id) {
  const auto it = by_id_.find(id);
  if (it == by_id_.end() || !same_scope(it->second->scope, scope)) return order_.end();
  return it->second;
}

// A response that is not stored: its session is let go unless a stored
// response (the one it continued) is still the session's latest.
void ResponseStore::let_go_unless_continued(const std::string& session, std::vector<std::string>& released) const {
  if (!session.empty() && !latest_of_session_.contains(session)) released.push_back(session);
}

void ResponseStore::release_all(const std::vector<std::string>& sessions) const {
  if (!release_) return;
  for (const std::string& s : sessions) release_(s);
}

}  // namespace conveyor::http
