#include "http/constraint_compiler.hpp"

#include <algorithm>

#include "grammar/choices.hpp"
#include "grammar/gbnf.hpp"
#include "grammar/json_schema.hpp"
#include "grammar/matcher.hpp"
#include "grammar/regex.hpp"

namespace conveyor::http {
namespace {

const char* kind_name(OutputConstraint::Kind kind) {
  switch (kind) {
    case OutputConstraint::Kind::none: return "none";
    case OutputConstraint::Kind::json_object: return "json_object";
    case OutputConstraint::Kind::json_schema: return "json_schema";
    case OutputConstraint::Kind::regex: return "regex";
    case OutputConstraint::Kind::choice: return "choice";
    case OutputConstraint::Kind::grammar: return "grammar";
  }
  return "?";
}

Expected<grammar::Grammar> build_grammar(const OutputConstraint& c, const GrammarBinder* binder) {
  grammar::JsonSchemaOptions options;
  options.strict = c.strict;
  switch (c.kind) {
    case OutputConstraint::Kind::json_object: return grammar::grammar_for_json_object(options);
    case OutputConstraint::Kind::json_schema: return grammar::grammar_from_json_schema(c.source, options);
    case OutputConstraint::Kind::regex: return grammar::grammar_from_regex(c.source);
    case OutputConstraint::Kind::choice: return grammar::grammar_from_choices(c.choices);
    case OutputConstraint::Kind::grammar:
      if (!binder) return grammar::grammar_from_gbnf(c.source);
      return grammar::grammar_from_gbnf(c.source, [binder](std::string_view text) { return binder->token_of(text); });
    case OutputConstraint::Kind::none: break;
  }
  return make_error(Errc::internal, "no constraint to compile");
}

// What identifies a constraint's grammar: two requests with equal keys get
// the same compiled grammar.
std::string cache_key(const OutputConstraint& c) {
  std::string key = kind_name(c.kind);
  key += c.strict ? "|strict|" : "|loose|";
  if (c.kind == OutputConstraint::Kind::choice) {
    for (const std::string& choice : c.choices) {
      key += std::to_string(choice.size());
      key += ':';
      key += choice;
    }
  } else {
    key += c.source;
  }
  return key;
}

thread_local ConstraintCompiler::MissesDeferred* misses_deferred = nullptr;

}  // namespace

ConstraintCompiler::MissesDeferred::MissesDeferred() : outer_(misses_deferred) { misses_deferred = this; }

ConstraintCompiler::MissesDeferred::~MissesDeferred() { misses_deferred = outer_; }

ConstraintCompiler::ConstraintCompiler(std::shared_ptr<GrammarBinder> binder, size_t cache_capacity,
                                       size_t cache_bytes)
    : binder_(std::move(binder)), capacity_(std::max<size_t>(cache_capacity, 1)), cache_bytes_(cache_bytes) {}

size_t ConstraintCompiler::Entry::bytes() const {
  return grammar.compiled ? grammar.compiled->memory_bytes() : refused.size();
}

void ConstraintCompiler::evict_locked() {
  size_t bytes = 0;
  for (const auto& [key, entry] : lru_) bytes += entry.bytes();
  // The newest too: a grammar whose masks alone pass the bound serves the
  // requests that hold it and is not kept.
  while (!lru_.empty() && (lru_.size() > capacity_ || bytes > cache_bytes_)) {
    bytes -= std::min(bytes, lru_.back().second.bytes());
    by_key_.erase(lru_.back().first);
    lru_.pop_back();
  }
}

ConstraintResult ConstraintCompiler::compile(const OutputConstraint& constraint) {
  if (constraint.kind == OutputConstraint::Kind::none) return GrammarConstraint{};
  return compile_grammar(cache_key(constraint), [&] { return build_grammar(constraint, binder_.get()); },
                         constraint.field);
}

ConstraintResult ConstraintCompiler::compile_grammar(const std::string& key,
                                                     const std::function<Expected<grammar::Grammar>()>& build,
                                                     std::string_view field) {
  const std::string param(field);
  // The compilers name their input ("json_schema: ..."): once is enough. The
  // field is not in the key (a schema is the same under response_format and
  // text.format), so it is added to a kept refusal when it is answered.
  const auto refusal = [&param](const std::string& why) {
    return bad_request(why.starts_with(param + ": ") ? why : param + ": " + why, param);
  };
  {
    std::lock_guard lock(mutex_);
    if (auto it = by_key_.find(key); it != by_key_.end()) {
      lru_.splice(lru_.begin(), lru_, it->second);
      ++hits_;
      const Entry hit = lru_.front().second;
      // Masks grow while the cached grammars are used: their size is looked
      // at with every request, not only when a grammar comes in.
      evict_locked();
      if (hit.grammar.compiled) return hit.grammar;
      return refusal(hit.refused);
    }
  }
  if (misses_deferred) {
    misses_deferred->deferred_ = true;
    return ApiError{503, param + ": the grammar is compiled on another thread", "server_error", param, "deferred"};
  }
  // Compiled outside the lock: two requests racing on a new key both compile,
  // and the second one's result replaces the first in the cache (equal anyway).
  Entry entry;
  auto ir = build();
  if (!ir) {
    entry.refused = ir.error().message;
  } else {
    entry.grammar = GrammarConstraint{std::make_shared<const grammar::Grammar>(std::move(*ir)), nullptr};
    if (Status s = binder_->bind(entry.grammar); !s) {
      entry.grammar = GrammarConstraint{};
      entry.refused = s.error().message;
    }
  }
  if (entry.refused.empty() && !entry.grammar.compiled) entry.refused = "the grammar could not be compiled";
  std::lock_guard lock(mutex_);
  if (entry.grammar.compiled) ++compiled_;
  if (auto it = by_key_.find(key); it != by_key_.end()) lru_.erase(it->second);
  lru_.emplace_front(key, entry);
  by_key_[key] = lru_.begin();
  evict_locked();
  if (entry.grammar.compiled) return entry.grammar;
  return refusal(entry.refused);
}

ConstraintCompiler::CacheFigures ConstraintCompiler::figures() const {
  std::lock_guard lock(mutex_);
  CacheFigures f;
  for (const auto& [key, entry] : lru_) {
    f.grammars += entry.grammar.compiled ? 1 : 0;
    f.bytes += entry.bytes();
  }
  f.max_bytes = cache_bytes_;
  f.compiled = compiled_;
  f.hits = hits_;
  return f;
}

void ConstraintCompiler::set_cache_bytes(size_t bytes) {
  std::lock_guard lock(mutex_);
  cache_bytes_ = bytes;
  evict_locked();
}

}  // namespace conveyor::http
