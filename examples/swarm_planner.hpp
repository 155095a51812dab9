// The agent swarm's tool calls in-process (examples/agent_swarm.cpp): what
// the server does with a chat request's tools, done for the Engine API with
// the server's own pieces (conveyor_http). The model's chat template renders
// the messages and the tools; the tool-call grammar, in the syntax that
// template shows, is compiled against the model's vocabulary through the
// engine's GrammarBinder and set as SamplingParams::grammar; the calls are
// read from the output by the server's parser.
#pragma once

#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "examples/swarm_tools.hpp"
#include "http/chat_template.hpp"
#include "http/constraint_compiler.hpp"
#include "http/tool_call_grammar.hpp"
#include "http/tool_calls.hpp"

namespace conveyor::examples::swarm {

inline http::ToolChoice api_choice(const TurnChoice& choice) {
  if (choice.label == "required") return {http::ToolChoice::Mode::required, ""};
  if (choice.label == "auto") return {http::ToolChoice::Mode::automatic, ""};
  return {http::ToolChoice::Mode::function, choice.function};
}

// The prompt's token ids for `messages` with the tools, from the model's
// chat template (as the server renders a chat request); nullopt and `error`
// if the template refuses them.
inline std::optional<std::vector<int32_t>> render_prompt(const http::ChatTemplate& chat, const json::array& messages,
                                                         std::string& error) {
  std::vector<http::ChatMessage> converted;
  for (const json::value& v : messages) {
    const json::object& m = v.as_object();
    http::ChatMessage c;
    c.role = m.at("role").as_string();
    if (const json::value* content = m.if_contains("content"); content && content->is_string())
      c.content = content->as_string();
    if (const json::value* calls = m.if_contains("tool_calls")) c.tool_calls_json = json::serialize(*calls);
    if (const json::value* id = m.if_contains("tool_call_id")) c.tool_call_id = id->as_string();
    converted.push_back(std::move(c));
  }
  const std::string tools = tools_json();
  http::ChatApplyOptions options;  // (designated initializers: GCC 12 warns of the others)
  options.tools_json = tools;
  auto rendered = chat.apply(converted, options);
  if (!rendered) {
    error = rendered.error().message;
    return std::nullopt;
  }
  return std::move(rendered->ids);
}

// What the server does with a chat request's tools, done here for the
// Engine API: the prompt from the model's chat template with the tools, the
// tool-call grammar compiled against the model's vocabulary (through the
// engine's GrammarBinder, once per tool_choice), and the calls read from
// the output by the server's parser, in the syntax the template shows.
class ToolPlanner {
 public:
  ToolPlanner(std::shared_ptr<const http::ChatTemplate> chat, std::shared_ptr<GrammarBinder> binder,
              const Tokenizer& tokenizer)
      : chat_(std::move(chat)),
        syntax_(http::tool_call_syntax(http::resolve_tool_call_format(http::ToolCallParser::automatic, chat_->source()),
                                       chat_->source(), &tokenizer)),
        compiler_(std::move(binder)) {}

  http::ToolCallFormat format() const { return syntax_.format; }
  // Control tokens the output's text must show for the parser (RequestSpec::shown_tokens).
  std::vector<int32_t> shown_tokens() const { return syntax_.shown_tokens(); }

  // The prompt's token ids for `messages`; nullopt and `error` if the template refuses them.
  std::optional<std::vector<int32_t>> prompt(const json::array& messages, std::string& error) const {
    return render_prompt(*chat_, messages, error);
  }

  // The grammar a turn asked this way follows (the server's, for the same
  // request: one call, no parallel calls); empty when it constrains nothing.
  std::optional<GrammarConstraint> grammar(const TurnChoice& choice, std::string& error) {
    http::ApiRequest request;
    request.chat = true;
    request.tools_json = tools_json();
    request.tool_choice = api_choice(choice);
    request.parallel_tool_calls = false;
    http::ConstraintResult compiled = http::tool_call_constraint(request, syntax_, compiler_);
    if (auto* e = std::get_if<http::ApiError>(&compiled)) {
      error = e->message;
      return std::nullopt;
    }
    return std::get<GrammarConstraint>(std::move(compiled));
  }

  // The calls in a turn's whole output (none: `content` is the answer).
  std::vector<Call> calls(const std::string& text, std::string& content) const {
    const http::ParsedAnswer answer = http::parse_tool_calls(syntax_.format, text);
    content = answer.content.value_or("");
    std::vector<Call> out;
    for (const http::ToolCall& c : answer.calls) out.push_back({c.id, c.name, c.arguments});
    return out;
  }

 private:
  std::shared_ptr<const http::ChatTemplate> chat_;
  http::ToolCallSyntax syntax_;
  http::ConstraintCompiler compiler_;
};

}  // namespace conveyor::examples::swarm
