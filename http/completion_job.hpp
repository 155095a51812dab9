// One completion or chat request, as the client sees it: the engine events
// of all its choices (prompts x n) in, OpenAI-format JSON out.
//
// The job is plain state, without I/O: the session that owns it feeds it
// events on its own strand and sends what it returns. Three output modes:
//   body       nothing until every choice ended, then body() (one JSON document)
//   sse        one chunk per event (the session frames each as `data: ...\n\n`),
//              a usage chunk when include_usage, then "[DONE]"
//   websocket  delta events {"type": "delta", "id", "index", "text", ...} and one
//              final event {"type": "final", "id", "finish_reason", "usage", ...}
// When a choice fails before anything was sent, the job ends with failure()
// (the session answers with its HTTP status: 400, 429, 503); after output
// began, the failure is an error chunk (SSE) or the final event (WebSocket).
// Once done(), the session cancels the choices still running.
//
// A choice whose last event says `cancelled` after set_cancel_reason() (the
// server's drain ran out of time) carries the reason: SSE and body choices as
// "cancel_reason", the WebSocket final event likewise.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "engine/stream_event.hpp"
#include "http/api_types.hpp"
#include "http/client_job.hpp"
#include "http/prompt_output.hpp"
#include "http/tool_call_output.hpp"
#include "model/tokenizer/tokenizer.hpp"

namespace conveyor::http {

enum class OutputMode : uint8_t { body, sse, websocket };

struct JobSpec {
  OutputMode mode = OutputMode::body;
  bool chat = false;
  std::string response_id;  // "cmpl-..." or "chatcmpl-..."
  int64_t created = 0;      // unix seconds
  std::string model;        // the served name
  std::vector<std::vector<int32_t>> prompts;
  int32_t n = 1;            // choices per prompt: choice c belongs to prompt c / n
  int32_t logprobs = -1;    // -1: none
  bool include_usage = false;
  bool return_token_ids = false;
  std::shared_ptr<const Tokenizer> tokenizer;  // token strings for logprobs; may be null
  std::string client_id;    // websocket
  bool client_id_is_number = false;
  // Chat with tools: each choice's output is read for tool calls in this
  // format (tool_call_output.hpp).
  std::optional<ToolCallFormat> tool_calls;
  // echo and prompt_logprobs (http/prompt_output.hpp).
  PromptOutput prompt;
};

// A job of the HTTP session (client_job.hpp), and of a WebSocket request.
class CompletionJob final : public ClientJob {
 public:
  explicit CompletionJob(JobSpec spec);

  // Feeds one engine event of choice `index`; appends what to send now.
  void on_event(int32_t index, const StreamEvent& event, std::vector<std::string>& out) override;
  // Ends the job now (shutdown, output overflow) as if a choice had failed.
  void abort(const ApiError& why, std::vector<std::string>& out) override;
  // Choices that end cancelled from now on say why (see the top of the file).
  void set_cancel_reason(std::string reason) override { cancel_reason_ = std::move(reason); }
  JobSummary summary() const override;

  bool done() const override { return done_; }
  // Set when the job ended before any output: answer with this error.
  const std::optional<ApiError>& failure() const override { return failure_; }
  // Body mode, once done() without failure(): the whole response.
  std::string body() const override;
  bool streaming() const override { return spec_.mode == OutputMode::sse; }
  int32_t num_choices() const { return int32_t(choices_.size()); }
  const JobSpec& spec() const { return spec_; }
  // The length of the prompt that choice `index` samples.
  int64_t prompt_tokens_of(int32_t index) const override;

 private:
  struct Choice {
    std::string text;                   // body mode: everything; streaming: unused
    std::vector<int32_t> token_ids;     // body mode: everything; streaming: this event's
    std::vector<SampleResult> logprobs; // parallel to token_ids when logprobs were asked for
    size_t text_offset = 0;             // completions logprobs: characters of text so far
    FinishReason finish = FinishReason::none;
    int32_t completion_tokens = 0;
    int32_t received_tokens = 0;
    int32_t cached_prompt_tokens = 0;
    bool started = false;               // streaming: its first chunk went out
    std::string cancel_reason;          // set when it ended cancelled after set_cancel_reason
    std::optional<ToolCallChoice> tools;  // streaming with spec.tool_calls: its reader
    std::vector<PromptLogprob> prompt_scores;  // its prompt's, from its first event
  };

  void fail(const ApiError& error, std::vector<std::string>& out);
  void finish_stream(std::vector<std::string>& out);
  void append_tokens(Choice& c, const StreamEvent& e);

  JobSpec spec_;
  std::vector<Choice> choices_;
  int32_t finished_ = 0;
  bool emitted_ = false;  // some output went to the client
  bool done_ = false;
  std::optional<ApiError> failure_;
  std::optional<ApiError> stream_error_;  // websocket: the error of the final event
  std::optional<ApiError> error_;         // any mode: the error that ended the job
  std::string cancel_reason_;
};

}  // namespace conveyor::http
