#include "http/request_plan.hpp"

#include "http/tool_call_grammar.hpp"

namespace conveyor::http {
namespace {

std::optional<ApiError> check_prompt(const std::vector<int32_t>& ids, const ModelContext& model,
                                     const char* param) {
  if (ids.empty()) return bad_request("the prompt is empty", param);
  for (int32_t id : ids) {
    if (id >= model.config.vocab_size)
      return bad_request("prompt token id " + std::to_string(id) + " is outside the vocabulary [0, " +
                             std::to_string(model.config.vocab_size) + ")",
                         param);
  }
  if (int32_t(ids.size()) >= model.config.context_length) {
    ApiError e = bad_request("the prompt has " + std::to_string(ids.size()) +
                                 " tokens; the model's context is " +
                                 std::to_string(model.config.context_length) + " tokens",
                             param);
    e.code = "context_length_exceeded";
    return e;
  }
  return std::nullopt;
}

// validate()'s messages start with the parameter's name ("top_p must be ...").
std::string param_of(const std::string& message) { return message.substr(0, message.find(' ')); }

// echo needs each prompt's text (as sent, or decoded from its ids); with
// max_tokens 0 it scores the prompt alone: the engine samples one token
// (it computes that position's logits anyway) that the answer drops, as vLLM does.
std::optional<ApiError> plan_prompt_output(const ApiRequest& request, const ModelContext& model, RequestPlan& plan) {
  PromptOutput& out = plan.prompt_output;
  out.prompt_logprobs = request.prompt_logprobs;
  if (!request.echo) return std::nullopt;
  out.echo = true;
  out.logprobs = request.sampling.logprobs;
  for (size_t i = 0; i < request.prompts.size(); ++i) {
    const Prompt& p = request.prompts[i];
    if (p.text) {
      out.texts.push_back(*p.text);
    } else if (model.tokenizer) {
      out.texts.push_back(model.tokenizer->decode(plan.prompts[i]));
    } else {
      return bad_request("echo: the model has no tokenizer to write the prompt's text", "echo");
    }
  }
  if (plan.sampling.max_tokens == 0) {
    out.score_only = true;
    plan.sampling.max_tokens = 1;
  }
  return std::nullopt;
}

}  // namespace

Expected<ModelContext> make_model_context(ModelConfig config, std::shared_ptr<const Tokenizer> tokenizer,
                                          std::string served_name, std::string_view template_name,
                                          std::string_view gguf_template, ToolCallParser tool_call_parser) {
  if (template_name != "auto") {
    if (auto parsed = parse_chat_template_kind(template_name); !parsed) return parsed.error();
  }
  ModelContext m;
  m.served_name = served_name.empty() ? config.name : std::move(served_name);
  m.config = std::move(config);
  m.tokenizer = std::move(tokenizer);
  if (m.tokenizer) {
    auto chat = make_chat_template(template_name, gguf_template, m.tokenizer);
    if (!chat) return chat.error();
    m.chat = std::move(*chat);
    m.constraints = std::make_shared<ConstraintCompiler>(std::make_shared<GrammarBinder>(m.tokenizer, std::vector<int32_t>{}));
  }
  const std::string_view source = m.chat ? m.chat->source() : gguf_template;
  m.tool_calls = tool_call_syntax(resolve_tool_call_format(tool_call_parser, source), source, m.tokenizer.get());
  return m;
}

GenerateRequest RequestPlan::request_for(int32_t prompt) const {
  GenerateRequest r;
  r.prompt = prompts[size_t(prompt)];
  r.sampling = sampling;
  r.n = n;
  r.priority = priority;
  r.session = session;
  r.prompt_logprobs = prompt_output.engine_top();
  return r;
}

std::optional<ApiError> check_model_name(std::string_view requested, const ModelContext& model) {
  if (requested.empty() || requested == model.served_name) return std::nullopt;
  ApiError e = bad_request("the model '" + std::string(requested) +
                               "' does not exist; this server serves '" + model.served_name + "'",
                           "model");
  e.status = 404;  // as OpenAI answers
  e.code = "model_not_found";
  return e;
}

std::variant<RequestPlan, ApiError> plan_request(const ApiRequest& request, const ModelContext& model) {
  if (auto e = check_model_name(request.model, model)) return *e;
  // The bound is the protocol's or, where lower, the engine's running sequences
  // (one choice each), named in the one message whatever side n is out on.
  const bool engine_bound = model.max_samples > 0 && model.max_samples < kMaxChoicesPerPrompt;
  const int32_t most = engine_bound ? model.max_samples : kMaxChoicesPerPrompt;
  if (request.n < 1 || request.n > most)
    return bad_request("'n' must be between 1 and " + std::to_string(most) +
                           (engine_bound ? " (the engine's max_num_seqs, which run at once)" : ""),
                       "n");
  RequestPlan plan;
  const char* param = request.chat ? "messages" : "prompt";
  if (request.chat) {
    if (!model.chat) return bad_request("the model has no tokenizer: use /v1/completions with token ids", param);
    auto prompt = model.chat->apply(request.messages, {request.tools_json, request.chat_template_kwargs_json,
                                                       request.add_generation_prompt});
    if (!prompt) return bad_request(prompt.error().message, param);
    plan.prompts.push_back(std::move(prompt->ids));
  } else {
    for (const Prompt& p : request.prompts) {
      if (!p.text) {
        plan.prompts.push_back(p.ids);
        continue;
      }
      if (!model.tokenizer)
        return bad_request("the model has no tokenizer: send the prompt as token ids", param);
      plan.prompts.push_back(model.tokenizer->encode(
          *p.text, EncodeOptions{.add_bos = request.add_special_tokens,
                                 .parse_special = request.parse_special}));
    }
  }
  for (const auto& ids : plan.prompts) {
    if (auto e = check_prompt(ids, model, param)) return *e;
  }
  plan.sampling = request.sampling;
  if (!request.tools_json.empty() && model.constraints) {  // required and named calls, auto's structural tag
    auto compiled = tool_call_constraint(request, model.tool_calls, *model.constraints);
    if (auto* e = std::get_if<ApiError>(&compiled)) return std::move(*e);
    if (auto& tools = std::get<GrammarConstraint>(compiled)) plan.sampling.grammar = std::move(tools);
  }
  if (request.constraint.kind != OutputConstraint::Kind::none) {
    const std::string& field = request.constraint.field;
    if (!model.constraints)
      return bad_request(field + ": the model has no tokenizer, so its output cannot be constrained", field);
    auto compiled = model.constraints->compile(request.constraint);
    if (auto* e = std::get_if<ApiError>(&compiled)) return std::move(*e);
    plan.sampling.grammar = std::get<GrammarConstraint>(std::move(compiled));
  }
  // Chat without a limit runs to the end of the context (the engine clamps it).
  if (request.chat && !request.max_tokens_given) plan.sampling.max_tokens = model.config.context_length;
  if (auto e = plan_prompt_output(request, model, plan)) return *e;
  if (Status s = validate(plan.sampling, model.config.vocab_size); !s) {
    const std::string& message = s.error().message;
    return bad_request(message, param_of(message));
  }
  if (!request.stop.empty() && !model.tokenizer)
    return bad_request("stop: the model has no tokenizer, so there is no text to stop at", "stop");
  plan.stop = request.stop;
  plan.n = request.n;
  if (request.priority != 0 && model.fcfs_only)
    return bad_request("'priority' needs the priority scheduling policy (--scheduling-policy priority, where a lower "
                       "value runs sooner); under fcfs it must be 0",
                       "priority");
  plan.priority = request.priority;
  if (!request.session_id.empty()) {
    if (request.session_id.size() > kMaxSessionIdBytes)
      return bad_request("session_id is longer than " + std::to_string(kMaxSessionIdBytes) + " bytes", "session_id");
    if (plan.prompts.size() != 1 || plan.n != 1)
      return bad_request("session_id needs one prompt and n = 1 (a session is one conversation)", "session_id");
    plan.session = request.session_id;
  }
  // With tool_choice "none" the tools still reach the template, as at OpenAI,
  // but the output is plain text.
  if (!request.tools_json.empty() && request.tool_choice.mode != ToolChoice::Mode::none) {
    plan.tool_calls = model.tool_calls.format;
    plan.shown_tokens = model.tool_calls.shown_tokens();
  }
  return plan;
}

}  // namespace conveyor::http
