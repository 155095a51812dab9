// The grammars that hold tool calls to their family's syntax and their
// functions' schemas (http/tool_call_grammar.hpp), run through the
// production matcher over a one-byte-per-token vocabulary: what a grammar
// lets through is what a model could write. Every accepted call is also read
// back by the output parser (tool_calls.hpp), so grammar and parser agree.
#include "http/tool_call_grammar.hpp"

#include <gtest/gtest.h>

#include "grammar/matcher.hpp"

namespace conveyor::http {
namespace {

// Tokens 0-255 are the bytes; 256 ends the answer; 257 is a control token
// (Mistral's [TOOL_CALLS]).
constexpr int32_t kCallToken = 257;
std::shared_ptr<const grammar::TokenIndex> byte_vocabulary() {
  static const auto vocab = [] {
    grammar::VocabularyBytes v;
    for (int b = 0; b < 256; ++b) v.tokens.push_back(std::string(1, char(b)));
    v.tokens.push_back("");
    v.tokens.push_back("");
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

class Language {
 public:
  Language(ToolCallFormat format, ToolChoice choice, bool parallel, int32_t call_token = -1) : format_(format) {
    auto g = tool_call_grammar(format, tools(), choice, parallel, call_token);
    EXPECT_TRUE(g) << g.error().message;
    auto compiled = grammar::compile(std::move(*g), byte_vocabulary());
    EXPECT_TRUE(compiled) << compiled.error().message;
    compiled_ = *compiled;
  }
  // The whole text is an answer the grammar allows (and may end there).
  bool accepts(std::string_view text) const {
    grammar::Matcher m(compiled_);
    return m.accept_bytes(text) && m.can_end();
  }
  // The same with Mistral's call token between `before` and `after`.
  bool accepts(std::string_view before, std::string_view after) const {
    grammar::Matcher m(compiled_);
    return m.accept_bytes(before) && m.accept_token(kCallToken) && m.accept_bytes(after) && m.can_end();
  }
  ToolCallFormat format() const { return format_; }

 private:
  ToolCallFormat format_;
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
  EXPECT_FALSE(tool_call_grammar(ToolCallFormat::hermes, tools(), named("missing"), false).has_value());
}

TEST(ToolCallGrammar, LlamaAndMistralSyntax) {
  const std::string oslo = "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\"}}";
  const Language llama(ToolCallFormat::llama3_json, required(), true);
  expect_calls(llama, oslo, {"get_weather"});
  expect_calls(llama, oslo + "; {\"name\": \"now\", \"parameters\": {}}", {"get_weather", "now"});
  EXPECT_FALSE(llama.accepts(kOslo));  // "arguments" is Hermes' key
  const Language mistral(ToolCallFormat::mistral, required(), true);
  expect_calls(mistral, "[" + kOslo + ", " + kNow + "]", {"get_weather", "now"});
  EXPECT_FALSE(mistral.accepts(kOslo));
  const Language mistral_one(ToolCallFormat::mistral, required(), false);
  EXPECT_FALSE(mistral_one.accepts("[" + kOslo + ", " + kNow + "]"));
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
  const Language l(ToolCallFormat::mistral, automatic(), true, kCallToken);
  EXPECT_TRUE(l.accepts(""));
  EXPECT_TRUE(l.accepts("Anything at all, [{\"name\": 1} included."));
  EXPECT_TRUE(l.accepts("", "[" + kOslo + ", " + kNow + "]"));
  EXPECT_TRUE(l.accepts("Let me look. ", "[" + kNow + "]"));
  EXPECT_TRUE(l.accepts("", " [" + kNow + "]")) << "as Mistral's templates write it";
  EXPECT_FALSE(l.accepts("", "  [" + kNow + "]"));
  EXPECT_FALSE(l.accepts("", "[{\"name\": \"get_weather\", \"arguments\": {\"town\": 1}}]"));
  EXPECT_FALSE(l.accepts("", "[" + kNow + "] and more text"));
  EXPECT_FALSE(l.accepts("", "")) << "the token opens a list of calls";
  const Language one(ToolCallFormat::mistral, automatic(), false, kCallToken);
  EXPECT_FALSE(one.accepts("", "[" + kOslo + ", " + kNow + "]"));
  // The text shows the token to the parser, which reads the calls after it.
  const ParsedAnswer a = parse_tool_calls(ToolCallFormat::mistral, "Let me look. [TOOL_CALLS][" + kNow + "]");
  ASSERT_EQ(a.calls.size(), 1u);
  EXPECT_EQ(a.calls[0].name, "now");
}

TEST(ToolCallGrammar, WhichChoicesConstrain) {
  EXPECT_FALSE(constrains_tool_calls(ToolCallFormat::hermes, ToolChoice{ToolChoice::Mode::none, {}}));
  EXPECT_FALSE(constrains_tool_calls(ToolCallFormat::mistral, automatic()));
  EXPECT_TRUE(constrains_tool_calls(ToolCallFormat::mistral, automatic(), kCallToken));
  EXPECT_TRUE(constrains_tool_calls(ToolCallFormat::mistral, required()));
  EXPECT_TRUE(constrains_tool_calls(ToolCallFormat::hermes, automatic()));
  EXPECT_FALSE(tool_call_grammar(ToolCallFormat::mistral, tools(), automatic(), true).has_value());
}

TEST(ToolCallGrammar, ArgumentsAreAnObjectEvenWhenTheSchemaSaysNoType) {
  auto untyped = parse_tools(R"([{"type": "function", "function": {"name": "f", "parameters": {
      "properties": {"a": {"type": "integer"}}}}}])");
  ASSERT_TRUE(untyped);
  auto g = tool_call_grammar(ToolCallFormat::hermes, *untyped, required(), false);
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
  auto g = tool_call_grammar(ToolCallFormat::hermes, *bad, required(), false);
  ASSERT_FALSE(g);
  EXPECT_NE(g.error().message.find("function 'odd'"), std::string::npos) << g.error().message;
  EXPECT_NE(g.error().message.find("multipleOf"), std::string::npos) << g.error().message;
}

}  // namespace
}  // namespace conveyor::http
