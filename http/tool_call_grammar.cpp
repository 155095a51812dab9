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

// {"name": "f", "<key>": ARGS}: one alternative per tool the choice allows.
Expected<Alternative> call_object(GrammarBuilder& b, const std::vector<ToolSpec>& tools, const ToolChoice& choice,
                                  std::string_view key) {
  std::vector<Alternative> alts;
  for (const ToolSpec& tool : tools) {
    if (choice.mode == ToolChoice::Mode::function && tool.name != choice.function) continue;
    auto args = arguments(b, tool);
    if (!args) return args.error();
    Alternative alt = b.literal("{\"name\": \"" + tool.name + "\", \"" + std::string(key) + "\": ");
    alt.push_back(*args);
    alt.push_back(b.byte('}'));
    alts.push_back(std::move(alt));
  }
  if (alts.empty())
    return make_error(Errc::invalid_argument, "tool_choice names '" + choice.function + "', which is not among the tools");
  return Alternative{b.choice(std::move(alts), "call")};
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

}  // namespace

int32_t tool_call_token(ToolCallFormat format, const Tokenizer& tokenizer) {
  if (format != ToolCallFormat::mistral) return -1;
  const std::vector<int32_t> ids =
      tokenizer.encode("[TOOL_CALLS]", EncodeOptions{.add_bos = false, .parse_special = true});
  return ids.size() == 1 && tokenizer.token_bytes(ids[0]).empty() ? ids[0] : -1;
}

bool constrains_tool_calls(ToolCallFormat format, const ToolChoice& choice, int32_t call_token) {
  switch (choice.mode) {
    case ToolChoice::Mode::none: return false;
    case ToolChoice::Mode::required:
    case ToolChoice::Mode::function: return true;
    case ToolChoice::Mode::automatic: return format != ToolCallFormat::mistral || call_token >= 0;
  }
  return false;
}

Expected<grammar::Grammar> tool_call_grammar(ToolCallFormat format, const std::vector<ToolSpec>& tools,
                                             const ToolChoice& choice, bool parallel, int32_t call_token) {
  if (!constrains_tool_calls(format, choice, call_token))
    return make_error(Errc::invalid_argument, std::string("tool_choice does not constrain ") + to_string(format));
  GrammarBuilder b;
  const int32_t root = b.add_rule("root");
  const bool free_text = choice.mode == ToolChoice::Mode::automatic;
  const bool llama = format == ToolCallFormat::llama3_json;
  auto object = call_object(b, tools, choice, llama ? "parameters" : "arguments");
  if (!object) return object.error();
  switch (format) {
    case ToolCallFormat::hermes: {
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
    case ToolCallFormat::llama3_json:
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
    case ToolCallFormat::mistral: {
      Alternative list = joined(joined(b.literal("["), repeated(b, *object, ", ", parallel)), b.literal("]"));
      // After the control token Mistral's templates write " [" (one SentencePiece token).
      if (free_text) list.insert(list.begin(), b.optional(b.literal(" ")));
      b.add_alternative(root, list);
      break;
    }
  }
  auto g = std::move(b).build(root);
  if (g && format == ToolCallFormat::mistral && free_text) g->trigger_token = call_token;
  return g;
}

ConstraintResult tool_call_constraint(const ApiRequest& request, ToolCallFormat format, int32_t call_token,
                                      ConstraintCompiler& compiler) {
  const ToolChoice& choice = request.tool_choice;
  if (request.tools_json.empty() || !constrains_tool_calls(format, choice, call_token)) return GrammarConstraint{};
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
  key.append(to_string(format)).append("|").append(std::to_string(int(choice.mode))).append("|");
  key.append(choice.function).append(request.parallel_tool_calls ? "|parallel|" : "|single|");
  key.append(std::to_string(call_token)).append("|").append(request.tools_json);
  ConstraintResult compiled = compiler.compile_grammar(
      key, [&] { return tool_call_grammar(format, *tools, choice, request.parallel_tool_calls, call_token); },
      "tools");
  // A schema the compiler cannot hold a call to does not fail an auto
  // request, which asked for no guarantee: its calls are read, unconstrained.
  if (choice.mode == ToolChoice::Mode::automatic && std::holds_alternative<ApiError>(compiled))
    return GrammarConstraint{};
  return compiled;
}

}  // namespace conveyor::http
