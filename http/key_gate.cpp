#include "http/key_gate.hpp"

#include <cmath>
#include <cstdio>
#include <random>

#include "http/routes.hpp"
#include "http/token_bucket.hpp"

namespace conveyor::http {

struct KeyAccount {
  explicit KeyAccount(std::string k) : key(std::move(k)), scope(random_scope()) {}
  const std::string key;
  // Names this key's sessions (scoped_session): random, so that it says
  // nothing of the key, and kept while the key is (reloads keep accounts).
  const std::string scope;

  static std::string random_scope() {
    std::random_device device;
    char buf[24];
    std::snprintf(buf, sizeof buf, "%08x%08x", device(), device());
    return buf;
  }

  std::mutex mutex;  // guards everything below
  std::string name;
  int64_t max_concurrent = 0;     // 0: no limit
  int64_t tokens_per_minute = 0;  // 0: no limit
  int64_t in_flight = 0;
  std::optional<TokenBucket> bucket;  // set when tokens_per_minute is
  bool revoked = false;               // removed by a reload

  // Under `mutex`.
  void configure(const ApiKeySpec& spec, KeyGate::Clock::time_point now) {
    name = spec.name;
    max_concurrent = spec.max_concurrent;
    tokens_per_minute = spec.tokens_per_minute;
    if (tokens_per_minute == 0) {
      bucket.reset();
    } else if (bucket) {
      bucket->reconfigure(double(tokens_per_minute), double(tokens_per_minute) / 60.0, now);
    } else {
      bucket.emplace(double(tokens_per_minute), double(tokens_per_minute) / 60.0, now);
    }
  }
};

std::string scoped_session(const KeyRef& key, std::string_view session) {
  if (session.empty() || !key) return std::string(session);
  return "key:" + key->scope + "/" + std::string(session);
}

std::string tenant_of(const KeyRef& key) {
  if (!key) return {};
  std::lock_guard lock(key->mutex);
  return key->name;
}

// ---- KeyLease ------------------------------------------------------------------------

KeyLease& KeyLease::operator=(KeyLease&& other) noexcept {
  if (this != &other) {
    release();
    account_ = std::move(other.account_);
  }
  return *this;
}

void KeyLease::charge(int64_t tokens) {
  if (!account_ || tokens <= 0) return;
  std::lock_guard lock(account_->mutex);
  if (account_->bucket) account_->bucket->charge(double(tokens), KeyGate::Clock::now());
}

void KeyLease::refund(int64_t tokens) {
  if (!account_ || tokens <= 0) return;
  std::lock_guard lock(account_->mutex);
  if (account_->bucket) account_->bucket->refund(double(tokens), KeyGate::Clock::now());
}

void KeyLease::release() {
  if (!account_) return;
  {
    std::lock_guard lock(account_->mutex);
    if (account_->in_flight > 0) --account_->in_flight;
  }
  account_.reset();
}

// ---- KeyGate -------------------------------------------------------------------------

void KeyGate::set_keys(const std::vector<ApiKeySpec>& specs, Clock::time_point now) {
  std::lock_guard lock(mutex_);
  auto next = std::make_shared<std::vector<KeyRef>>();
  std::vector<bool> kept(keys_->size(), false);
  for (const ApiKeySpec& spec : specs) {
    KeyRef account;
    for (size_t i = 0; i < keys_->size(); ++i) {
      if ((*keys_)[i]->key == spec.key) {
        account = (*keys_)[i];
        kept[i] = true;
        break;
      }
    }
    if (!account) account = std::make_shared<KeyAccount>(spec.key);
    std::lock_guard account_lock(account->mutex);
    account->configure(spec, now);
    account->revoked = false;
    next->push_back(std::move(account));
  }
  for (size_t i = 0; i < keys_->size(); ++i) {
    if (kept[i]) continue;
    std::lock_guard account_lock((*keys_)[i]->mutex);
    (*keys_)[i]->revoked = true;
  }
  keys_ = std::move(next);
}

size_t KeyGate::size() const {
  std::lock_guard lock(mutex_);
  return keys_->size();
}

KeyGate::Identity KeyGate::authenticate(std::string_view authorization) const {
  std::shared_ptr<const std::vector<KeyRef>> keys;
  {
    std::lock_guard lock(mutex_);
    keys = keys_;
  }
  if (keys->empty()) return Identity{true, nullptr};
  const auto given = bearer_token(authorization);
  if (!given) return Identity{};
  Identity who;
  for (const KeyRef& account : *keys) {  // every key, so the time does not say which matched
    if (constant_time_equal(*given, account->key)) {
      who.ok = true;
      who.key = account;
    }
  }
  return who;
}

namespace {

std::string quoted(const std::string& name) { return "'" + name + "'"; }

}  // namespace

std::variant<KeyLease, KeyRefusal> KeyGate::admit(const KeyRef& key, int64_t prompt_tokens,
                                                  Clock::time_point now) const {
  if (!key) return KeyLease();
  std::lock_guard lock(key->mutex);
  if (key->revoked)
    return KeyRefusal{ApiError{401, "the API key was removed from the server's keys", "authentication_error", {},
                               "invalid_api_key"},
                      0, std::nullopt};
  if (key->max_concurrent > 0 && key->in_flight >= key->max_concurrent) {
    return KeyRefusal{ApiError{429,
                               "API key " + quoted(key->name) + " has " + std::to_string(key->in_flight) +
                                   " requests in flight, its max_concurrent limit; retry when one ends",
                               "rate_limit_error", {}, "concurrency_limit_exceeded"},
                      1, Refusal::concurrency};
  }
  if (key->bucket && key->bucket->level(now) <= 0) {
    const double wait = key->bucket->seconds_until(1.0, now);
    const int retry = std::max(1, int(std::ceil(wait)));
    return KeyRefusal{ApiError{429,
                               "API key " + quoted(key->name) + " used its tokens_per_minute limit (" +
                                   std::to_string(key->tokens_per_minute) +
                                   " prompt and generated tokens per minute); retry in " + std::to_string(retry) +
                                   " s",
                               "rate_limit_error", {}, "tokens_per_minute_exceeded"},
                      retry, Refusal::rate_limit};
  }
  if (key->bucket) key->bucket->charge(double(prompt_tokens), now);
  ++key->in_flight;
  return KeyLease(key);
}

}  // namespace conveyor::http
