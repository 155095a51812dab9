#include "http/constraint_compiler.hpp"

#include <algorithm>
#include <optional>

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

// The refusals kept (ConstraintCompiler::refusals_): by count, and by the
// bytes of their keys (a schema may be a whole request body) and messages.
constexpr size_t kKeptRefusals = 64;
constexpr size_t kKeptRefusalBytes = size_t(4) << 20;

}  // namespace

ConstraintCompiler::MissesDeferred::MissesDeferred() : outer_(misses_deferred) { misses_deferred = this; }

ConstraintCompiler::MissesDeferred::~MissesDeferred() {
  misses_deferred = outer_;
  if (!outer_) return;
  outer_->deferred_ = outer_->deferred_ || deferred_;
  outer_->missed_bytes_ += missed_bytes_;
}

std::chrono::nanoseconds ConstraintCompiler::MissesDeferred::expected_compile_time() const {
  // Measured: 1 to 3 us a byte for small schemas (grammar_bench, build and
  // compile), 20 for objects of many bounded strings, the costly kind, and
  // 50 in a server decoding beside it (Qwen 2's file, 2 cores). Rather more:
  // a small schema passes large ones that waited less than their figure,
  // and one that waited longer goes first (an underestimate would turn the
  // queue back to first come, first served while they wait). At most 2 s:
  // size is not cost (a long enum compiles in milliseconds), and a large
  // schema is passed only by those that come within its figure.
  constexpr auto kPerByte = std::chrono::microseconds(100);
  constexpr size_t kMostBytes = std::chrono::seconds(2) / kPerByte;
  return kPerByte * int64_t(std::min(missed_bytes_, kMostBytes));
}

ConstraintCompiler::ConstraintCompiler(std::shared_ptr<GrammarBinder> binder, size_t cache_capacity,
                                       size_t cache_bytes)
    : binder_(std::move(binder)), capacity_(std::max<size_t>(cache_capacity, 1)), cache_bytes_(cache_bytes) {}

void ConstraintCompiler::evict_locked() {
  size_t bytes = 0;
  for (const auto& [key, c] : lru_.items) bytes += c.compiled->memory_bytes();
  // The newest too: a grammar whose masks alone pass the bound serves the
  // requests that hold it and is not kept.
  while (!lru_.items.empty() && (lru_.items.size() > capacity_ || bytes > cache_bytes_)) {
    bytes -= std::min(bytes, lru_.items.back().second.compiled->memory_bytes());
    lru_.drop_oldest();
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
  // text.format), so a kept refusal names the field of the request it answers.
  const auto refusal = [&param](const std::string& why) {
    return bad_request(why.starts_with(param + ": ") ? why : param + ": " + why, param);
  };
  {
    std::lock_guard lock(mutex_);
    if (const GrammarConstraint* found = lru_.use(key)) {
      // Masks grow while the cached grammars are used: their size is looked
      // at with every request, not only when a grammar comes in.
      ++hits_;
      GrammarConstraint hit = *found;
      evict_locked();
      return hit;
    }
    if (const std::string* why = refusals_.use(key)) return refusal(*why);
  }
  if (misses_deferred) {
    misses_deferred->deferred_ = true;
    misses_deferred->missed_bytes_ += key.size();
    return ApiError{503, param + ": the grammar is compiled on another thread", "server_error", param, "deferred"};
  }
  // Compiled outside the lock: two requests racing on a new key both compile,
  // and the second one's result replaces the first in the cache (equal anyway).
  std::optional<std::string> refused;  // the compilers' message
  GrammarConstraint result;
  if (auto ir = build(); !ir) {
    refused = ir.error().message;
  } else {
    result = GrammarConstraint{std::make_shared<const grammar::Grammar>(std::move(*ir)), nullptr};
    if (Status s = binder_->bind(result); !s) refused = s.error().message;
  }
  std::lock_guard lock(mutex_);
  if (refused) {
    refusals_.put(key, *refused);
    // A refusal's bytes: its key (held twice) and its message.
    const auto bytes_of = [](const auto& item) { return 2 * item.first.size() + item.second.size(); };
    size_t bytes = 0;
    for (const auto& item : refusals_.items) bytes += bytes_of(item);
    while (!refusals_.items.empty() && (refusals_.items.size() > kKeptRefusals || bytes > kKeptRefusalBytes)) {
      bytes -= bytes_of(refusals_.items.back());
      refusals_.drop_oldest();
    }
    return refusal(*refused);
  }
  ++compiled_;
  lru_.put(key, result);
  evict_locked();
  return result;
}

ConstraintCompiler::CacheFigures ConstraintCompiler::figures() const {
  std::lock_guard lock(mutex_);
  CacheFigures f;
  f.grammars = lru_.items.size();
  for (const auto& [key, c] : lru_.items) f.bytes += c.compiled->memory_bytes();
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
