#include <algorithm>
#include <cmath>
#include <string>

#include "http/json_detail.hpp"
#include "http/prompt_output_json.hpp"
#include "model/tokenizer/utf8.hpp"

namespace conveyor::http::detail {
namespace {

namespace json = boost::json;

// JSON has no infinities; a log-probability that underflowed is shown as very unlikely.
double finite(float logprob) { return std::isfinite(logprob) ? double(logprob) : -9999.0; }

json::object logprob_entry(const Tokenizer* tok, int32_t token, float logprob, int32_t rank) {
  return json::object{{"logprob", finite(logprob)}, {"rank", rank}, {"decoded_token", token_text(tok, token)}};
}

}  // namespace

json::array prompt_logprobs_json(const Tokenizer* tok, std::span<const PromptLogprob> scores, int32_t top) {
  json::array out;
  out.reserve(scores.size() + 1);
  out.emplace_back(nullptr);
  for (const PromptLogprob& s : scores) {
    json::object position;
    position[std::to_string(s.token)] = logprob_entry(tok, s.token, s.logprob, s.rank);
    const size_t shown = std::min(s.top.size(), size_t(std::max(top, 0)));
    for (size_t i = 0; i < shown; ++i) {
      const TokenLogprob& alt = s.top[i];
      const std::string key = std::to_string(alt.token);
      if (!position.contains(key)) position[key] = logprob_entry(tok, alt.token, alt.logprob, int32_t(i) + 1);
    }
    out.push_back(std::move(position));
  }
  return out;
}

void append_prompt_logprobs(const Tokenizer* tok, std::span<const int32_t> prompt,
                            std::span<const PromptLogprob> scores, int32_t top, std::string_view text,
                            LogprobLists& out, size_t& offset) {
  size_t total = 0;
  for (int32_t id : prompt) total += token_bytes(tok, id).size();
  const size_t unshown = total > text.size() ? total - text.size() : 0;
  size_t at = 0;                  // bytes of the prompt's tokens so far
  size_t counted = 0, chars = 0;   // bytes of `text` counted so far, and their characters
  for (size_t i = 0; i < prompt.size(); ++i) {
    out.tokens.emplace_back(token_text(tok, prompt[i]));
    const size_t byte = std::min(at > unshown ? at - unshown : 0, text.size());
    chars += utf8::count_chars(text.substr(counted, byte - counted));
    counted = byte;
    const bool inside = chars > 0 && byte < text.size() && utf8::is_continuation(text[byte]);
    out.text_offset.emplace_back(offset + chars - size_t(inside));
    at += token_bytes(tok, prompt[i]).size();
    // Token i is scored by scores[i - 1]; the first has no position before it.
    if (i == 0 || i > scores.size()) {
      out.token_logprobs.emplace_back(nullptr);
      out.top_logprobs.emplace_back(nullptr);
      continue;
    }
    const PromptLogprob& s = scores[i - 1];
    out.token_logprobs.emplace_back(finite(s.logprob));
    json::object alternatives;
    const size_t shown = std::min(s.top.size(), size_t(std::max(top, 0)));
    for (size_t k = 0; k < shown; ++k) alternatives[token_text(tok, s.top[k].token)] = finite(s.top[k].logprob);
    out.top_logprobs.push_back(std::move(alternatives));
  }
  offset += utf8::count_chars(text);
}

size_t next_text_offset(std::string_view bytes, size_t& chars) {
  const size_t at = chars > 0 && !bytes.empty() && utf8::is_continuation(bytes[0]) ? chars - 1 : chars;
  chars += utf8::count_chars(bytes);
  return at;
}

}  // namespace conveyor::http::detail
