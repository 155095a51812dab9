#include "http/responses_continuation.hpp"

#include <string>

namespace conveyor::http {
namespace {

// What a token stands for in the comparison: its bytes, or for a control
// token (which has none) a marker that names it, so that two different
// control tokens never compare equal. 0xFF, which no UTF-8 text holds,
// opens the marker.
void append_key(const Tokenizer& tokenizer, int32_t id, std::string& out) {
  const std::string bytes = tokenizer.token_bytes(id);
  if (!bytes.empty()) {
    out += bytes;
    return;
  }
  out += '\xff';
  out += std::to_string(id);
  out += '\xff';
}

}  // namespace

std::optional<std::vector<int32_t>> continue_prompt(const Tokenizer& tokenizer, std::span<const int32_t> kept,
                                                    std::span<const int32_t> prompt) {
  // Both sequences' texts grow token by token, the shorter first; `same` is
  // how much of them is known equal, and each point where both end a token
  // with equal texts is a place to splice.
  std::string a, b;
  size_t i = 0, j = 0, same = 0;
  size_t splice_kept = 0, splice_prompt = 0;
  while (true) {
    const size_t common = std::min(a.size(), b.size());
    if (a.compare(same, common - same, b, same, common - same) != 0) break;
    same = common;
    if (a.size() == b.size()) {
      splice_kept = i;
      splice_prompt = j;
      if (i == kept.size() || j == prompt.size()) break;
      append_key(tokenizer, kept[i++], a);
      append_key(tokenizer, prompt[j++], b);
    } else if (a.size() < b.size()) {
      if (i == kept.size()) break;
      append_key(tokenizer, kept[i++], a);
    } else {
      if (j == prompt.size()) break;
      append_key(tokenizer, prompt[j++], b);
    }
  }
  // Nothing to gain when no kept token is used or the prompt ids agree anyway.
  if (splice_prompt == prompt.size() || std::equal(kept.begin(), kept.begin() + std::ptrdiff_t(splice_kept),
                                                   prompt.begin(), prompt.begin() + std::ptrdiff_t(splice_prompt)))
    return std::nullopt;
  std::vector<int32_t> out(kept.begin(), kept.begin() + std::ptrdiff_t(splice_kept));
  out.insert(out.end(), prompt.begin() + std::ptrdiff_t(splice_prompt), prompt.end());
  return out;
}

}  // namespace conveyor::http
