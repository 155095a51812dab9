// The OpenAI-format request as the server understands it, after parsing and
// before tokenization, and the OpenAI-style error every endpoint answers with.
// Plain data: the parser (simdjson), the planner and the JSON writer share it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "model/sampling/sampler.hpp"
#include "base/status.hpp"

namespace conveyor::http {

inline constexpr int32_t kMaxChoicesPerPrompt = 64;  // n

enum class Endpoint : uint8_t {
  completions,  // POST /v1/completions: `prompt`
  chat,         // POST /v1/chat/completions: `messages`
  websocket,    // one message on /v1/ws: `prompt` or `messages`, plus `id`, or a cancel
  render,       // POST /v1/chat/completions/render: `messages`, the prompt without generating
};

struct ChatMessage {
  std::string role;     // system | user | assistant | tool (others pass through the template as user)
  std::string content;
  // Optional fields, default-initialized so that {role, content} says a plain message.
  std::string tool_calls_json{};  // assistant: its `tool_calls` array as sent, or ""
  std::string tool_call_id{};     // tool: the call this message answers
  std::string name{};             // tool (or function): the function's name, when given
  std::string reasoning_content{};  // assistant: its reasoning (Qwen3's and DeepSeek's templates show it)
};

// A constraint on the generated text (structured outputs), from OpenAI's
// `response_format`, vLLM's `structured_outputs`, llama.cpp's `json_schema`
// and `grammar`, or the Responses API's `text.format`. The planner compiles it
// against the model's vocabulary (grammar/); errors name `field`.
struct OutputConstraint {
  enum class Kind : uint8_t { none, json_object, json_schema, regex, choice, grammar };
  Kind kind = Kind::none;
  std::string source;                // json_schema: the schema's JSON; regex: the pattern; grammar: GBNF
  std::vector<std::string> choices;  // choice
  bool strict = true;                // json_schema: bounded whitespace, no extra properties
  std::string name;                  // json_schema: the schema's name, when given
  std::string field;                 // the request field it came from ("response_format", ...)
};

// Which tools the model may call (chat and the Responses API).
struct ToolChoice {
  enum class Mode : uint8_t { none, automatic, required, function };
  Mode mode = Mode::automatic;       // OpenAI's default when tools are given
  std::string function;              // Mode::function: the function's name
};

// One prompt of a completion request: text, or token ids taken as they are.
struct Prompt {
  std::optional<std::string> text;
  std::vector<int32_t> ids;
};

struct ApiRequest {
  bool chat = false;                 // messages (chat) or prompt (completion)
  bool cancel = false;               // WebSocket {"type": "cancel", "id": ...}
  std::string client_id;             // WebSocket: the client's `id` (a string, or an integer's digits)
  bool client_id_is_number = false;
  std::string model;                 // "" = the served model
  std::vector<Prompt> prompts;       // completion: one or more
  std::vector<ChatMessage> messages; // chat
  std::string messages_json;         // chat: the messages array as sent (for templates)
  std::string tools_json;            // chat, render: the tools array as sent, or ""
  std::string chat_template_kwargs_json;  // chat, render: extra template variables (an object as sent), or ""
  ToolChoice tool_choice;            // chat: meaningful when tools_json is set
  bool parallel_tool_calls = true;   // chat: more than one call in a turn
  OutputConstraint constraint;       // structured outputs; kind none: free text
  bool add_special_tokens = true;    // text prompts: BOS as the model wants
  bool parse_special = true;         // text prompts: special tokens in the text become ids
  bool add_generation_prompt = true; // chat: the template opens the assistant's turn
  SamplingParams sampling;           // max_tokens, temperature, ..., seed, logprobs (-1: none)
  bool max_tokens_given = false;     // chat without max_tokens: up to the context length
  std::vector<std::string> stop;
  int32_t n = 1;                     // 1 to kMaxChoicesPerPrompt, or max_num_seqs where lower
  int32_t priority = 0;              // vLLM's: lower runs sooner (--scheduling-policy priority)
  bool stream = false;
  bool include_usage = false;        // stream_options.include_usage
  bool return_token_ids = false;     // extension: prompt_token_ids and per-choice token_ids
  bool echo = false;                 // completions: each choice's text starts with its prompt's
  int32_t prompt_logprobs = -1;      // vLLM's: alternatives per prompt position; -1: none
  std::string user;
  std::string session_id;            // extension: keep the conversation's KV for its next request
};

// An OpenAI-style error: {"error": {"message", "type", "param", "code"}}.
struct ApiError {
  int status = 400;                  // the HTTP status
  std::string message;
  std::string type = "invalid_request_error";
  std::string param;                 // "" renders as null
  std::string code;                  // "" renders as null
};

inline ApiError bad_request(std::string message, std::string param = {}) {
  return ApiError{400, std::move(message), "invalid_request_error", std::move(param), {}};
}

// Engine errors to HTTP: invalid_argument 400, resource_exhausted 429 (the
// waiting queue is full), io_error 503 (the engine stopped), others 500.
inline ApiError from_engine_error(Errc code, std::string message) {
  switch (code) {
    case Errc::invalid_argument: return bad_request(std::move(message));
    case Errc::resource_exhausted:
      return ApiError{429, std::move(message), "rate_limit_error", {}, "queue_full"};
    case Errc::io_error:
      return ApiError{503, std::move(message), "server_error", {}, "unavailable"};
    case Errc::internal: return ApiError{500, std::move(message), "server_error", {}, "engine_failure"};
    default: return ApiError{500, std::move(message), "server_error", {}, {}};
  }
}

}  // namespace conveyor::http
