// One client message on /v1/ws, decided without the socket: what the
// WebSocket session (websocket_session.hpp) does with it, as a value.
//
//   refuse  send ws_error_json(error, request.client_id, ...) and log it:
//           malformed JSON or fields, an id still running, the server
//           draining, or a plan the model refuses (prompt too long, ...)
//   cancel  cancel the request whose id key is `key`, if any: a running one
//           ends with the engine's last events, one still planned at once
//           (a cancel for an id that already finished is ignored)
//   start   run `plan` for `request` and remember it under `key`
//
// The session keeps the state (which ids run) and does the I/O; this is the
// parsing and the decision, so tests and tests/fuzz/ws_fuzz.cpp drive it
// without a network. Thread-safety: any thread.
#pragma once

#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include "http/api_types.hpp"
#include "http/completion_job.hpp"
#include "http/request_plan.hpp"

namespace conveyor::http {

struct WsRefuse {
  ApiError error;
  ApiRequest request;  // what was parsed of it: its id (if any) goes in the event
};
struct WsCancel {
  std::string key;
};
struct WsStart {
  ApiRequest request;
  RequestPlan plan;
  std::string key;
};
using WsAction = std::variant<WsRefuse, WsCancel, WsStart>;

// Client ids of both kinds in one namespace: the string "7" and the number 7
// are different requests.
std::string ws_id_key(const std::string& client_id, bool is_number);

// `is_running(key)`: whether this connection still runs a request with that
// id key. `draining`: the server takes no new requests (cancels still work).
WsAction decide_ws_message(std::string_view text, const ModelContext& model, bool draining,
                           const std::function<bool(const std::string& key)>& is_running);

// decide_ws_message in two parts, as the session runs it: the message read
// and checked (a WsStart's plan is left empty), then the start planned (a
// chat template, the tokenizer, maybe a grammar to compile: on a planning
// thread), which the model may refuse.
WsAction read_ws_message(std::string_view text, bool draining,
                         const std::function<bool(const std::string& key)>& is_running);
std::optional<WsRefuse> plan_ws_start(WsStart& start, const ModelContext& model);

// The job that turns a started request's engine events into delta and final
// events (CompletionJob in websocket mode).
JobSpec ws_job_spec(const ApiRequest& request, const RequestPlan& plan, const ModelContext& model);

}  // namespace conveyor::http
