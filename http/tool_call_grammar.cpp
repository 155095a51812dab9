#include "http/tool_call_grammar.hpp"

#include <boost/json.hpp>

#include "grammar/json_schema.hpp"

namespace conveyor::http {
namespace {

using grammar::Alternative;
using grammar::ByteSet;
using grammar::Element;
using grammar::GrammarBuilder;

Alternative joined(Alternative a, const Alternative& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

Expected<Element> arguments(GrammarBuilder& b, const ToolSpec& tool) {
  grammar::JsonSchemaOptions options;
  options.strict = tool.strict;
  // Arguments are an object even when the schema leaves "type" out (a
  // schema of "properties" alone also allows strings and numbers).
  boost::json::value parameters = tool.parameters;
  if (boost::json::object* o = parameters.if_object(); o != nullptr && !o->contains("type")) (*o)["type"] = "object";
  auto schema = grammar::add_json_schema(b, parameters, options);
  if (!schema) return make_error(schema.error().code, "function '" + tool.name + "': " + schema.error().message);
  return schema;
}

// One alternative per tool the choice allows, each `call(tool, its arguments)`.
template <class Call>
Expected<Alternative> per_tool(GrammarBuilder& b, const std::vector<ToolSpec>& tools, const ToolChoice& choice,
                               Call call) {
  std::vector<Alternative> alts;
  for (const ToolSpec& tool : tools) {
    if (choice.mode == ToolChoice::Mode::function && tool.name != choice.function) continue;
    auto args = arguments(b, tool);
    if (!args) return args.error();
    alts.push_back(call(tool, *args));
  }
  if (alts.empty())
    return make_error(Errc::invalid_argument, "tool_choice names '" + choice.function + "', which is not among the tools");
  return Alternative{b.choice(std::move(alts), "call")};
}

// {"name": "f", "<key>": ARGS}
Expected<Alternative> call_object(GrammarBuilder& b, const std::vector<ToolSpec>& tools, const ToolChoice& choice,
                                  std::string_view key) {
  return per_tool(b, tools, choice, [&](const ToolSpec& tool, Element args) {
    Alternative alt = b.literal("{\"name\": \"" + tool.name + "\", \"" + std::string(key) + "\": ");
    alt.push_back(args);
    alt.push_back(b.byte('}'));
    return alt;
  });
}

// `call`, and when parallel more of them, each after `separator`.
Alternative repeated(GrammarBuilder& b, const Alternative& call, std::string_view separator, bool parallel) {
  if (!parallel) return call;
  Alternative out = call;
  out.push_back(b.star(joined(b.literal(separator), call)));
  return out;
}

// Text that does not contain `trigger`, then optionally the trigger and
// `after`: one rule per state of the trigger's KMP automaton (state i: the
// text ends with the trigger's first i bytes), so each byte moves to the
// state the automaton would, and the byte that would complete the trigger
// goes on to `after` instead.
Element text_then(GrammarBuilder& b, std::string_view trigger, const Alternative& after) {
  const size_t m = trigger.size();
  std::vector<size_t> border(m + 1, 0);  // border[i]: the longest proper border of trigger[0, i)
  for (size_t i = 1, k = 0; i < m; ++i) {
    while (k > 0 && trigger[i] != trigger[k]) k = border[k];
    if (trigger[i] == trigger[k]) ++k;
    border[i + 1] = k;
  }
  auto next = [&](size_t state, uint8_t c) {
    while (state > 0 && uint8_t(trigger[state]) != c) state = border[state];
    return uint8_t(trigger[state]) == c ? state + 1 : 0;
  };
  std::vector<int32_t> rules(m);
  for (size_t i = 0; i < m; ++i) rules[i] = b.add_rule("text");
  for (size_t i = 0; i < m; ++i) {
    std::vector<ByteSet> to(m + 1);
    for (int c = 0; c < 256; ++c) to[next(i, uint8_t(c))].set(uint8_t(c));
    b.add_alternative(rules[i], {});  // the answer may end here
    for (size_t j = 0; j < m; ++j) {
      if (!to[j].empty()) b.add_alternative(rules[i], {b.bytes(to[j]), b.rule_ref(rules[j])});
    }
    if (!to[m].empty()) b.add_alternative(rules[i], joined({b.bytes(to[m])}, after));
  }
  return b.rule_ref(rules[0]);
}

// A Mistral marker as the grammar reads it: its control token, or its text.
Alternative marker(GrammarBuilder& b, int32_t token, std::string_view text) {
  return token >= 0 ? Alternative{b.token(token)} : b.literal(text);
}

// What follows Mistral's first [TOOL_CALLS]: the list, or the newer form's
// f[ARGS]ARGS, with more calls each after another [TOOL_CALLS].
Expected<Alternative> mistral_calls(GrammarBuilder& b, const ToolCallSyntax& syntax, const std::vector<ToolSpec>& tools,
                                    const ToolChoice& choice, bool parallel) {
  if (!syntax.named_calls) {
    auto object = call_object(b, tools, choice, "arguments");
    if (!object) return object;
    return joined(joined(Alternative{b.optional(b.literal(" "))}, b.literal("[")),
                  joined(repeated(b, *object, ", ", parallel), b.literal("]")));
  }
  const Alternative args_marker = marker(b, syntax.args_token, kMistralArgs);
  auto call = per_tool(b, tools, choice, [&](const ToolSpec& tool, Element args) {
    Alternative alt = joined(b.literal(tool.name), args_marker);
    alt.push_back(args);
    return alt;
  });
  if (!call || !parallel) return call;
  Alternative out = *call;
  out.push_back(b.star(joined(marker(b, syntax.call_token, kMistralCalls), *call)));
  return out;
}

}  // namespace

Expected<grammar::Grammar> tool_call_grammar(const ToolCallSyntax& syntax, const std::vector<ToolSpec>& tools,
                                             const ToolChoice& choice, bool parallel) {
  if (choice.mode == ToolChoice::Mode::none)
    return make_error(Errc::invalid_argument, "tool_choice \"none\" constrains nothing");
  GrammarBuilder b;
  const int32_t root = b.add_rule("root");
  const bool free_text = choice.mode == ToolChoice::Mode::automatic;
  int32_t trigger = -1;
  switch (syntax.format) {
    case ToolCallFormat::hermes: {
      auto object = call_object(b, tools, choice, "arguments");
      if (!object) return object.error();
      static constexpr std::string_view kOpen = "<tool_call>";
      const Alternative rest = joined(joined(b.literal("\n"), *object), b.literal("\n</tool_call>"));
      const Alternative call = joined(b.literal(kOpen), rest);
      if (!free_text) {
        b.add_alternative(root, repeated(b, call, "\n", parallel));
      } else {
        Alternative after = rest;
        if (parallel) after.push_back(b.star(joined(b.literal("\n"), call)));
        b.add_alternative(root, {text_then(b, kOpen, after)});
      }
      break;
    }
    case ToolCallFormat::llama3_json: {
      auto object = call_object(b, tools, choice, "parameters");
      if (!object) return object.error();
      b.add_alternative(root, repeated(b, *object, "; ", parallel));
      if (free_text) {  // an answer that does not open with '{' is prose
        ByteSet not_brace, any;
        any.set_range(0, 255);
        not_brace.set_range(0, '{' - 1);
        not_brace.set_range('{' + 1, 255);
        b.add_alternative(root, {});
        b.add_alternative(root, {b.bytes(not_brace), b.star({b.bytes(any)})});
      }
      break;
    }
    case ToolCallFormat::mistral: {
      auto calls = mistral_calls(b, syntax, tools, choice, parallel);
      if (!calls) return calls.error();
      if (!free_text) {
        b.add_alternative(root, joined(marker(b, syntax.call_token, kMistralCalls), *calls));
      } else if (syntax.call_token >= 0) {
        b.add_alternative(root, *calls);
        trigger = syntax.call_token;
      } else {
        b.add_alternative(root, {text_then(b, kMistralCalls, *calls)});
      }
      break;
    }
  }
  auto g = std::move(b).build(root);
  if (g) g->trigger_token = trigger;
  return g;
}

ConstraintResult tool_call_constraint(const ApiRequest& request, const ToolCallSyntax& syntax,
                                      ConstraintCompiler& compiler) {
  const ToolChoice& choice = request.tool_choice;
  if (request.tools_json.empty() || choice.mode == ToolChoice::Mode::none) return GrammarConstraint{};
  if (request.constraint.kind != OutputConstraint::Kind::none) {
    // With auto the model may answer in prose, so the answer's own
    // constraint wins and calls are only read; a forced call cannot follow both.
    if (choice.mode == ToolChoice::Mode::automatic) return GrammarConstraint{};
    const std::string& field = request.constraint.field;
    return bad_request("'" + field + "' cannot be combined with a tool_choice that forces a call", field);
  }
  auto tools = parse_tools(request.tools_json);
  if (!tools) return bad_request(tools.error().message, "tools");
  std::string key = "tools|";
  key.append(to_string(syntax.format)).append(syntax.named_calls ? "|named|" : "|").append(std::to_string(int(choice.mode)));
  key.append("|").append(choice.function).append(request.parallel_tool_calls ? "|parallel|" : "|single|");
  key.append(std::to_string(syntax.call_token)).append("|").append(std::to_string(syntax.args_token)).append("|");
  key.append(request.tools_json);
  ConstraintResult compiled = compiler.compile_grammar(
      key, [&] { return tool_call_grammar(syntax, *tools, choice, request.parallel_tool_calls); }, "tools");
  // A schema the compiler cannot hold a call to does not fail an auto
  // request, which asked for no guarantee: its calls are read, unconstrained.
  if (choice.mode == ToolChoice::Mode::automatic && std::holds_alternative<ApiError>(compiled))
    return GrammarConstraint{};
  return compiled;
}

}  // namespace conveyor::http
