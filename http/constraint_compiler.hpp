// From a request's constraint (OutputConstraint: a JSON schema, JSON mode, a
// regular expression, choices, a GBNF grammar) or a grammar built elsewhere
// (tool calls) to the GrammarConstraint the sampler follows: compiled once
// against the served model's vocabulary, then shared by every request that
// asks for the same thing.
//
// Compiling binds to the vocabulary through the engine's GrammarBinder
// (engine/grammar_binder.hpp), which builds the vocabulary's index at the
// first constraint: a server that never sees one pays nothing. Compiled
// grammars are kept in a small LRU cache keyed by what was asked (kind,
// strictness and source text), since agents send the same schema with every
// request. Their token masks fill in lazily as requests use them (a schema
// with bounded strings, each length a position of its own, can grow to tens
// of MiB on a 150k vocabulary, or hundreds with long bounds), so the cache is
// bounded by count and by the bytes of the masks and the DFA they are
// computed with (server option grammar_cache_max_bytes): past either, the
// least recently used grammars go (requests still running keep theirs).
//
// Errors are OpenAI-style 400s naming the request field the constraint came
// from and the compiler's message ("response_format: json_schema: keyword
// 'multipleOf' is not supported (at #/properties/age)"). Refusals are kept
// too, apart from the grammars (at most 64, and 4 MiB of keys and messages).
//
// A grammar the cache lacks takes milliseconds to seconds to compile. A
// server plans requests on a thread that must not wait for one, since every
// request behind it would (ServerState::plan): while a MissesDeferred lives
// on a thread, a miss on that thread is not compiled but fails (the caller
// plans the request again on a thread that may wait).
//
// Thread-safety: every method may be called from any thread.
#pragma once

#include <chrono>
#include <cstdint>
#include <functional>
#include <list>
#include <memory>
#include <mutex>
#include <span>
#include <string>
#include <string_view>
#include <unordered_map>
#include <variant>
#include <vector>

#include "base/status.hpp"
#include "grammar/grammar.hpp"
#include "http/api_types.hpp"
#include "engine/grammar_binder.hpp"
#include "model/sampling/sampler.hpp"

namespace conveyor::http {

using ConstraintResult = std::variant<GrammarConstraint, ApiError>;

class ConstraintCompiler {
 public:
  static constexpr size_t kDefaultCacheBytes = size_t(512) << 20;

  explicit ConstraintCompiler(std::shared_ptr<GrammarBinder> binder, size_t cache_capacity = 64,
                              size_t cache_bytes = kDefaultCacheBytes);

  // The request's constraint, compiled (kind none: an empty GrammarConstraint).
  ConstraintResult compile(const OutputConstraint& constraint);
  // A grammar built by `build` (called only on a cache miss), cached under
  // `key`; errors name `field`.
  ConstraintResult compile_grammar(const std::string& key,
                                   const std::function<Expected<grammar::Grammar>()>& build,
                                   std::string_view field);

  // What the cache holds now, its bound, and the grammars compiled so far
  // and cache hits (for /metrics and tests; refusals are not counted).
  struct CacheFigures {
    size_t grammars = 0;
    size_t bytes = 0;
    size_t max_bytes = 0;
    uint64_t compiled = 0, hits = 0;
  };
  CacheFigures figures() const;
  // The bound on the masks' bytes (http::Server sets its option's).
  void set_cache_bytes(size_t bytes);

  // While one lives, compile() and compile_grammar() on its thread answer a
  // cache miss with an error (503, code "deferred") instead of compiling,
  // and deferred() turns true. Scopes nest: an inner scope's miss counts for
  // the outer ones too.
  class MissesDeferred {
   public:
    MissesDeferred();
    ~MissesDeferred();
    MissesDeferred(const MissesDeferred&) = delete;
    MissesDeferred& operator=(const MissesDeferred&) = delete;
    // Whether a miss was refused in this scope: what was planned in it is
    // incomplete.
    bool deferred() const { return deferred_; }
    // About how long compiling what was missed will take, judged by the
    // length of what was asked (a schema's text, a tool list; at most 2 s):
    // enough to let a small new schema go before large ones on the
    // compiling thread.
    std::chrono::nanoseconds expected_compile_time() const;

   private:
    friend class ConstraintCompiler;
    MissesDeferred* outer_;
    bool deferred_ = false;
    size_t missed_bytes_ = 0;  // the keys missed
  };

 private:
  // Under mutex_: drops the least recently used grammars while the cache
  // holds more than capacity_ or cache_bytes_ (the most recent too: one
  // larger than the bound is not kept; its requests hold it).
  void evict_locked();

  std::shared_ptr<GrammarBinder> binder_;
  size_t capacity_;
  size_t cache_bytes_;

  // Values by key, the most recently used first.
  template <class V>
  struct Lru {
    std::list<std::pair<std::string, V>> items;  // most recent first
    std::unordered_map<std::string, typename std::list<std::pair<std::string, V>>::iterator> by_key;

    // The value of `key`, made the most recent; null when absent.
    V* use(const std::string& key) {
      const auto it = by_key.find(key);
      if (it == by_key.end()) return nullptr;
      items.splice(items.begin(), items, it->second);
      return &items.front().second;
    }
    // `key`'s value, the most recent (replacing one there was).
    void put(const std::string& key, V value) {
      if (const auto it = by_key.find(key); it != by_key.end()) items.erase(it->second);
      items.emplace_front(key, std::move(value));
      by_key[key] = items.begin();
    }
    void drop_oldest() {
      by_key.erase(items.back().first);
      items.pop_back();
    }
  };

  mutable std::mutex mutex_;  // guards the caches and counters
  Lru<GrammarConstraint> lru_;
  // The compilers' refusals (their messages), kept apart so that an ask
  // refused once is answered again at once, on a planning thread
  // (ServerState::plan), not after the compiles queued before it; bounded by
  // count and bytes of their own, so refusals never push grammars out.
  Lru<std::string> refusals_;
  uint64_t compiled_ = 0, hits_ = 0;
};

}  // namespace conveyor::http
