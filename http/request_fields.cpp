#include "http/request_fields.hpp"

namespace conveyor::http {
namespace {

constexpr FieldSupport I = FieldSupport::implemented;
constexpr FieldSupport R = FieldSupport::refused;
constexpr uint8_t kBoth = kCompletions | kChat;
constexpr uint8_t kAll = kCompletions | kChat | kRender;

constexpr RequestField kFields[] = {
    // Shared by both OpenAI endpoints.
    {"model", kAll | kEmbeddings, I, "", "must name the served model (404 model_not_found otherwise)"},
    {"max_tokens", kBoth, I, "", "tokens to generate at most"},
    {"temperature", kBoth, I, "", "sampling temperature; 0 is greedy"},
    {"top_p", kBoth, I, "", "nucleus sampling"},
    {"n", kBoth, I, "", "choices per prompt (1-64)"},
    {"stream", kBoth, I, "", "server-sent events"},
    {"stream_options", kBoth, I, "", "include_usage"},
    {"stop", kBoth, I, "", "up to 16 stop strings, removed from the output"},
    {"seed", kBoth, I, "", "seeds each sequence's generator"},
    {"presence_penalty", kBoth, I, "", "OpenAI's presence penalty"},
    {"frequency_penalty", kBoth, I, "", "OpenAI's frequency penalty"},
    {"logprobs", kBoth, I, "", "completions: top count; chat: true/false"},
    {"user", kBoth | kEmbeddings, I, "", "kept with the request for logs"},
    {"session_id", kBoth, I, "", "keeps the conversation's KV blocks for its next request"},
    {"logit_bias", kBoth, I, "", "token id (as a string) to a bias in [-100, 100] added to its logit"},
    {"service_tier", kBoth, R, "\"auto\"|\"default\"", "conveyor has one service tier"},
    // Completions only.
    {"prompt", kCompletions, I, "", "text, token ids, or a list of either"},
    {"echo", kCompletions, I, "",
     "each choice's text starts with its prompt's; with logprobs, they cover the prompt's tokens too "
     "(the first one's null); with max_tokens 0, the prompt alone (scoring)"},
    {"best_of", kCompletions, R, "1", "best_of is not implemented; use n and pick by logprobs"},
    {"suffix", kCompletions, R, "\"\"", "fill-in-the-middle suffixes are not implemented"},
    // Chat only.
    {"messages", kChat | kRender, I, "",
     "rendered with the model's chat template; role, content and the other message keys "
     "reach the template"},
    {"max_completion_tokens", kChat, I, "", "the same as max_tokens"},
    {"top_logprobs", kChat, I, "", "alternatives per token with logprobs: true"},
    {"tools", kChat | kRender, I, "",
     "function tools (name, description, parameters, strict), given to the chat template; the model's "
     "calls come back as tool_calls"},
    {"tool_choice", kChat, I, "",
     "none | auto | required | {\"type\": \"function\", \"function\": {\"name\"}}: required and named "
     "calls follow the functions' schemas (constrained decoding)"},
    {"parallel_tool_calls", kChat, I, "", "false: at most one call per answer"},
    {"functions", kChat, R, "[]", "it is deprecated: send the functions as 'tools'"},
    {"function_call", kChat, R, "\"none\"", "it is deprecated: use 'tool_choice'"},
    {"response_format", kBoth, I, "",
     "text, json_object, or json_schema (name, schema, strict): the output follows it (constrained decoding)"},
    {"modalities", kChat, R, "[\"text\"]", "conveyor generates text only"},
    {"audio", kChat, R, "", "audio output is not implemented"},
    {"prediction", kChat, R, "", "predicted outputs are not implemented"},
    {"reasoning_effort", kChat, R, "", "reasoning effort is not implemented"},
    {"verbosity", kChat, R, "", "verbosity is not implemented"},
    {"web_search_options", kChat, R, "", "web search is not implemented"},
    {"store", kChat, R, "false", "completions are not stored"},
    {"metadata", kChat, R, "{}", "metadata is kept only with stored completions, which are not implemented"},
    {"prompt_cache_key", kBoth, I, "", "accepted; prefix caching is automatic"},
    {"safety_identifier", kBoth, I, "", "kept with the request for logs, as user"},
    // Embeddings only.
    {"input", kEmbeddings, I, "", "a string, an array of strings, an array of token ids, or an array of those"},
    {"encoding_format", kEmbeddings, I, "", "float (default) or base64: little-endian float32"},
    {"dimensions", kEmbeddings, I, "",
     "accepted when it is the model's dim; this model's embeddings cannot be shortened"},
    // Extensions (vLLM's names where vLLM has the field).
    {"top_k", kBoth, I, "", "keep the k most likely tokens; 0 or -1 is off"},
    {"min_p", kBoth, I, "", "drop tokens below min_p times the most likely one's probability"},
    {"repetition_penalty", kBoth, I, "", "divide the logits of tokens already seen"},
    {"ignore_eos", kBoth, I, "", "keep generating past end-of-sequence tokens"},
    {"stop_token_ids", kBoth, I, "", "up to 64 token ids that end a choice as end-of-sequence does (not shown)"},
    {"priority", kBoth, I, "", "lower runs sooner (vLLM); needs --scheduling-policy priority"},
    {"return_token_ids", kBoth, I, "", "prompt_token_ids and per-choice token_ids"},
    {"prompt_logprobs", kBoth, I, "",
     "vLLM's: 0-20, each prompt token's logprob and rank with that many alternatives (not when streaming; "
     "the prompt is computed in full, past the prefix cache)"},
    {"structured_outputs", kBoth, I, "", "vLLM's: one of json (a schema), regex, choice, grammar (GBNF), json_object"},
    {"json_schema", kBoth, I, "", "llama.cpp's: the output follows this JSON Schema"},
    {"grammar", kBoth, I, "", "llama.cpp's: the output follows this GBNF grammar"},
    {"add_special_tokens", kCompletions, I, "", "text prompts: prepend BOS as the model wants (default true)"},
    {"parse_special", kCompletions, I, "",
     "text prompts: special tokens written in the text become their ids (default true); "
     "false for untrusted text"},
    {"add_generation_prompt", kChat | kRender, I, "",
     "the template opens the assistant's turn (default true)"},
    {"chat_template_kwargs", kChat | kRender, I, "",
     "vLLM's and llama.cpp's: extra variables for the chat template (enable_thinking, ...), as data; they "
     "never replace messages, tools, add_generation_prompt or the special tokens"},
    // The WebSocket envelope.
    {"id", kWebSocket, I, "", "the client's request id"},
    {"type", kWebSocket, I, "", "completion, chat or cancel"},
};

}  // namespace

std::span<const RequestField> request_fields() { return kFields; }

const RequestField* find_request_field(std::string_view name, uint8_t scope) {
  for (const RequestField& f : kFields)
    if (f.name == name && (f.scope & scope)) return &f;
  return nullptr;
}

bool is_harmless(const RequestField& row, std::string_view compact) {
  std::string_view rest = row.harmless;
  while (!rest.empty()) {
    const size_t bar = rest.find('|');
    if (rest.substr(0, bar) == compact) return true;
    rest = bar == std::string_view::npos ? std::string_view() : rest.substr(bar + 1);
  }
  return false;
}

uint8_t scope_of(Endpoint endpoint) {
  switch (endpoint) {
    case Endpoint::completions: return kCompletions;
    case Endpoint::chat: return kChat;
    case Endpoint::websocket: return kCompletions | kChat | kWebSocket;
    case Endpoint::render: return kRender;
  }
  return 0;
}

}  // namespace conveyor::http
