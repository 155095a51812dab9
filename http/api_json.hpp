// Small JSON documents of the API, written with Boost.JSON (never by string
// concatenation). The completion and chat bodies and chunks are in
// completion_job.hpp. This header does not include Boost, so the network
// code that calls it stays light to compile.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "http/api_types.hpp"

namespace conveyor::http {

// {"error": {"message", "type", "param", "code"}} (empty param/code as null).
std::string error_json(const ApiError& error);
// A WebSocket error event: {"type": "error", "id": ..., "error": {...}}; the
// id is null when the message had none (or could not be parsed).
std::string ws_error_json(const ApiError& error, const std::string& client_id, bool id_is_number);
// GET /v1/models: the one served model.
std::string models_json(const std::string& served_name, int64_t created, int32_t context_length);
// GET /health: {"status": "ok"} (200); while the server drains or the
// engine restarts after a fault, {"status": "draining" | "restarting",
// "message": ...} (sent with 503).
enum class Health { ok, draining, restarting, no_nodes };
std::string health_json(Health health = Health::ok);

// "cmpl-" + 24 random hex digits (any thread).
std::string make_response_id(std::string_view prefix);
int64_t unix_seconds_now();

}  // namespace conveyor::http
