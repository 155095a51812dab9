#include "http/responses_job.hpp"

#include <boost/json.hpp>

#include "http/responses_events.hpp"
#include "http/tool_calls.hpp"

namespace conveyor::http {

ResponsesJob::ResponsesJob(ResponsesJobSpec spec) : spec_(std::move(spec)) {
  if (spec_.tool_format) calls_ = std::make_unique<ToolCallStream>(*spec_.tool_format);
  if (spec_.store != nullptr) {  // GET shows it while it runs
    StoredResponse running{spec_.response.id, response_json(spec_.response), spec_.input_items_json, {}, {}, {}};
    running.in_progress = true;
    spec_.store->put(spec_.scope, std::move(running));
    placed_ = true;
  }
}

// A stored response whose client went away before it ended (the session
// drops its job and cancels the request): stored as the cancellation it is,
// incomplete with reason "cancelled", not left in_progress for good.
ResponsesJob::~ResponsesJob() {
  if (!placed_ || done_) return;
  StreamEvent last;
  last.finish = FinishReason::cancelled;
  last.completion_tokens = int32_t(generated_.size());
  std::vector<std::string> unsent;
  finish(last, unsent);
}

// Streamed or not, the output items are built as the text comes (a whole
// answer's are those its stream's events add up to); without streaming the
// events are dropped.
void ResponsesJob::on_event(int32_t index, const StreamEvent& e, std::vector<std::string>& sent) {
  if (done_ || index != 0) return;
  if (e.finish == FinishReason::error) return fail(from_engine_error(e.error_code, e.message), sent);
  // The drain's cancel (a reason was set) fails the response, as an engine
  // error does; a client that went away leaves it incomplete ("cancelled").
  const bool drained = e.finish == FinishReason::cancelled && !cancel_reason_.empty();
  if (drained && !started_) return fail(drain_error(), sent);  // nothing sent yet: a 503
  std::vector<std::string> dropped;
  std::vector<std::string>& out = spec_.stream ? sent : dropped;
  if (!started_) start(out);
  generated_.insert(generated_.end(), e.token_ids.begin(), e.token_ids.end());
  if (calls_) {
    ToolCallOutput parsed;
    calls_->feed(e.text, parsed);
    if (e.last()) calls_->finish(parsed, e.finish == FinishReason::length);
    add_content(parsed.content, out);
    ResponseEvents events(out, sequence_);
    for (const ToolCallDelta& d : parsed.calls) {
      if (d.first) {
        close_message(out);
        call_items_.push_back(int32_t(spec_.response.output.size()));
        spec_.response.output.push_back(function_call_item(d.id, d.name, "", "in_progress"));
        events.item_added(call_items_.back(), spec_.response.output.back());
      }
      if (d.arguments.empty() || size_t(d.index) >= call_items_.size()) continue;
      const int32_t at = call_items_[size_t(d.index)];
      OutputItem& call = spec_.response.output[size_t(at)];
      call.arguments += d.arguments;
      events.arguments_delta(at, call, d.arguments);
    }
  } else {
    add_content(e.text, out);
  }
  if (!e.last()) return;
  if (drained) return fail(drain_error(), sent);
  finish(e, out);
}

ApiError ResponsesJob::drain_error() const { return ApiError{503, cancel_reason_, "server_error", {}, "shutting_down"}; }

void ResponsesJob::start(std::vector<std::string>& out) {
  started_ = true;
  ResponseEvents events(out, sequence_);
  events.response("response.created", spec_.response);
  events.response("response.in_progress", spec_.response);
}

void ResponsesJob::add_content(std::string_view text, std::vector<std::string>& out) {
  if (text.empty()) return;
  ResponseEvents events(out, sequence_);
  std::vector<OutputItem>& items = spec_.response.output;
  if (open_message_ < 0) {
    open_message_ = int32_t(items.size());
    items.push_back(message_item("in_progress"));
    events.item_added(open_message_, items.back());
    events.text_part_added(open_message_, items.back());
  }
  OutputItem& message = items[size_t(open_message_)];
  message.text += text;
  events.text_delta(open_message_, message, text);
}

void ResponsesJob::close_message(std::vector<std::string>& out) {
  if (open_message_ < 0) return;
  OutputItem& message = spec_.response.output[size_t(open_message_)];
  if (message.status == "in_progress") message.status = "completed";
  ResponseEvents events(out, sequence_);
  events.text_done(open_message_, message);
  events.item_done(open_message_, message);
  open_message_ = -1;
}

void ResponsesJob::finish(const StreamEvent& last, std::vector<std::string>& out) {
  ResponseState& r = spec_.response;
  finish_ = last.finish;
  const bool complete = last.finish == FinishReason::stop;
  r.status = complete ? "completed" : "incomplete";
  if (last.finish == FinishReason::length) r.incomplete_reason = "max_output_tokens";
  if (last.finish == FinishReason::cancelled) r.incomplete_reason = "cancelled";
  const std::string item_status = complete ? "completed" : "incomplete";
  r.usage = ResponseUsage{int64_t(spec_.prompt.size()), last.cached_prompt_tokens,
                          std::max<int64_t>(last.completion_tokens, int64_t(generated_.size()))};

  {
    ResponseEvents events(out, sequence_);
    if (r.output.empty()) {  // an empty answer is still a message, as OpenAI's are
      open_message_ = 0;
      r.output.push_back(message_item("in_progress"));
      events.item_added(0, r.output.back());
      events.text_part_added(0, r.output.back());
    }
    if (open_message_ >= 0) r.output[size_t(open_message_)].status = item_status;
    close_message(out);
    // A call the output cut short (max_output_tokens) is incomplete.
    const std::string call_status = calls_ && !calls_->calls_complete() ? "incomplete" : "completed";
    for (int32_t at : call_items_) {
      OutputItem& call = r.output[size_t(at)];
      call.status = call_status;
      events.arguments_done(at, call);
      events.item_done(at, call);
    }
  }
  done_ = true;
  store();
  ResponseEvents(out, sequence_).response(complete ? "response.completed" : "response.incomplete", r);
}

void ResponsesJob::fail(const ApiError& error, std::vector<std::string>& out) {
  if (done_) return;
  done_ = true;
  error_ = error;
  if (!spec_.stream || !started_) {
    failure_ = error;
    if (placed_) spec_.store->withdraw(spec_.scope, spec_.response.id);  // an error answers it, nothing is stored
    return;
  }
  ResponseState& r = spec_.response;
  r.status = "failed";
  r.error = error;
  for (OutputItem& item : r.output)
    if (item.status == "in_progress") item.status = "incomplete";
  store();
  ResponseEvents(out, sequence_).response("response.failed", r);
}

void ResponsesJob::abort(const ApiError& why, std::vector<std::string>& out) { fail(why, out); }

// The conversation goes on with the answer as one assistant message: its
// text, and its calls in chat's tool_calls shape. A response the store does
// not keep (deleted while it ran, or larger than the store) says `store`
// false in what the client gets.
void ResponsesJob::store() {
  if (spec_.store == nullptr) return;
  ResponseState& r = spec_.response;
  ChatMessage answer;
  answer.role = "assistant";
  boost::json::array calls;
  for (const OutputItem& item : r.output) {
    if (item.kind == OutputItem::Kind::message) {
      answer.content += item.text;
    } else {
      calls.push_back(boost::json::object{
          {"id", item.call_id},
          {"type", "function"},
          {"function", boost::json::object{{"name", item.name}, {"arguments", item.arguments}}}});
    }
  }
  if (!calls.empty()) answer.tool_calls_json = boost::json::serialize(calls);
  StoredResponse stored{r.id, response_json(r), std::move(spec_.input_items_json), std::move(spec_.conversation),
                        spec_.session, {}};
  if (r.status != "failed") {
    stored.conversation.push_back(std::move(answer));
    stored.tokens = spec_.prompt;  // a copy: summary() still counts the prompt
    stored.tokens.insert(stored.tokens.end(), generated_.begin(), generated_.end());
  }
  if (!spec_.store->complete(spec_.scope, std::move(stored))) r.echo.store = false;
}

JobSummary ResponsesJob::summary() const {
  JobSummary s;
  s.prompt_tokens = int64_t(spec_.prompt.size());
  s.completion_tokens = spec_.response.usage ? spec_.response.usage->output_tokens : int64_t(generated_.size());
  s.cancelled = finish_ == FinishReason::none || finish_ == FinishReason::cancelled;
  s.error = error_;
  s.finish = error_                              ? FinishReason::error
             : s.cancelled                       ? FinishReason::cancelled
                                                 : finish_;
  return s;
}

std::string ResponsesJob::frame_events(const std::vector<std::string>& payloads) const {
  return responses_sse_chunk(payloads);
}

}  // namespace conveyor::http
