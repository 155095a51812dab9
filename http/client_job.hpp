// What an HTTP session runs for one generating request: the engine events of
// its choices in, the bytes of its answer out. CompletionJob (completions
// and chat, completion_job.hpp) and ResponsesJob (the Responses API,
// responses_job.hpp) are the two kinds; the session (http_session.cpp)
// drives either the same way: it feeds events on its strand, sends what they
// return, and once done() answers with failure() as an HTTP status, body()
// as one JSON document, or ends the event stream it has been writing.
//
// A job is plain state without I/O. Thread-safety: none (the session's strand).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "engine/stream_event.hpp"
#include "http/api_types.hpp"
#include "http/routes.hpp"

namespace conveyor::http {

// What the access log says of a job: its tokens and how it ended.
struct JobSummary {
  int64_t prompt_tokens = 0;      // all prompts, each once whatever n
  int64_t completion_tokens = 0;  // all choices
  // The request's: error if it failed, else cancelled if any choice was (or
  // had not ended), else length if any ran out, else stop.
  FinishReason finish = FinishReason::none;
  bool cancelled = false;         // some choice was cancelled or never ended
  std::optional<ApiError> error;  // why it failed
};

class ClientJob {
 public:
  virtual ~ClientJob() = default;

  // Feeds one engine event of choice `index`; appends the payloads to send now.
  virtual void on_event(int32_t index, const StreamEvent& event, std::vector<std::string>& out) = 0;
  // Ends the job now (shutdown, output overflow) as if a choice had failed.
  virtual void abort(const ApiError& why, std::vector<std::string>& out) = 0;
  // Choices that end cancelled from now on say why (the drain ran out of time).
  virtual void set_cancel_reason(std::string reason) = 0;
  virtual JobSummary summary() const = 0;

  virtual bool done() const = 0;
  // Set when the job ended before any output: answer with this error.
  virtual const std::optional<ApiError>& failure() const = 0;
  // Not streaming, once done() without failure(): the whole response.
  virtual std::string body() const = 0;
  // The answer is a stream of Server-Sent Events (payloads framed by frame_events).
  virtual bool streaming() const = 0;
  // The length of the prompt that choice `index` samples.
  virtual int64_t prompt_tokens_of(int32_t index) const = 0;
  // One HTTP/1.1 chunk that holds `payloads` as SSE events; by default
  // "data: P\n\n" each.
  virtual std::string frame_events(const std::vector<std::string>& payloads) const { return sse_chunk(payloads); }
};

}  // namespace conveyor::http
