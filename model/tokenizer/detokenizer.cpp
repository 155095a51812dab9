#include "model/tokenizer/detokenizer.hpp"

#include "model/tokenizer/utf8.hpp"

namespace conveyor {

IncrementalDetokenizer::IncrementalDetokenizer(const Tokenizer& tokenizer)
    : tokenizer_(&tokenizer) {}

std::string IncrementalDetokenizer::push(int32_t id) {
  pending_ += tokenizer_->token_bytes(id);
  std::string out;
  const size_t consumed = utf8::append_valid(pending_, /*final=*/false, out);
  pending_.erase(0, consumed);
  return out;
}

std::string IncrementalDetokenizer::flush() {
  std::string out;
  utf8::append_valid(pending_, /*final=*/true, out);
  pending_.clear();
  return out;
}

}  // namespace conveyor
