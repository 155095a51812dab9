// The Responses API's input items, tools, tool_choice and text.format in the
// chat machinery's terms (see responses_request.hpp for the mapping). Each
// function returns the 400 that names what is wrong, or nothing. Internal to
// http/: the request parser and its tests use it.
#pragma once

#include <boost/json.hpp>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "http/api_types.hpp"

namespace conveyor::http::responses {

using Fail = std::optional<ApiError>;

ChatMessage chat_message(std::string role, std::string content);
// "'field' must be WANT", with param `field`.
ApiError type_error(std::string_view field, std::string_view want);

// `input`: a string (one user message) or an array of items.
Fail input_messages(const boost::json::value& input, std::vector<ChatMessage>& out);
// The input as OpenAI's input items (GET /v1/responses/{id}/input_items):
// each with an id ("msg_", "fc_", "fco_" + hex when the client gave none)
// and a status, a message's content as parts. `input` passed input_messages().
boost::json::array input_items(const boost::json::value& input);
// Function tools to chat's tools array (JSON text; "" for none).
Fail chat_tools(const boost::json::value& tools, std::string& chat_json, std::vector<std::string>& names);
// `names`: the tools' names, which a named choice must be one of.
Fail tool_choice(const boost::json::value& choice, const std::vector<std::string>& names, ToolChoice& out);
// `text`: {"format": {...}, "verbosity": ...}; the format as a constraint.
Fail text_format(const boost::json::value& text, OutputConstraint& out);
// Tool messages without a name get the name of the call they answer, from
// the assistant messages' tool_calls before them.
void name_tool_results(std::vector<ChatMessage>& messages);

}  // namespace conveyor::http::responses
