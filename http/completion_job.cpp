#include "http/completion_job.hpp"

#include <algorithm>
#include <cmath>

#include "http/json_detail.hpp"
#include "http/prompt_output_json.hpp"

namespace conveyor::http {
namespace {

namespace json = boost::json;

// JSON has no infinities; a log-probability that underflowed is shown as very unlikely.
double finite(float logprob) { return std::isfinite(logprob) ? double(logprob) : -9999.0; }

json::array byte_values(const std::string& bytes) {
  json::array out;
  for (unsigned char c : bytes) out.emplace_back(int(c));
  return out;
}

// Chat format: {"content": [{"token", "logprob", "bytes", "top_logprobs": [...]}]}.
json::value chat_logprobs(const Tokenizer* tok, std::span<const SampleResult> results) {
  json::array content;
  for (const SampleResult& r : results) {
    json::object entry;
    entry["token"] = detail::token_text(tok, r.token);
    entry["logprob"] = finite(r.logprob);
    entry["bytes"] = byte_values(detail::token_bytes(tok, r.token));
    json::array top;
    for (const TokenLogprob& alt : r.top) {
      top.push_back(json::object{{"token", detail::token_text(tok, alt.token)},
                                 {"logprob", finite(alt.logprob)},
                                 {"bytes", byte_values(detail::token_bytes(tok, alt.token))}});
    }
    entry["top_logprobs"] = std::move(top);
    content.push_back(std::move(entry));
  }
  return json::object{{"content", std::move(content)}};
}

// An echoed prompt whose tokens lead the completions logprobs.
struct EchoedPrompt {
  std::span<const int32_t> ids;
  std::span<const PromptLogprob> scores;
  int32_t top = 0;
  std::string_view text;  // as the answer shows it
};

// Legacy completions format: parallel lists, text_offset counted in
// characters of the choice's text (the echoed prompt's first).
json::value completion_logprobs(const Tokenizer* tok, std::span<const SampleResult> results,
                                size_t& text_offset, const EchoedPrompt* prompt = nullptr) {
  detail::LogprobLists lists;
  if (prompt != nullptr)
    detail::append_prompt_logprobs(tok, prompt->ids, prompt->scores, prompt->top, prompt->text, lists, text_offset);
  auto& [tokens, token_logprobs, top_logprobs, offsets] = lists;
  for (const SampleResult& r : results) {
    tokens.emplace_back(detail::token_text(tok, r.token));
    token_logprobs.emplace_back(finite(r.logprob));
    json::object top;
    for (const TokenLogprob& alt : r.top) top[detail::token_text(tok, alt.token)] = finite(alt.logprob);
    top_logprobs.push_back(std::move(top));
    offsets.emplace_back(detail::next_text_offset(detail::token_bytes(tok, r.token), text_offset));
  }
  return json::object{{"tokens", std::move(tokens)},
                      {"token_logprobs", std::move(token_logprobs)},
                      {"top_logprobs", std::move(top_logprobs)},
                      {"text_offset", std::move(offsets)}};
}

// echo with max_tokens 0: the one token the engine sampled is not part of the
// answer; the choice ends by its length, 0.
StreamEvent without_generated(const StreamEvent& e) {
  StreamEvent out = e;
  out.text.clear();
  out.token_ids.clear();
  out.logprobs.clear();
  out.completion_tokens = 0;
  if (out.finish == FinishReason::stop) out.finish = FinishReason::length;
  return out;
}

json::value finish_value(FinishReason r, bool called = false) {
  return r == FinishReason::none ? json::value(nullptr) : json::value(ToolCallChoice::finish_reason(called, r));
}

}  // namespace

CompletionJob::CompletionJob(JobSpec spec) : spec_(std::move(spec)) {
  choices_.resize(spec_.prompts.size() * size_t(spec_.n));
}

void CompletionJob::append_tokens(Choice& c, const StreamEvent& e) {
  const bool streaming = spec_.mode != OutputMode::body;
  if (streaming) {
    c.token_ids.clear();
    c.logprobs.clear();
  }
  c.received_tokens += int32_t(e.token_ids.size());
  c.token_ids.insert(c.token_ids.end(), e.token_ids.begin(), e.token_ids.end());
  if (spec_.logprobs < 0) return;
  // The engine may leave out the entry of a token it sampled with certainty
  // (log-probability 0): keep the lists parallel to the token ids.
  size_t next = 0;
  for (int32_t token : e.token_ids) {
    if (next < e.logprobs.size() && e.logprobs[next].token == token) {
      c.logprobs.push_back(e.logprobs[next++]);
    } else {
      c.logprobs.push_back(SampleResult{token, 0.0f, {}});
    }
  }
}

void CompletionJob::on_event(int32_t index, const StreamEvent& event, std::vector<std::string>& out) {
  if (done_ || index < 0 || index >= num_choices()) return;
  Choice& c = choices_[size_t(index)];
  if (c.finish != FinishReason::none) return;
  if (event.finish == FinishReason::error) {
    fail(from_engine_error(event.error_code, event.message), out);
    return;
  }
  std::optional<StreamEvent> trimmed;
  if (spec_.prompt.score_only) trimmed = without_generated(event);
  const StreamEvent& e = trimmed ? *trimmed : event;
  if (!e.prompt_logprobs.empty()) c.prompt_scores = e.prompt_logprobs;
  // Streaming with echo: the prompt's text (and logprobs) open the choice's first chunk.
  const size_t prompt_index = size_t(index / spec_.n);
  const bool echo_now = spec_.prompt.echo && !c.started && spec_.mode != OutputMode::body;
  std::string text = echo_now ? spec_.prompt.texts[prompt_index] + e.text : e.text;
  append_tokens(c, e);
  if (e.last()) {
    c.finish = e.finish;
    if (e.finish == FinishReason::cancelled) c.cancel_reason = cancel_reason_;
    c.completion_tokens = std::max(e.completion_tokens, c.received_tokens);
    c.cached_prompt_tokens = e.cached_prompt_tokens;
    ++finished_;
  }
  if (spec_.mode == OutputMode::body) {
    c.text += text;
    if (finished_ == num_choices()) done_ = true;
    return;
  }
  const bool extras = spec_.return_token_ids || spec_.logprobs >= 0;
  const bool websocket = spec_.mode == OutputMode::websocket;
  json::array tool_calls;  // delta.tool_calls: what the text held of calls
  if (spec_.tool_calls) {
    if (!c.tools) c.tools.emplace(*spec_.tool_calls);
    text = c.tools->read(text, e.last() ? e.finish : FinishReason::none, tool_calls);
  }
  if (!text.empty() || !tool_calls.empty() || (extras && !e.token_ids.empty()) || (e.last() && !websocket)) {
    const Tokenizer* tok = spec_.tokenizer.get();
    json::object choice;
    choice["index"] = index;
    if (spec_.chat && !websocket) {
      json::object delta;
      if (!c.started) delta["role"] = "assistant";
      // OpenAI's first chunk of a call says content null, not "".
      if (!text.empty()) delta["content"] = text;
      else if (!c.started) delta["content"] = tool_calls.empty() ? json::value("") : json::value(nullptr);
      if (!tool_calls.empty()) delta["tool_calls"] = std::move(tool_calls);
      choice["delta"] = std::move(delta);
    } else {
      choice["text"] = text;
      if (!tool_calls.empty()) choice["tool_calls"] = std::move(tool_calls);
    }
    if (spec_.logprobs >= 0) {
      const EchoedPrompt prompt{spec_.prompts[prompt_index], c.prompt_scores, spec_.logprobs,
                                spec_.prompt.echo ? std::string_view(spec_.prompt.texts[prompt_index]) : std::string_view()};
      choice["logprobs"] = spec_.chat ? chat_logprobs(tok, c.logprobs)
                                      : completion_logprobs(tok, c.logprobs, c.text_offset, echo_now ? &prompt : nullptr);
    } else if (!websocket) {
      choice["logprobs"] = nullptr;
    }
    if (!websocket || e.last()) choice["finish_reason"] = finish_value(e.finish, c.tools && c.tools->called());
    if (e.last() && !websocket && !c.cancel_reason.empty()) choice["cancel_reason"] = c.cancel_reason;
    if (spec_.return_token_ids) {
      choice["token_ids"] = detail::ids_array(c.token_ids);
      if (!c.started)
        choice["prompt_token_ids"] = detail::ids_array(spec_.prompts[size_t(index / spec_.n)]);
    }
    c.started = true;
    emitted_ = true;
    if (websocket) {
      choice["type"] = "delta";
      choice["id"] = detail::client_id_value(spec_.client_id, spec_.client_id_is_number);
      out.push_back(json::serialize(choice));
    } else {
      json::object chunk{{"id", spec_.response_id},
                         {"object", spec_.chat ? "chat.completion.chunk" : "text_completion"},
                         {"created", spec_.created},
                         {"model", spec_.model},
                         {"choices", json::array{std::move(choice)}}};
      if (spec_.include_usage) chunk["usage"] = nullptr;
      out.push_back(json::serialize(chunk));
    }
  }
  if (finished_ == num_choices()) finish_stream(out);
}

namespace {

json::object usage_object(const std::vector<std::vector<int32_t>>& prompts, int32_t completion,
                          int32_t cached) {
  int64_t prompt = 0;
  for (const auto& p : prompts) prompt += int64_t(p.size());
  return json::object{{"prompt_tokens", prompt},
                      {"completion_tokens", completion},
                      {"total_tokens", prompt + completion},
                      {"prompt_tokens_details", json::object{{"cached_tokens", cached}}}};
}

}  // namespace

void CompletionJob::finish_stream(std::vector<std::string>& out) {
  done_ = true;
  int32_t completion = 0, cached = 0;
  for (size_t i = 0; i < choices_.size(); ++i) {
    // A choice an error ended has no final count: what it delivered.
    completion += std::max(choices_[i].completion_tokens, choices_[i].received_tokens);
    if (i % size_t(spec_.n) == 0) cached += choices_[i].cached_prompt_tokens;  // once per prompt
  }
  json::object usage = usage_object(spec_.prompts, completion, cached);
  if (spec_.mode == OutputMode::sse) {
    if (spec_.include_usage) {
      out.push_back(json::serialize(json::object{
          {"id", spec_.response_id},
          {"object", spec_.chat ? "chat.completion.chunk" : "text_completion"},
          {"created", spec_.created},
          {"model", spec_.model},
          {"choices", json::array{}},
          {"usage", std::move(usage)}}));
    }
    out.push_back("[DONE]");
    return;
  }
  // WebSocket: one final event. The request's reason: error, else cancelled
  // if any choice was, else length if any ran out, else stop.
  FinishReason overall = FinishReason::stop;
  bool any_called = false;  // a choice called tools: "tool_calls" in place of stop
  json::array per_choice;
  for (size_t i = 0; i < choices_.size(); ++i) {
    FinishReason r = choices_[i].finish == FinishReason::none ? FinishReason::cancelled : choices_[i].finish;
    if (r == FinishReason::cancelled || (r == FinishReason::length && overall == FinishReason::stop))
      overall = r;
    const bool called = choices_[i].tools && choices_[i].tools->called();
    any_called = any_called || called;
    per_choice.push_back(json::object{{"index", i}, {"finish_reason", ToolCallChoice::finish_reason(called, r)}});
  }
  json::object event{{"type", "final"},
                     {"id", detail::client_id_value(spec_.client_id, spec_.client_id_is_number)},
                     {"finish_reason", stream_error_ ? "error" : ToolCallChoice::finish_reason(any_called, overall)},
                     {"usage", std::move(usage)}};
  if (choices_.size() > 1) event["choices"] = std::move(per_choice);
  if (stream_error_) event["error"] = detail::error_object(*stream_error_)["error"];
  for (const Choice& c : choices_) {
    if (c.cancel_reason.empty()) continue;
    event["cancel_reason"] = c.cancel_reason;
    break;
  }
  out.push_back(json::serialize(event));
}

void CompletionJob::fail(const ApiError& error, std::vector<std::string>& out) {
  if (done_) return;
  error_ = error;
  switch (spec_.mode) {
    case OutputMode::body:
      done_ = true;
      failure_ = error;
      return;
    case OutputMode::sse:
      done_ = true;
      if (!emitted_) {
        failure_ = error;
        return;
      }
      out.push_back(json::serialize(detail::error_object(error)));
      out.push_back("[DONE]");
      return;
    case OutputMode::websocket:
      stream_error_ = error;
      finish_stream(out);
      return;
  }
}

void CompletionJob::abort(const ApiError& why, std::vector<std::string>& out) { fail(why, out); }

std::string CompletionJob::body() const {
  const Tokenizer* tok = spec_.tokenizer.get();
  json::array choices;
  int32_t completion = 0, cached = 0;
  for (size_t i = 0; i < choices_.size(); ++i) {
    const Choice& c = choices_[i];
    completion += c.completion_tokens;
    if (i % size_t(spec_.n) == 0) cached += c.cached_prompt_tokens;
    json::object choice;
    choice["index"] = i;
    bool called = false;
    if (spec_.chat && spec_.tool_calls) {
      json::object message = ToolCallChoice(*spec_.tool_calls).message(c.text, c.finish);
      called = message.contains("tool_calls");
      choice["message"] = std::move(message);
    } else if (spec_.chat) {
      choice["message"] = json::object{{"role", "assistant"}, {"content", c.text}};
    } else {
      choice["text"] = spec_.prompt.echo ? spec_.prompt.texts[i / size_t(spec_.n)] + c.text : c.text;
    }
    if (spec_.logprobs >= 0) {
      size_t offset = 0;
      const EchoedPrompt prompt{spec_.prompts[i / size_t(spec_.n)], c.prompt_scores, spec_.logprobs,
                                spec_.prompt.echo ? std::string_view(spec_.prompt.texts[i / size_t(spec_.n)])
                                                  : std::string_view()};
      choice["logprobs"] = spec_.chat ? chat_logprobs(tok, c.logprobs)
                                      : completion_logprobs(tok, c.logprobs, offset,
                                                            spec_.prompt.echo ? &prompt : nullptr);
    } else {
      choice["logprobs"] = nullptr;
    }
    if (!spec_.chat && spec_.prompt.prompt_logprobs >= 0)
      choice["prompt_logprobs"] = detail::prompt_logprobs_json(tok, c.prompt_scores, spec_.prompt.prompt_logprobs);
    choice["finish_reason"] = finish_value(c.finish, called);
    if (!c.cancel_reason.empty()) choice["cancel_reason"] = c.cancel_reason;
    if (spec_.return_token_ids) {
      choice["token_ids"] = detail::ids_array(c.token_ids);
      choice["prompt_token_ids"] = detail::ids_array(spec_.prompts[i / size_t(spec_.n)]);
    }
    choices.push_back(std::move(choice));
  }
  json::object doc{{"id", spec_.response_id},
                   {"object", spec_.chat ? "chat.completion" : "text_completion"},
                   {"created", spec_.created},
                   {"model", spec_.model},
                   {"choices", std::move(choices)},
                   {"usage", usage_object(spec_.prompts, completion, cached)}};
  if (spec_.return_token_ids && spec_.chat) doc["prompt_token_ids"] = detail::ids_array(spec_.prompts[0]);
  // vLLM puts a chat answer's prompt logprobs beside its choices (one prompt).
  if (spec_.chat && spec_.prompt.prompt_logprobs >= 0 && !choices_.empty())
    doc["prompt_logprobs"] =
        detail::prompt_logprobs_json(tok, choices_.front().prompt_scores, spec_.prompt.prompt_logprobs);
  return json::serialize(doc);
}

int64_t CompletionJob::prompt_tokens_of(int32_t index) const {
  const size_t p = spec_.n > 0 && index >= 0 ? size_t(index / spec_.n) : spec_.prompts.size();
  return p < spec_.prompts.size() ? int64_t(spec_.prompts[p].size()) : 0;
}

JobSummary CompletionJob::summary() const {
  JobSummary s;
  for (const auto& p : spec_.prompts) s.prompt_tokens += int64_t(p.size());
  bool length = false;
  for (const Choice& c : choices_) {
    s.completion_tokens += std::max(c.completion_tokens, c.received_tokens);
    if (c.finish == FinishReason::none || c.finish == FinishReason::cancelled) s.cancelled = true;
    if (c.finish == FinishReason::length) length = true;
  }
  s.error = error_;
  s.finish = error_         ? FinishReason::error
             : s.cancelled ? FinishReason::cancelled
             : length      ? FinishReason::length
                           : FinishReason::stop;
  return s;
}

}  // namespace conveyor::http
