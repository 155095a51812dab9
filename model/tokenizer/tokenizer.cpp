// What all tokenizers share: added tokens cut out of the text before the
// tokenizer's own encoding sees the stretches between them.
#include "model/tokenizer/tokenizer.hpp"

#include "model/tokenizer/added_tokens.hpp"

namespace conveyor {

Tokenizer::Tokenizer() = default;
Tokenizer::~Tokenizer() = default;

bool Tokenizer::is_special(int32_t id) const { return added_tokens_ != nullptr && added_tokens_->is_special(id); }

void Tokenizer::set_added_tokens(const Vocabulary& vocab) {
  auto tokens = std::make_shared<const tokenizer_detail::AddedTokens>(vocab);
  added_tokens_ = tokens->empty() ? nullptr : std::move(tokens);
}

std::vector<int32_t> Tokenizer::encode(std::string_view text, const EncodeOptions& options) const {
  std::vector<int32_t> out;
  if (options.add_bos && add_bos_ && bos_id_ >= 0) out.push_back(bos_id_);
  if (text.empty()) return out;
  if (added_tokens_ == nullptr) {
    encode_text(text, /*follows_token=*/true, out);
    return out;
  }
  bool follows_token = true;
  for (const auto& f : added_tokens_->partition(text, options.parse_special, options.verbatim)) {
    if (f.token >= 0) {
      out.push_back(f.token);
      follows_token = true;
    } else {
      encode_text(text.substr(f.begin, f.end - f.begin), follows_token, out);
      follows_token = false;
    }
  }
  return out;
}

}  // namespace conveyor
