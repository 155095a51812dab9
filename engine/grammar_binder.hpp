// Binds grammars to the served model's vocabulary: the engine side of
// constrained decoding. Owns the vocabulary's token index (built at the first
// grammar, so an engine that never sees one pays nothing) and compiles a
// GrammarConstraint that arrives as IR only (a request from a router to an
// engine node, or a program that built a grammar::Grammar and handed it to
// Engine::submit) into the form the sampler matches.
//
// Thread-safety: every method may be called from any thread; the index is
// built once (std::call_once) and shared.
#pragma once

#include <cstdint>
#include <memory>
#include <mutex>
#include <span>
#include <string_view>
#include <vector>

#include "base/status.hpp"
#include "model/sampling/sampler.hpp"
#include "model/tokenizer/tokenizer.hpp"

namespace conveyor::grammar {
class TokenIndex;
}

namespace conveyor {

class GrammarBinder {
 public:
  // `end_ids`: the tokens that end generation (the model's eos, eot, ...),
  // which grammars allow where their text may end. A null tokenizer binds
  // nothing (every bind() fails).
  GrammarBinder(std::shared_ptr<const Tokenizer> tokenizer, std::vector<int32_t> end_ids);
  ~GrammarBinder();

  // The index of the model's vocabulary; null without a tokenizer.
  std::shared_ptr<const grammar::TokenIndex> vocabulary();
  // Compiles `c.ir` when `c.compiled` is empty (nothing to do otherwise).
  Status bind(GrammarConstraint& c);
  // The id of the one token whose text is `text` (special tokens included,
  // as GBNF's <think> names them); -1 when it is none or several, or there
  // is no tokenizer.
  int32_t token_of(std::string_view text) const;

 private:
  std::shared_ptr<const Tokenizer> tokenizer_;
  std::vector<int32_t> end_ids_;
  std::once_flag once_;
  std::shared_ptr<const grammar::TokenIndex> index_;
};

}  // namespace conveyor
