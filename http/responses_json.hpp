// Boost.JSON pieces of the Responses API's objects, shared by the response
// object's writer (responses_output.cpp) and the streaming events
// (responses_events.cpp). Internal to http/.
#pragma once

#include <boost/json.hpp>

#include "http/responses_output.hpp"

namespace conveyor::http::detail {

boost::json::object response_object(const ResponseState& response);
boost::json::object output_item_object(const OutputItem& item);
// A message item's one content part: {"type": "output_text", "text", "annotations": []}.
boost::json::object output_text_part(const std::string& text);

}  // namespace conveyor::http::detail
