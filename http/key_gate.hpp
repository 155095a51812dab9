// The API keys a server accepts, and each key's limits, checked where a
// request is admitted.
//
//   KeyGate gate;
//   gate.set_keys(specs);                       // at start; again on SIGHUP (a reload)
//   auto who = gate.authenticate(header);       // "Bearer KEY": which key, or refused
//   auto admitted = gate.admit(who.key, prompt_tokens);   // a KeyLease, or a KeyRefusal (429)
//   lease.charge(generated);                    // as tokens stream
//   lease.refund(prompt_tokens);                // a prompt the engine refused
//   // the lease's end (destruction) ends the request's place in max_concurrent
//
// Where the gate stands. A request passes, in order: the key (401), the
// drain (503), parsing and planning (400; the prompt's tokens are known
// now), this gate (429 rate_limit_error), and then the engine, whose waiting
// queue bound (429 queue_full) and admission policy (policies/admission.hpp,
// run by its policy actor) decide when it runs, as they always did. The
// engine's policy decides *when* waiting work fits in KV memory; the built-in
// ones treat every client alike, and a policy of a program's own may share
// the cache among keys, as each request carries its key's name as its
// tenant (tenant_of). A key's limits decide *whether* a client may add work
// at all, and a refusal must be an answer before anything reaches the
// engine's queue. So the gate is in the HTTP layer, in front of the engine
// port, and the two compose without knowing of each other.
//
// The limits (http/api_key_file.hpp gives their syntax; left out: none)
// apply to completions, over HTTP and WebSocket, and to embeddings (their
// input tokens count as prompt tokens); the other routes that need
// a key (/v1/models, /tokenize, ...) run no engine work and do not count:
//   max_concurrent     requests in flight for the key. An HTTP completion
//                      request counts once whatever its n or prompts, from
//                      admission until its answer is complete or its client
//                      left; a WebSocket request likewise until its final event.
//   tokens_per_minute  prompt + generated tokens. A bucket holds one minute's
//                      worth and refills continuously. A request is admitted
//                      while the bucket is not empty; its prompt tokens are
//                      charged then and its generated tokens as they stream,
//                      so a long request may overdraw the bucket: the debt
//                      delays the key's next request (Retry-After says by how
//                      long). A running request is never cut off (max_tokens
//                      bounds it). Prompt tokens count because they cost the
//                      engine too (a long prompt is a long prefill): counting
//                      output alone would let huge prompts through for free.
//                      A prompt the engine refuses at once (its waiting queue
//                      full) cost it nothing: its tokens are given back.
// A refusal is a 429 with type rate_limit_error, code
// "concurrency_limit_exceeded" (Retry-After 1: a slot frees when one of the
// key's requests ends) or "tokens_per_minute_exceeded" (Retry-After: the
// seconds until the bucket is positive again, rounded up), and a message
// that names the key (by name, never the key) and the limit.
//
// Keys are compared in constant time in their content, against every key
// without stopping at a match. set_keys() replaces the table at once; a key
// kept (the same key string) keeps its requests in flight and its bucket's
// level under its new name and limits; a removed key's later requests are
// refused (401), including new requests on a WebSocket opened with it (even
// if a later reload brings the key back: that socket must connect again),
// while its running requests go on.
//
// Thread-safety: every method from any thread. A lease is used by one
// session at a time (it is movable, not shared).
#pragma once

#include <chrono>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "http/api_key_file.hpp"
#include "http/api_types.hpp"
#include "http/refusal_counters.hpp"

namespace conveyor::http {

struct KeyAccount;                           // one key's limits and usage (key_gate.cpp)
using KeyRef = std::shared_ptr<KeyAccount>;  // null: the server needs no key

// The engine's name for a client's session (session_id) under `key`:
// sessions belong to the key that made them, so another key can neither
// continue nor release one of the same name. "" stays "" (no session); with
// no key the name is the client's.
std::string scoped_session(const KeyRef& key, std::string_view session);

// The engine's tenant for a request under `key` (GenerateRequest::tenant,
// which admission policies may share the KV cache by): the key's name, ""
// when no key is needed. A reload that renames a key renames its tenant for
// later requests.
std::string tenant_of(const KeyRef& key);

// A request's place under its key's limits, held until the request ends.
class KeyLease {
 public:
  KeyLease() = default;  // no key, no limits
  explicit KeyLease(KeyRef account) : account_(std::move(account)) {}
  ~KeyLease() { release(); }
  KeyLease(KeyLease&& other) noexcept : account_(std::move(other.account_)) {}
  KeyLease& operator=(KeyLease&& other) noexcept;
  KeyLease(const KeyLease&) = delete;
  KeyLease& operator=(const KeyLease&) = delete;

  // Spends `tokens` from the key's tokens per minute (generated tokens as they come).
  void charge(int64_t tokens);
  // Gives back `tokens` charged for work the engine then refused to do (a
  // prompt it refused when it was submitted: StreamEvent::refused).
  void refund(int64_t tokens);
  // Ends the request's place now (also done by the destructor).
  void release();

 private:
  KeyRef account_;
};

struct KeyRefusal {
  ApiError error;               // 429 rate_limit_error; 401 for a key removed by a reload
  int retry_after_seconds = 0;  // 0: no Retry-After
  std::optional<Refusal> counted;  // the /metrics reason, when it is a limit
};

class KeyGate {
 public:
  using Clock = std::chrono::steady_clock;

  KeyGate() = default;  // no keys: every request passes, without limits
  KeyGate(const KeyGate&) = delete;
  KeyGate& operator=(const KeyGate&) = delete;

  // The keys from now on (see the top of the file); empty: none needed.
  void set_keys(const std::vector<ApiKeySpec>& keys, Clock::time_point now = Clock::now());
  size_t size() const;

  struct Identity {
    bool ok = false;  // false: answer 401
    KeyRef key;       // the key that matched; null when no key is needed
  };
  // `authorization` is the Authorization header's value ("Bearer KEY").
  Identity authenticate(std::string_view authorization) const;

  // A request of `prompt_tokens` under `key`'s limits: its lease, or why not.
  std::variant<KeyLease, KeyRefusal> admit(const KeyRef& key, int64_t prompt_tokens,
                                           Clock::time_point now = Clock::now()) const;

 private:
  mutable std::mutex mutex_;
  std::shared_ptr<const std::vector<KeyRef>> keys_ = std::make_shared<std::vector<KeyRef>>();
};

}  // namespace conveyor::http
