// One Responses API request as the client sees it (a ClientJob): the engine
// events of its one choice in, a response object out (one JSON body), or
// the streaming events of responses_events.hpp.
//
// Output items. Without function tools the text is one message item. With
// them (and tool_choice other than "none") the text is read by the model
// family's tool-call parser (tool_calls.hpp): while streaming, content goes
// to a message item and each call becomes a function_call item whose
// arguments stream as response.function_call_arguments.delta. A whole
// answer's items are built the same way (its stream's events are dropped),
// so they are the same items in the same order streamed or not; a call that
// max_output_tokens cut short is an incomplete function_call item.
//
// The end. stop: status completed; length: incomplete with
// incomplete_details.reason "max_output_tokens"; cancelled (its client went
// away): incomplete with reason "cancelled"; an engine error, or the drain's
// cancel (set_cancel_reason: code "shutting_down", 503): the HTTP status
// when nothing was sent yet, else response.failed (status failed, error
// {code, message}). Once it ended, a response with store true goes to the
// ResponseStore with its conversation (the one it continued, its input and
// its output as chat messages) in place of its in-progress entry; when the
// store does not keep it (the entry was deleted while it ran, or it is
// larger than the store), its final object says `store` false.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "http/client_job.hpp"
#include "http/response_store.hpp"
#include "http/responses_output.hpp"
#include "http/tool_call_format.hpp"

namespace conveyor::http {

class ToolCallStream;

struct ResponsesJobSpec {
  ResponseState response;  // id, created_at, model, echo; status in_progress
  bool stream = false;
  std::vector<int32_t> prompt;  // its token ids
  // Set when function calls are read from the output.
  std::optional<ToolCallFormat> tool_format;
  // What the store keeps (store == nullptr: the response is not stored).
  ResponseStore* store = nullptr;
  ResponseScope scope;
  std::vector<ChatMessage> conversation;  // before this response's output, instructions excluded
  std::string input_items_json;           // this request's input as OpenAI's items
  std::string session;                    // the engine session it runs under
};

class ResponsesJob final : public ClientJob {
 public:
  explicit ResponsesJob(ResponsesJobSpec spec);
  ~ResponsesJob() override;

  void on_event(int32_t index, const StreamEvent& event, std::vector<std::string>& out) override;
  void abort(const ApiError& why, std::vector<std::string>& out) override;
  void set_cancel_reason(std::string reason) override { cancel_reason_ = std::move(reason); }
  JobSummary summary() const override;
  bool done() const override { return done_; }
  const std::optional<ApiError>& failure() const override { return failure_; }
  std::string body() const override { return response_json(spec_.response); }
  bool streaming() const override { return spec_.stream; }
  int64_t prompt_tokens_of(int32_t) const override { return int64_t(spec_.prompt.size()); }
  std::string frame_events(const std::vector<std::string>& payloads) const override;

  const ResponseState& response() const { return spec_.response; }

 private:
  void start(std::vector<std::string>& out);
  void add_content(std::string_view text, std::vector<std::string>& out);
  void close_message(std::vector<std::string>& out);
  void finish(const StreamEvent& last, std::vector<std::string>& out);
  void fail(const ApiError& error, std::vector<std::string>& out);
  ApiError drain_error() const;  // the drain's cancel, as an error
  void store();

  ResponsesJobSpec spec_;
  std::unique_ptr<ToolCallStream> calls_;  // with tools
  int64_t sequence_ = 0;
  int32_t open_message_ = -1;              // the message item being written
  std::vector<int32_t> call_items_;        // call i's output index
  std::vector<int32_t> generated_;         // the answer's token ids
  FinishReason finish_ = FinishReason::none;
  bool started_ = false;
  bool placed_ = false;  // an in-progress entry is in the store
  bool done_ = false;
  std::optional<ApiError> failure_;
  std::optional<ApiError> error_;
  std::string cancel_reason_;
};

}  // namespace conveyor::http
