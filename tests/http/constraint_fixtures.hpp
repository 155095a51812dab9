// What the constraint compiler's and the planning lanes' tests share: a
// grammar binder over the byte tokenizer and a regex constraint.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "engine/grammar_binder.hpp"
#include "http/api_types.hpp"
#include "model/formats/dummy.hpp"

namespace conveyor::http::testing {

inline std::shared_ptr<GrammarBinder> binder() {
  std::shared_ptr<const Tokenizer> bytes = make_byte_tokenizer();
  return std::make_shared<GrammarBinder>(bytes, std::vector<int32_t>{bytes->eos_id()});
}

inline OutputConstraint regex(std::string pattern) {
  OutputConstraint c;
  c.kind = OutputConstraint::Kind::regex;
  c.source = std::move(pattern);
  c.field = "structured_outputs";
  return c;
}

}  // namespace conveyor::http::testing
