// The stored responses of the Responses API (`store`, default true): what
// GET /v1/responses/{id} returns, what DELETE removes, and what
// `previous_response_id` continues.
//
// Each entry holds the response object as GET returns it and the whole
// conversation up to and including the response's output, as chat messages
// (the request's `instructions` excluded: OpenAI does not carry them over),
// and the name of the engine session its conversation runs under
// (GenerateRequest::session) with the tokens of its prompt and answer: a
// continued response runs under the same session and starts with those
// tokens (responses_continuation.hpp), so the KV blocks of the previous turn
// are still there and its prompt is not computed again.
//
// Bounds: an entry lives `ttl_seconds` from when it was stored; past
// `max_responses` entries or `max_bytes` (an estimate of the text held) the
// oldest go first. Entries belong to a scope, the API key that created them:
// another key, asking for the same id, is told there is no such response.
// When an entry goes (deleted, expired, evicted) and it was the latest
// response of its session, the session is let go (`release`), so the
// engine's KV blocks are not kept for a conversation that can no longer
// continue.
//
// Thread-safety: every method from any thread (one mutex); `release` is
// called without it held.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <unordered_set>
#include <vector>

#include "http/api_types.hpp"

namespace conveyor::http {

// Who may see a stored response: the API key (its account in the key gate)
// that created it; an empty pointer when the server needs no key (one
// shared scope). Compared by owner, so an account that is gone matches no
// later one.
using ResponseScope = std::weak_ptr<const void>;

struct StoredResponse {
  std::string id;                         // "resp_..."
  std::string json;                       // the response object, as GET returns it
  std::string input_items_json;           // its input as OpenAI's items (a JSON array)
  std::vector<ChatMessage> conversation;  // everything before it and its output
  std::string session;                    // the engine session of its conversation
  std::vector<int32_t> tokens;            // its prompt and answer as the engine computed them
  // Still running: GET shows it (status in_progress) and its input items;
  // nothing can continue it yet. The finished response replaces it.
  bool in_progress = false;
};

struct ResponseStoreLimits {
  double ttl_seconds = 3600.0;          // server option responses_ttl
  size_t max_responses = 1000;          // server option responses_max
  size_t max_bytes = size_t(64) << 20;  // server option responses_max_bytes
};

class ResponseStore {
 public:
  using Clock = std::chrono::steady_clock;
  using Release = std::function<void(const std::string& session)>;

  explicit ResponseStore(ResponseStoreLimits limits = {}, Release release = {});
  ResponseStore(const ResponseStore&) = delete;
  ResponseStore& operator=(const ResponseStore&) = delete;

  // Stores `response` (replacing an entry with its id) as the latest of its
  // session; evicts what the bounds ask. A response larger than max_bytes
  // alone is not stored. True when it was.
  bool put(const ResponseScope& scope, StoredResponse response, Clock::time_point now = Clock::now());
  // A finished response in place of its in-progress entry, as put() does
  // (as the newest entry if that one was evicted or expired meanwhile); one
  // DELETEd while it ran is not stored again (false), and its session is
  // let go unless a stored response still continues it.
  bool complete(const ResponseScope& scope, StoredResponse response, Clock::time_point now = Clock::now());
  // The entry, or null when there is none for this scope (or it expired).
  std::shared_ptr<const StoredResponse> get(const ResponseScope& scope, const std::string& id,
                                            Clock::time_point now = Clock::now());
  // Removes the entry (DELETE); false when there is none for this scope.
  bool erase(const ResponseScope& scope, const std::string& id, Clock::time_point now = Clock::now());
  // Removes a response's in-progress entry for good: it was answered with an
  // error and will not complete().
  void withdraw(const ResponseScope& scope, const std::string& id);

  size_t size() const;
  size_t bytes() const;  // the estimate the byte bound applies to

 private:
  struct Entry {
    ResponseScope scope;
    std::shared_ptr<const StoredResponse> response;
    size_t bytes = 0;
    Clock::time_point expires;
  };
  using Order = std::list<Entry>;  // oldest first

  // Under mutex_; appends the sessions to let go of.
  bool insert(const ResponseScope& scope, StoredResponse response, Clock::time_point now,
              std::vector<std::string>& released);
  void remove(Order::iterator it, std::vector<std::string>& released);
  void expire(Clock::time_point now, std::vector<std::string>& released);
  Order::iterator find(const ResponseScope& scope, const std::string& id);
  void let_go_unless_continued(const std::string& session, std::vector<std::string>& released) const;
  void release_all(const std::vector<std::string>& sessions) const;

  const ResponseStoreLimits limits_;
  const Release release_;
  mutable std::mutex mutex_;
  Order order_;
  std::unordered_map<std::string, Order::iterator> by_id_;
  std::unordered_map<std::string, std::string> latest_of_session_;  // session -> response id
  std::unordered_set<std::string> deleted_running_;  // ids DELETEd while in progress, until complete()
  size_t bytes_ = 0;
};

}  // namespace conveyor::http
