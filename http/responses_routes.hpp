// The Responses API's three routes, without I/O (the HTTP session calls them):
//   POST   /v1/responses       prepare_response(): the engine plan and the job
//   GET    /v1/responses/{id}  stored_response(): the stored response object
//   DELETE /v1/responses/{id}  delete_response(): {"id", "object": "response", "deleted": true}
//   GET    /v1/responses/{id}/input_items  response_input_items(): the input it was given
//
// A request with previous_response_id continues that stored response's
// conversation (404 previous_response_not_found when the store has none for
// this API key): the prompt is its conversation plus the new input, with
// this request's instructions in front, and it runs under the same engine
// session, whose kept KV blocks spare it the earlier turns' prefill. Every
// stored response runs under a session ("resp:" and the id of the first
// response of its conversation), so that it can be continued so.
//
// Thread-safety: any thread (the store locks itself).
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "http/request_plan.hpp"
#include "http/response_store.hpp"
#include "http/responses_job.hpp"

namespace conveyor::http {

struct PreparedResponse {
  RequestPlan plan;
  ResponsesJobSpec job;
};

// Function calls are read from the output as the plan says (RequestPlan::tool_calls).
std::variant<PreparedResponse, ApiError> prepare_response(std::string_view body, const ModelContext& model,
                                                          ResponseStore& store, const ResponseScope& scope);

// `query`: the target's query string; a stored response is not streamed
// again (stream=true is a 400).
std::variant<std::string, ApiError> stored_response(ResponseStore& store, const ResponseScope& scope,
                                                    std::string_view id, std::string_view query = {});
// OpenAI's list of the stored response's input items: {"object": "list",
// "data", "first_id", "last_id", "has_more"}. `query`: limit (1 to 100,
// default 20), order (desc, the default, or asc), after (an item id).
std::variant<std::string, ApiError> response_input_items(ResponseStore& store, const ResponseScope& scope,
                                                         std::string_view id, std::string_view query);
std::variant<std::string, ApiError> delete_response(ResponseStore& store, const ResponseScope& scope,
                                                    std::string_view id);

}  // namespace conveyor::http
