// Boost.JSON pieces shared by the TUs that write API JSON (api_json.cpp,
// completion_job.cpp). Internal to http/.
#pragma once

#include <boost/json.hpp>
#include <span>
#include <string>

#include "http/api_types.hpp"
#include "model/tokenizer/tokenizer.hpp"

namespace conveyor::http::detail {

// How deep request JSON may nest: Boost's default, 32, is less than a JSON
// schema the schema compiler takes (64 levels of subschemas, each an object
// in an object).
inline constexpr int kMaxJsonDepth = 128;
// Parses request JSON to kMaxJsonDepth.
boost::json::value parse_request_json(std::string_view text, boost::system::error_code& ec);
// What a parse error says to a client: "nested more than 128 levels deep",
// or Boost's message ("extra data", "incomplete JSON", ...).
std::string json_error_text(const boost::system::error_code& ec);
// The 400 for a request body that is not JSON, saying why.
inline constexpr const char* kBodyNotJson = "the request body is not valid JSON: ";
inline ApiError body_not_json(const boost::system::error_code& ec) {
  std::string message = kBodyNotJson;  // appended, not concatenated: GCC 12 warns falsely (-Wrestrict)
  message.append(json_error_text(ec));
  return bad_request(std::move(message));
}

boost::json::object error_object(const ApiError& error);
// The client's id as it sent it: a string or an integer (null when empty).
boost::json::value client_id_value(const std::string& id, bool is_number);
boost::json::array ids_array(std::span<const int32_t> ids);
// The text of one token for logprobs. Not every token is whole UTF-8 (byte
// tokens): those are spelled "bytes:\xNN..." as vLLM does, so the JSON stays
// valid UTF-8. Without a tokenizer: "token_id:N".
std::string token_text(const Tokenizer* tokenizer, int32_t id);
std::string token_bytes(const Tokenizer* tokenizer, int32_t id);

}  // namespace conveyor::http::detail
