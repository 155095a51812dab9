#include "http/ws_message.hpp"

#include "http/api_request.hpp"

namespace conveyor::http {

std::string ws_id_key(const std::string& client_id, bool is_number) {
  return (is_number ? "n:" : "s:") + client_id;
}

WsAction read_ws_message(std::string_view text, bool draining,
                         const std::function<bool(const std::string& key)>& is_running) {
  ParseResult parsed = parse_api_request(text, Endpoint::websocket);
  ApiRequest& r = parsed.request;
  if (parsed.error) return WsRefuse{std::move(*parsed.error), std::move(r)};
  std::string key = ws_id_key(r.client_id, r.client_id_is_number);
  if (r.cancel) return WsCancel{std::move(key)};
  if (is_running(key)) return WsRefuse{bad_request("a request with this id is still running", "id"), std::move(r)};
  if (draining)
    return WsRefuse{
        ApiError{503, "the server is shutting down and accepts no new requests", "server_error", {}, "shutting_down"},
        std::move(r)};
  return WsStart{std::move(r), RequestPlan{}, std::move(key)};
}

std::optional<WsRefuse> plan_ws_start(WsStart& start, const ModelContext& model) {
  auto planned = plan_request(start.request, model);
  if (auto* error = std::get_if<ApiError>(&planned)) return WsRefuse{std::move(*error), start.request};
  start.plan = std::move(std::get<RequestPlan>(planned));
  return std::nullopt;
}

WsAction decide_ws_message(std::string_view text, const ModelContext& model, bool draining,
                           const std::function<bool(const std::string& key)>& is_running) {
  WsAction action = read_ws_message(text, draining, is_running);
  if (auto* start = std::get_if<WsStart>(&action)) {
    if (auto refused = plan_ws_start(*start, model)) return std::move(*refused);
  }
  return action;
}

JobSpec ws_job_spec(const ApiRequest& request, const RequestPlan& plan, const ModelContext& model) {
  JobSpec spec;
  spec.mode = OutputMode::websocket;
  spec.chat = request.chat;
  spec.model = model.served_name;
  spec.prompts = plan.prompts;
  spec.n = plan.n;
  spec.logprobs = plan.sampling.logprobs;
  spec.return_token_ids = request.return_token_ids;
  spec.tokenizer = model.tokenizer;
  spec.tool_calls = plan.tool_calls;
  spec.prompt = plan.prompt_output;
  spec.client_id = request.client_id;
  spec.client_id_is_number = request.client_id_is_number;
  return spec;
}

}  // namespace conveyor::http
