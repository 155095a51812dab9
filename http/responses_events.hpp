// The Responses API's streaming events, as OpenAI sends them and the
// official clients read them: each an SSE event "event: TYPE\ndata: JSON"
// whose JSON carries "type" and a "sequence_number" counting from 0.
//
//   response.created, response.in_progress            {response}
//   response.output_item.added / .done                {output_index, item}
//   response.content_part.added / .done               {item_id, output_index, content_index, part}
//   response.output_text.delta                        {item_id, output_index, content_index, delta, logprobs: []}
//   response.output_text.done                         {item_id, output_index, content_index, text, logprobs: []}
//   response.function_call_arguments.delta            {item_id, output_index, delta}
//   response.function_call_arguments.done             {item_id, output_index, name, arguments}
//   response.completed / .incomplete / .failed        {response}
//
// A message item has one content part (index 0). Not thread-safe.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "http/responses_output.hpp"

namespace conveyor::http {

class ResponseEvents {
 public:
  // Appends each event to `out`; `sequence` is the stream's counter.
  ResponseEvents(std::vector<std::string>& out, int64_t& sequence) : out_(out), sequence_(sequence) {}

  // "response.created", "response.in_progress", "response.completed", ...
  void response(std::string_view type, const ResponseState& response);
  void item_added(int32_t output_index, const OutputItem& item);
  void item_done(int32_t output_index, const OutputItem& item);
  // A message item's text: its part opens, grows, and closes with all of it.
  void text_part_added(int32_t output_index, const OutputItem& item);
  void text_delta(int32_t output_index, const OutputItem& item, std::string_view delta);
  void text_done(int32_t output_index, const OutputItem& item);  // output_text.done and content_part.done
  void arguments_delta(int32_t output_index, const OutputItem& item, std::string_view delta);
  void arguments_done(int32_t output_index, const OutputItem& item);

 private:
  struct Event;
  void send(std::string_view type, Event&& event);

  std::vector<std::string>& out_;
  int64_t& sequence_;
};

// One HTTP/1.1 chunk of the events above, each ended by a blank line.
std::string responses_sse_chunk(const std::vector<std::string>& events);

}  // namespace conveyor::http
