// From a parsed request to what the engine runs: prompts tokenized (text
// through the tokenizer, chat through the chat template), checked against the
// model (name, vocabulary, context length, sampling ranges), and split into
// one engine request per prompt with its n samples.
//
// Choice c of a request with n choices per prompt is sample c % n of prompt
// c / n; the engine computes each prompt once, its samples share its KV
// blocks, and sample i draws with seed + i (when a seed was given), so
// choice 0 of a seeded request repeats a single-choice request with the same
// seed.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "engine/engine_types.hpp"
#include "http/api_types.hpp"
#include "http/chat_template.hpp"
#include "http/constraint_compiler.hpp"
#include "http/prompt_output.hpp"
#include "http/tool_call_format.hpp"
#include "model/config.hpp"

namespace conveyor::http {

// What the server knows of its model (immutable while it serves).
struct ModelContext {
  std::string served_name;                      // the `model` clients name
  ModelConfig config;
  std::shared_ptr<const Tokenizer> tokenizer;   // null: token-id prompts only
  std::shared_ptr<const ChatTemplate> chat;     // null when there is no tokenizer
  // Structured outputs: compiles requests' constraints against the
  // vocabulary. null when there is no tokenizer. make_model_context gives one
  // that ends grammars at the tokenizer's eos; a server replaces it with one
  // over its engine's GrammarBinder, which knows all the model's end tokens.
  std::shared_ptr<ConstraintCompiler> constraints;
  ToolCallSyntax tool_calls;  // how the model writes tool calls
  // The engine schedules first come, first served: a request's priority
  // must be 0 (--scheduling-policy priority takes others). false where it is
  // not known here (a router's nodes decide).
  bool fcfs_only = false;
  // The most samples a request may ask for (`n`): the engine's max_num_seqs,
  // all running at once. 0 where it is not known here (a router's nodes).
  int32_t max_samples = 0;
};

// The longest session_id a request may carry.
inline constexpr size_t kMaxSessionIdBytes = 256;

struct RequestPlan {
  std::vector<std::vector<int32_t>> prompts;    // token ids, one per prompt
  SamplingParams sampling;                      // validated
  std::vector<std::string> stop;
  int32_t n = 1;
  int32_t priority = 0;
  std::string session;                          // GenerateRequest::session
  // Set when the request declared tools and tool_choice is not "none": its
  // output is read for calls in this format.
  std::optional<ToolCallFormat> tool_calls;
  // Control tokens its text shows (RequestSpec::shown_tokens): Mistral's
  // [TOOL_CALLS] when its calls are read.
  std::vector<int32_t> shown_tokens;
  // echo and prompt_logprobs: what the answer shows of the prompts.
  PromptOutput prompt_output;

  int32_t num_choices() const { return int32_t(prompts.size()) * n; }
  // The engine request of one prompt, with its n samples (id 0: the engine assigns it).
  GenerateRequest request_for(int32_t prompt) const;
};

// The context for a model: `template_name` is auto | plain | llama2 | chatml
// (auto: detected from `gguf_template`, the GGUF tokenizer.chat_template);
// `tool_call_parser` auto takes the tool call format the template shows.
Expected<ModelContext> make_model_context(ModelConfig config, std::shared_ptr<const Tokenizer> tokenizer,
                                          std::string served_name, std::string_view template_name,
                                          std::string_view gguf_template,
                                          ToolCallParser tool_call_parser = ToolCallParser::automatic);

// 404 model_not_found when a request names a model other than the served
// one ("" names the served one).
std::optional<ApiError> check_model_name(std::string_view requested, const ModelContext& model);

std::variant<RequestPlan, ApiError> plan_request(const ApiRequest& request, const ModelContext& model);

}  // namespace conveyor::http
