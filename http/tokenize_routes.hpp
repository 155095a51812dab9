// The routes that show what the model receives, without generating:
//   POST /tokenize    {"prompt" | "content": text, "add_special_tokens" | "add_special": bool,
//                      "parse_special": bool, "with_pieces": bool, "model"}
//                     -> {"tokens": [ids] or [{"id", "piece"}], "count", "max_model_len"}
//   POST /detokenize  {"tokens": [ids], "model"} -> {"prompt": text, "content": text}
// (vLLM's and llama.cpp's field names both work; "piece" is the token's text
// as decoded, or "bytes:\xNN..." for a partial UTF-8 character.) Fields
// other than these are refused by name.
//
// Thread-safety: pure functions of their arguments.
#pragma once

#include <string>
#include <string_view>
#include <variant>

#include "http/api_types.hpp"
#include "http/request_plan.hpp"

namespace conveyor::http {

// The response body (200), or the error to answer with.
std::variant<std::string, ApiError> tokenize_response(std::string_view body, const ModelContext& model);
std::variant<std::string, ApiError> detokenize_response(std::string_view body, const ModelContext& model);
// POST /v1/chat/completions/render {"messages", "tools", "add_generation_prompt", "chat_template_kwargs",
// "model"}
//   -> {"prompt": the rendered text, "prompt_token_ids", "count", "model"}
std::variant<std::string, ApiError> render_response(std::string_view body, const ModelContext& model);
// POST /v1/sessions/release {"session_id": "..."}: the session to let go of
// (its kept KV blocks, GenerateRequest::session), or the error.
std::variant<std::string, ApiError> parse_session_release(std::string_view body);

}  // namespace conveyor::http
