// The grammars that hold tool calls to their family's syntax and their
// functions' schemas (http/tool_call_grammar.hpp), run through the
// production matcher over a one-byte-per-token vocabulary: what a grammar
// lets through is what a model could write. Every accepted call is also read
// back by the output parser (tool_calls.hpp), so grammar and parser agree.
#include "http/tool_call_grammar.hpp"

#include <gtest/gtest.h>

#include <algorithm>

#include "grammar/matcher.hpp"

namespace conveyor::http {
namespace {

// Tokens 0-255 are the bytes; 256 ends the answer; 257 and 258 are control
// tokens (Mistral's [TOOL_CALLS] and [ARGS]).
constexpr int32_t kCallToken = 257;
constexpr int32_t kArgsToken = 258;
std::shared_ptr<const grammar::TokenIndex> byte_vocabulary() {
  static const auto vocab = [] {
    grammar::VocabularyBytes v;
    for (int b = 0; b < 256; ++b) v.tokens.push_back(std::string(1, char(b)));
    for (int control = 0; control < 3; ++control) v.tokens.push_back("");
    v.end_ids = {256};
    return grammar::index_vocabulary(std::move(v));
  }();
  return vocab;
}

const std::vector<ToolSpec>& tools() {
  static const std::vector<ToolSpec> t = parse_tools(R"([
      {"type": "function", "function": {"name": "get_weather", "parameters": {"type": "object",
         "properties": {"city": {"type": "string"}, "unit": {"enum": ["c", "f"]}}, "required": ["city"]}}},
      {"type": "function", "function": {"name": "now", "parameters": {"type": "object", "properties": {}}}}])")
                                             .value();
  return t;
}

ToolCallSyntax syntax_of(ToolCallFormat format) { return ToolCallSyntax{.format = format}; }
// Mistral's list form, [TOOL_CALLS] a control token or (tokens false) text.
ToolCallSyntax mistral_list(bool tokens = true) {
  return ToolCallSyntax{.format = ToolCallFormat::mistral, .call_token = tokens ? kCallToken : -1};
}
// The newer form, [TOOL_CALLS]f[ARGS]{...}.
ToolCallSyntax mistral_named(bool tokens = true) {
  return ToolCallSyntax{.format = ToolCallFormat::mistral, .named_calls = true,
                        .call_token = tokens ? kCallToken : -1, .args_token = tokens ? kArgsToken : -1};
}

class Language {
 public:
  Language(ToolCallSyntax syntax, ToolChoice choice, bool parallel) : syntax_(syntax) {
    auto g = tool_call_grammar(syntax, tools(), choice, parallel);
    EXPECT_TRUE(g) << g.error().message;
    auto compiled = grammar::compile(std::move(*g), byte_vocabulary());
    EXPECT_TRUE(compiled) << compiled.error().message;
    compiled_ = *compiled;
  }
  Language(ToolCallFormat format, ToolChoice choice, bool parallel) : Language(syntax_of(format), choice, parallel) {}
  // The whole text is an answer the grammar allows (and may end there).
  // Mistral's markers in it are the syntax's control tokens where it has
  // them (as the model writes them), else text.
  bool accepts(std::string_view text) const {
    grammar::Matcher m(compiled_);
    while (!text.empty()) {
      const size_t calls = text.find(kMistralCalls), args = text.find(kMistralArgs);
      const size_t at = std::min(calls, args);
      const bool is_calls = at == calls;
      const int32_t token = at == std::string_view::npos ? -1 : is_calls ? syntax_.call_token : syntax_.args_token;
      const size_t marker = is_calls ? kMistralCalls.size() : kMistralArgs.size();
      const size_t bytes = token < 0 ? std::min(text.size(), at == std::string_view::npos ? text.size() : at + marker) : at;
      if (bytes > 0 && !m.accept_bytes(text.substr(0, bytes))) return false;
      text.remove_prefix(bytes);
      if (token >= 0) {
        if (!m.accept_token(token)) return false;
        text.remove_prefix(marker);
      }
    }
    return m.can_end();
  }
  // The same with every marker written as text.
  bool accepts_bytes(std::string_view text) const {
    grammar::Matcher m(compiled_);
    return m.accept_bytes(text) && m.can_end();
  }
  ToolCallFormat format() const { return syntax_.format; }

 private:
  ToolCallSyntax syntax_;
  std::shared_ptr<const grammar::CompiledGrammar> compiled_;
};

ToolChoice required() { return ToolChoice{ToolChoice::Mode::required, {}}; }
ToolChoice automatic() { return ToolChoice{ToolChoice::Mode::automatic, {}}; }
ToolChoice named(std::string name) { return ToolChoice{ToolChoice::Mode::function, std::move(name)}; }

void expect_calls(const Language& l, std::string_view text, std::vector<std::string> names) {
  EXPECT_TRUE(l.accepts(text)) << text;
  const ParsedAnswer a = parse_tool_calls(l.format(), text);
  ASSERT_EQ(a.calls.size(), names.size()) << text;
  for (size_t i = 0; i < names.size(); ++i) EXPECT_EQ(a.calls[i].name, names[i]) << text;
}

const std::string kOslo = "{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\", \"unit\": \"c\"}}";
const std::string kNow = "{\"name\": \"now\", \"arguments\": {}}";

TEST(ToolCallGrammar, HermesRequiredIsCallsOnly) {
  const Language one(ToolCallFormat::hermes, required(), /*parallel=*/false);
  expect_calls(one, "<tool_call>\n" + kOslo + "\n</tool_call>", {"get_weather"});
  expect_calls(one, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\":\"Oslo\"}}\n</tool_call>",
               {"get_weather"});
  expect_calls(one, "<tool_call>\n" + kNow + "\n</tool_call>", {"now"});
  EXPECT_FALSE(one.accepts(""));
  EXPECT_FALSE(one.accepts("Sure! <tool_call>\n" + kNow + "\n</tool_call>"));
  EXPECT_FALSE(one.accepts("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {}}\n</tool_call>"));  // city
  EXPECT_FALSE(one.accepts("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": 5}}\n</tool_call>"));
  EXPECT_FALSE(one.accepts("<tool_call>\n{\"name\": \"rm_rf\", \"arguments\": {}}\n</tool_call>"));
  EXPECT_FALSE(one.accepts("<tool_call>\n" + kNow + "\n</tool_call>\n<tool_call>\n" + kNow + "\n</tool_call>"));
  EXPECT_FALSE(one.accepts("<tool_call>\n" + kNow));  // cut short: may not end there

  const Language many(ToolCallFormat::hermes, required(), /*parallel=*/true);
  expect_calls(many, "<tool_call>\n" + kOslo + "\n</tool_call>\n<tool_call>\n" + kNow + "\n</tool_call>",
               {"get_weather", "now"});
}

TEST(ToolCallGrammar, ANamedChoiceAllowsOnlyThatFunction) {
  const Language l(ToolCallFormat::hermes, named("now"), false);
  expect_calls(l, "<tool_call>\n" + kNow + "\n</tool_call>", {"now"});
  EXPECT_FALSE(l.accepts("<tool_call>\n" + kOslo + "\n</tool_call>"));
  EXPECT_FALSE(tool_call_grammar(syntax_of(ToolCallFormat::hermes), tools(), named("missing"), false).has_value());
}

TEST(ToolCallGrammar, LlamaAndMistralSyntax) {
  const std::string oslo = "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}";
  const Language llama(ToolCallFormat::llama3_json, required(), true);
  expect_calls(llama, oslo, {"get_weather"});
  expect_calls(llama, oslo + "; {\"name\": \"now\", \"parameters\": {}}", {"get_weather", "now"});
  EXPECT_FALSE(llama.accepts(kOslo));  // "arguments" is Hermes' key
  const Language mistral(mistral_list(), required(), true);
  expect_calls(mistral, "[TOOL_CALLS][" + kOslo + ", " + kNow + "]", {"get_weather", "now"});
  expect_calls(mistral, "[TOOL_CALLS] [" + kNow + "]", {"now"});
  EXPECT_FALSE(mistral.accepts("[" + kOslo + "]")) << "the control token comes first";
  EXPECT_FALSE(mistral.accepts_bytes("[TOOL_CALLS][" + kOslo + "]")) << "the token, not its text";
  EXPECT_FALSE(mistral.accepts("[TOOL_CALLS]" + kOslo));
  const Language mistral_one(mistral_list(), required(), false);
  EXPECT_FALSE(mistral_one.accepts("[TOOL_CALLS][" + kOslo + ", " + kNow + "]"));
  // A vocabulary that spells [TOOL_CALLS] as text: the grammar asks for the text.
  const Language text(mistral_list(false), required(), false);
  expect_calls(text, "[TOOL_CALLS][" + kNow + "]", {"now"});
  EXPECT_FALSE(text.accepts("[" + kNow + "]"));
}

TEST(ToolCallGrammar, MistralsNewerFormNamesTheFunctionThenItsArguments) {
  const std::string oslo = "get_weather[ARGS]{\"city\": \"Oslo\", \"unit\": \"f\"}";
  const Language many(mistral_named(), required(), true);
  expect_calls(many, "[TOOL_CALLS]" + oslo, {"get_weather"});
  expect_calls(many, "[TOOL_CALLS]" + oslo + "[TOOL_CALLS]now[ARGS]{}", {"get_weather", "now"});
  EXPECT_FALSE(many.accepts(oslo)) << "[TOOL_CALLS] first";
  EXPECT_FALSE(many.accepts("[TOOL_CALLS]get_weather{\"city\": \"Oslo\"}")) << "[ARGS] between";
  EXPECT_FALSE(many.accepts_bytes("[TOOL_CALLS]" + oslo)) << "the tokens, not their text";
  EXPECT_FALSE(many.accepts("[TOOL_CALLS]get_weather[ARGS]{\"town\": \"Oslo\"}"));
  EXPECT_FALSE(many.accepts("[TOOL_CALLS]rm[ARGS]{}"));
  EXPECT_FALSE(many.accepts("[TOOL_CALLS]now[ARGS]{}[TOOL_CALLS]")) << "a call after each marker";
  EXPECT_FALSE(many.accepts("[TOOL_CALLS]now[ARGS]{}, now[ARGS]{}"));
  const Language one(mistral_named(), required(), false);
  expect_calls(one, "[TOOL_CALLS]now[ARGS]{}", {"now"});
  EXPECT_FALSE(one.accepts("[TOOL_CALLS]" + oslo + "[TOOL_CALLS]now[ARGS]{}"));
  const Language named_now(mistral_named(), named("now"), false);
  expect_calls(named_now, "[TOOL_CALLS]now[ARGS]{}", {"now"});
  EXPECT_FALSE(named_now.accepts("[TOOL_CALLS]" + oslo));
  // Markers the vocabulary spells as text are text in the grammar.
  const Language text(mistral_named(false), required(), true);
  expect_calls(text, "[TOOL_CALLS]" + oslo + "[TOOL_CALLS]now[ARGS]{}", {"get_weather", "now"});
  EXPECT_TRUE(text.accepts_bytes("[TOOL_CALLS]now[ARGS]{}"));
}

TEST(ToolCallGrammar, MistralsNewerFormWithAuto) {
  const Language l(mistral_named(), automatic(), true);
  EXPECT_TRUE(l.accepts(""));
  EXPECT_TRUE(l.accepts("Free text, now{} and [ARGS] as text included.")) << "[ARGS] before the call token is free";
  expect_calls(l, "Let me look. [TOOL_CALLS]now[ARGS]{}", {"now"});
  expect_calls(l, "[TOOL_CALLS]now[ARGS]{}[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Rome\"}", {"now", "get_weather"});
  EXPECT_FALSE(l.accepts("[TOOL_CALLS]now[ARGS]{} and more text"));
  EXPECT_FALSE(l.accepts("[TOOL_CALLS]"));
  // Without control tokens: text that avoids "[TOOL_CALLS]", then the calls.
  const Language text(mistral_named(false), automatic(), false);
  EXPECT_TRUE(text.accepts("Text with [TOOL_ and [ARGS] but not the marker"));
  expect_calls(text, "Let me look. [TOOL_CALLS]now[ARGS]{}", {"now"});
  EXPECT_FALSE(text.accepts("[TOOL_CALLS]nope[ARGS]{}"));
  EXPECT_FALSE(text.accepts("[TOOL_CALLS]now[ARGS]{}[TOOL_CALLS]now[ARGS]{}")) << "one call";
}

TEST(ToolCallGrammar, HermesAutoIsFreeTextUntilTheTagThenACall) {
  const Language l(ToolCallFormat::hermes, automatic(), true);
  EXPECT_TRUE(l.accepts(""));
  EXPECT_TRUE(l.accepts("The weather is fine. <tool_ or <tool_cal"));
  EXPECT_TRUE(l.accepts("ends inside the tag: <tool_cal"));
  expect_calls(l, "Let me look.\n<tool_call>\n" + kOslo + "\n</tool_call>", {"get_weather"});
  expect_calls(l, "<<tool_call>\n" + kNow + "\n</tool_call>", {"now"});  // the automaton's fallback
  expect_calls(l, "<tool_<tool_call>\n" + kNow + "\n</tool_call>\n<tool_call>\n" + kNow + "\n</tool_call>",
               {"now", "now"});
  EXPECT_FALSE(l.accepts("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"town\": 1}}\n</tool_call>"));
  EXPECT_FALSE(l.accepts("<tool_call>oops"));
  EXPECT_FALSE(l.accepts("<tool_call>\n" + kNow + "\n</tool_call> and more text"));
}

TEST(ToolCallGrammar, LlamaAutoIsACallOrProse) {
  const Language l(ToolCallFormat::llama3_json, automatic(), false);
  EXPECT_TRUE(l.accepts("Hello {there}"));
  EXPECT_TRUE(l.accepts(""));
  expect_calls(l, "{\"name\": \"now\", \"parameters\": {}}", {"now"});
  EXPECT_FALSE(l.accepts("{\"nme\": 1}"));
}

TEST(ToolCallGrammar, MistralAutoIsFreeTextUntilTheCallTokenThenTheList) {
  const Language l(mistral_list(), automatic(), true);
  EXPECT_TRUE(l.accepts(""));
  EXPECT_TRUE(l.accepts("Anything at all, [{\"name\": 1} included."));
  EXPECT_TRUE(l.accepts("[TOOL_CALLS][" + kOslo + ", " + kNow + "]"));
  EXPECT_TRUE(l.accepts("Let me look. [TOOL_CALLS][" + kNow + "]"));
  EXPECT_TRUE(l.accepts("[TOOL_CALLS] [" + kNow + "]")) << "as Mistral's templates write it";
  EXPECT_FALSE(l.accepts("[TOOL_CALLS]  [" + kNow + "]"));
  EXPECT_FALSE(l.accepts("[TOOL_CALLS][{\"name\": \"get_weather\", \"arguments\": {\"town\": 1}}]"));
  EXPECT_FALSE(l.accepts("[TOOL_CALLS][" + kNow + "] and more text"));
  EXPECT_FALSE(l.accepts("[TOOL_CALLS]")) << "the token opens a list of calls";
  const Language one(mistral_list(), automatic(), false);
  EXPECT_FALSE(one.accepts("[TOOL_CALLS][" + kOslo + ", " + kNow + "]"));
  // The text shows the token to the parser, which reads the calls after it.
  const ParsedAnswer a = parse_tool_calls(ToolCallFormat::mistral, "Let me look. [TOOL_CALLS][" + kNow + "]");
  ASSERT_EQ(a.calls.size(), 1u);
  EXPECT_EQ(a.calls[0].name, "now");
  // A vocabulary without the control token: text that avoids its spelling.
  const Language text(mistral_list(false), automatic(), false);
  expect_calls(text, "So: [TOOL_CALLS][" + kNow + "]", {"now"});
  EXPECT_FALSE(text.accepts("[TOOL_CALLS]nothing"));
}

TEST(ToolCallGrammar, NoneConstrainsNothing) {
  EXPECT_FALSE(tool_call_grammar(syntax_of(ToolCallFormat::hermes), tools(), ToolChoice{ToolChoice::Mode::none, {}},
                                 true).has_value());
}

TEST(ToolCallGrammar, ArgumentsAreAnObjectEvenWhenTheSchemaSaysNoType) {
  auto untyped = parse_tools(R"([{"type": "function", "function": {"name": "f", "parameters": {
      "properties": {"a": {"type": "integer"}}}}}])");
  ASSERT_TRUE(untyped);
  auto g = tool_call_grammar(syntax_of(ToolCallFormat::hermes), *untyped, required(), false);
  ASSERT_TRUE(g) << g.error().message;
  auto compiled = grammar::compile(std::move(*g), byte_vocabulary());
  ASSERT_TRUE(compiled);
  auto accepts = [&](std::string_view args) {
    grammar::Matcher m(*compiled);
    return m.accept_bytes("<tool_call>\n{\"name\": \"f\", \"arguments\": " + std::string(args) + "}\n</tool_call>") &&
           m.can_end();
  };
  EXPECT_TRUE(accepts("{\"a\": 1}"));
  EXPECT_FALSE(accepts("\"text\""));
  EXPECT_FALSE(accepts("5"));
}

TEST(ToolCallGrammar, ASchemaTheCompilerRefusesNamesItsFunction) {
  auto bad = parse_tools(R"([{"type": "function", "function": {"name": "odd", "parameters": {"type": "object",
      "properties": {"n": {"type": "integer", "multipleOf": 2}}}}}])");
  ASSERT_TRUE(bad);
  auto g = tool_call_grammar(syntax_of(ToolCallFormat::hermes), *bad, required(), false);
  ASSERT_FALSE(g);
  EXPECT_NE(g.error().message.find("function 'odd'"), std::string::npos) << g.error().message;
  EXPECT_NE(g.error().message.find("multipleOf"), std::string::npos) << g.error().message;
}

}  // namespace
}  // namespace conveyor::http
