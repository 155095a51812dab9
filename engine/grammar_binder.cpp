#include "engine/grammar_binder.hpp"

#include "grammar/matcher.hpp"
#include "grammar/vocabulary.hpp"
#include "model/sampling/grammar_vocabulary.hpp"

namespace conveyor {

GrammarBinder::GrammarBinder(std::shared_ptr<const Tokenizer> tokenizer, std::vector<int32_t> end_ids)
    : tokenizer_(std::move(tokenizer)), end_ids_(std::move(end_ids)) {}

GrammarBinder::~GrammarBinder() = default;

std::shared_ptr<const grammar::TokenIndex> GrammarBinder::vocabulary() {
  if (!tokenizer_) return nullptr;
  std::call_once(once_, [&] {
    std::vector<int32_t> ends = end_ids_;
    if (ends.empty() && tokenizer_->eos_id() >= 0) ends.push_back(tokenizer_->eos_id());
    index_ = grammar::index_vocabulary(vocabulary_bytes(*tokenizer_, ends));
  });
  return index_;
}

int32_t GrammarBinder::token_of(std::string_view text) const {
  if (!tokenizer_ || text.empty()) return -1;
  const std::vector<int32_t> ids =
      tokenizer_->encode(std::string(text), EncodeOptions{.add_bos = false, .parse_special = true});
  return ids.size() == 1 ? ids[0] : -1;
}

Status GrammarBinder::bind(GrammarConstraint& c) {
  if (c.compiled || !c.ir) return Status::ok();
  auto index = vocabulary();
  if (!index) return make_error(Errc::invalid_argument, "the model has no tokenizer, so its output cannot follow a grammar");
  auto compiled = grammar::compile(c.ir, std::move(index));  // shares the IR, no copy
  if (!compiled) return compiled.error();
  c.compiled = std::move(*compiled);
  return Status::ok();
}

}  // namespace conveyor
