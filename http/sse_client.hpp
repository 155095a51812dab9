// The client side of the server's streams: reading an OpenAI-style
// Server-Sent Events stream (bytes in, events out) and what one `data:` chunk
// of a completion or chat completion says. `conveyor bench` and the soak
// benchmark read the server with it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace conveyor {

// Splits a byte stream into SSE events. Feed it bytes as they arrive, in
// pieces of any size; it returns the `data` of every event the bytes
// complete (data lines of one event joined with '\n'). Comments (lines
// starting with ':') and fields other than `data` are ignored; "\r\n" and
// "\n" line ends both work.
class SseDecoder {
 public:
  std::vector<std::string> feed(std::string_view bytes);
  bool has_partial_event() const { return !pending_.empty() || !data_.empty() || has_data_; }

 private:
  void take_line(std::string_view line, std::vector<std::string>& out);

  std::string pending_;  // bytes of an unfinished line
  std::string data_;     // data of the event being read
  bool has_data_ = false;
};

// One streamed chunk of /v1/completions or /v1/chat/completions, as far as a
// benchmark cares.
struct ChunkInfo {
  bool done = false;             // the "[DONE]" sentinel
  int64_t tokens = 0;            // tokens this chunk carries (token_ids, else 1 if it has text)
  bool has_token_ids = false;    // the server sent token_ids (return_token_ids)
  std::string text;              // text / delta.content of choice 0
  std::optional<std::string> finish_reason;
  std::optional<int64_t> usage_prompt_tokens;
  std::optional<int64_t> usage_completion_tokens;
  std::optional<std::string> error;  // an {"error": {...}} event, or a chunk that is not JSON
};
ChunkInfo parse_chunk(std::string_view data);

}  // namespace conveyor
