#include "http/responses_routes.hpp"

#include <boost/json.hpp>
#include <algorithm>
#include <charconv>

#include "http/api_json.hpp"
#include "http/responses_continuation.hpp"
#include "http/responses_input.hpp"
#include "http/responses_request.hpp"

namespace conveyor::http {
namespace {

ApiError not_found(std::string_view id, const char* param, const char* code) {
  ApiError e{404, "no response with id '" + std::string(id) + "' is stored (for this API key)",
             "invalid_request_error", param, code};
  return e;
}

// The planner speaks chat's names; the client sent the Responses API's.
ApiError in_responses_terms(ApiError e) {
  if (e.param == "messages") e.param = "input";
  if (e.param == "max_tokens") e.param = "max_output_tokens";
  return e;
}

}  // namespace

std::variant<PreparedResponse, ApiError> prepare_response(std::string_view body, const ModelContext& model,
                                                          ResponseStore& store, const ResponseScope& scope) {
  auto parsed = parse_responses_request(body);
  if (auto* e = std::get_if<ApiError>(&parsed)) return *e;
  ResponsesRequest& request = std::get<ResponsesRequest>(parsed);
  if (auto e = check_model_name(request.chat.model, model)) return *e;

  PreparedResponse out;
  ResponsesJobSpec& job = out.job;
  job.response.id = make_response_id("resp_");
  job.response.created_at = unix_seconds_now();
  job.response.model = model.served_name;
  job.response.echo = request.echo;
  job.input_items_json = std::move(request.input_items_json);
  std::shared_ptr<const StoredResponse> previous;
  if (!request.previous_response_id.empty()) {
    previous = store.get(scope, request.previous_response_id);
    if (!previous)
      return not_found(request.previous_response_id, "previous_response_id", "previous_response_not_found");
    if (previous->in_progress)
      return bad_request("response '" + request.previous_response_id + "' is still in progress; continue it once it "
                         "has completed", "previous_response_id");
    job.conversation = previous->conversation;
    job.session = previous->session;
  } else if (request.echo.store) {
    job.session = "resp:" + job.response.id;
  }
  ApiRequest& chat = request.chat;
  job.conversation.insert(job.conversation.end(), std::make_move_iterator(chat.messages.begin()),
                          std::make_move_iterator(chat.messages.end()));
  responses::name_tool_results(job.conversation);
  chat.messages.clear();
  if (request.instructions) chat.messages.push_back(responses::chat_message("system", *request.instructions));
  chat.messages.insert(chat.messages.end(), job.conversation.begin(), job.conversation.end());
  chat.session_id = job.session;

  auto planned = plan_request(chat, model);
  if (auto* e = std::get_if<ApiError>(&planned)) return in_responses_terms(*e);
  out.plan = std::move(std::get<RequestPlan>(planned));
  std::vector<int32_t>& prompt = out.plan.prompts.front();
  if (previous && !previous->tokens.empty() && model.tokenizer) {
    auto continued = continue_prompt(*model.tokenizer, previous->tokens, prompt);
    if (continued && int32_t(continued->size()) < model.config.context_length) prompt = std::move(*continued);
  }
  job.stream = chat.stream;
  job.prompt = prompt;
  job.tool_format = out.plan.tool_calls;
  if (request.echo.store) {
    job.store = &store;
    job.scope = scope;
  }
  return out;
}

std::variant<std::string, ApiError> stored_response(ResponseStore& store, const ResponseScope& scope,
                                                    std::string_view id, std::string_view query) {
  for (size_t at = 0; at <= query.size();) {
    const size_t end = std::min(query.find('&', at), query.size());
    if (query.substr(at, end - at) == "stream=true")
      return bad_request("streaming a stored response again is not supported; GET it without stream=true", "stream");
    at = end + 1;
  }
  auto found = store.get(scope, std::string(id));
  if (!found) return not_found(id, "", "response_not_found");
  return found->json;
}

std::variant<std::string, ApiError> response_input_items(ResponseStore& store, const ResponseScope& scope,
                                                         std::string_view id, std::string_view query) {
  int64_t limit = 20;
  bool ascending = false;
  std::string_view after;
  for (size_t at = 0; at < query.size();) {
    const size_t end = std::min(query.find('&', at), query.size());
    const std::string_view pair = query.substr(at, end - at);
    at = end + 1;
    const size_t eq = pair.find('=');
    const std::string_view key = pair.substr(0, eq);
    const std::string_view value = eq == std::string_view::npos ? std::string_view() : pair.substr(eq + 1);
    if (key == "limit") {
      const auto [ptr, ec] = std::from_chars(value.data(), value.data() + value.size(), limit);
      if (ec != std::errc() || ptr != value.data() + value.size() || limit < 1 || limit > 100)
        return bad_request("'limit' must be an integer from 1 to 100", "limit");
    } else if (key == "order") {
      if (value != "asc" && value != "desc") return bad_request("'order' must be asc or desc", "order");
      ascending = value == "asc";
    } else if (key == "after") {
      after = value;
    }
  }
  auto found = store.get(scope, std::string(id));
  if (!found) return not_found(id, "", "response_not_found");
  boost::json::array items = boost::json::parse(found->input_items_json).as_array();
  if (!ascending) std::reverse(items.begin(), items.end());
  size_t first = 0;
  if (!after.empty()) {
    while (first < items.size() && items[first].at("id").as_string() != after) ++first;
    if (first == items.size()) return bad_request("no input item with id '" + std::string(after) + "'", "after");
    ++first;
  }
  boost::json::array page;
  for (size_t i = first; i < items.size() && int64_t(page.size()) < limit; ++i) page.push_back(items[i]);
  const bool more = first + page.size() < items.size();
  boost::json::object list{{"object", "list"},
                           {"first_id", page.empty() ? boost::json::value(nullptr) : page.front().at("id")},
                           {"last_id", page.empty() ? boost::json::value(nullptr) : page.back().at("id")},
                           {"has_more", more}};
  list["data"] = std::move(page);
  return boost::json::serialize(list);
}

std::variant<std::string, ApiError> delete_response(ResponseStore& store, const ResponseScope& scope,
                                                    std::string_view id) {
  if (!store.erase(scope, std::string(id))) return not_found(id, "", "response_not_found");
  return boost::json::serialize(boost::json::object{{"id", id}, {"object", "response"}, {"deleted", true}});
}

}  // namespace conveyor::http
