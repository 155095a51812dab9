// Tool calls read from model output (http/tool_calls.hpp): the three
// families' syntaxes, text that only looks like a call, the declared tools'
// validation, and the streaming reader against the whole-text one, cut at
// every byte.
#include "http/tool_calls.hpp"

#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <random>
#include <string>
#include <vector>

namespace conveyor::http {
namespace {

// Ids call_0, call_1, ... so that two readings of one text compare equal.
ToolCallStream::IdMaker counting_ids() {
  auto next = std::make_shared<int>(0);
  return [next] { return "call_" + std::to_string((*next)++); };
}

ParsedAnswer parse(ToolCallFormat f, std::string_view text) { return parse_tool_calls(f, text, counting_ids()); }

struct Streamed {
  std::string content;
  std::vector<ToolCall> calls;
  std::vector<ToolCallDelta> deltas;
  bool complete = false;
};

// Feeds `text` in pieces cut at `cuts` (byte offsets, increasing).
Streamed stream(ToolCallFormat f, std::string_view text, const std::vector<size_t>& cuts) {
  ToolCallStream s(f, counting_ids());
  ToolCallOutput out;
  size_t at = 0;
  for (size_t cut : cuts) {
    s.feed(text.substr(at, cut - at), out);
    at = cut;
  }
  s.feed(text.substr(at), out);
  s.finish(out);
  Streamed r;
  r.content = out.content;
  r.deltas = out.calls;
  append_deltas(out.calls, r.calls);
  r.complete = s.calls_complete();
  return r;
}

Streamed stream_bytes(ToolCallFormat f, std::string_view text) {
  std::vector<size_t> cuts;
  for (size_t i = 1; i < text.size(); ++i) cuts.push_back(i);
  return stream(f, text, cuts);
}

void expect_same(const Streamed& a, const Streamed& b, const std::string& what) {
  EXPECT_EQ(a.content, b.content) << what;
  ASSERT_EQ(a.calls.size(), b.calls.size()) << what;
  for (size_t i = 0; i < a.calls.size(); ++i) {
    EXPECT_EQ(a.calls[i].id, b.calls[i].id) << what;
    EXPECT_EQ(a.calls[i].name, b.calls[i].name) << what;
    EXPECT_EQ(a.calls[i].arguments, b.calls[i].arguments) << what;
  }
  EXPECT_EQ(a.complete, b.complete) << what;
}

// Every split into two pieces and into single bytes reads as the whole.
void expect_split_invariant(ToolCallFormat f, std::string_view text) {
  const Streamed whole = stream(f, text, {});
  expect_same(stream_bytes(f, text), whole, "bytes: " + std::string(text));
  for (size_t cut = 1; cut < text.size(); ++cut)
    expect_same(stream(f, text, {cut}), whole, "cut at " + std::to_string(cut) + ": " + std::string(text));
}

void expect_call(const ToolCall& call, std::string_view name, std::string_view arguments) {
  EXPECT_EQ(call.name, name);
  EXPECT_EQ(call.arguments, arguments);
  EXPECT_FALSE(call.id.empty());
}

constexpr ToolCallFormat kHermes = ToolCallFormat::hermes;
constexpr ToolCallFormat kLlama = ToolCallFormat::llama3_json;
constexpr ToolCallFormat kMistral = ToolCallFormat::mistral;

TEST(ToolCallsHermes, OneCallWithoutContent) {
  const ParsedAnswer a =
      parse(kHermes, "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\", \"days\": [1, 2]}}\n</tool_call>");
  EXPECT_FALSE(a.content.has_value());
  ASSERT_EQ(a.calls.size(), 1u);
  expect_call(a.calls[0], "get_weather", R"({"city":"Oslo","days":[1,2]})");
  EXPECT_EQ(a.calls[0].id, "call_0");
}

TEST(ToolCallsHermes, ContentThenTwoCalls) {
  const std::string text =
      "Let me check both.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>\n"
      "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Rome and \\\"Ostia\\\"\"}}\n</tool_call>";
  const ParsedAnswer a = parse(kHermes, text);
  ASSERT_TRUE(a.content.has_value());
  EXPECT_EQ(*a.content, "Let me check both.\n");
  ASSERT_EQ(a.calls.size(), 2u);
  expect_call(a.calls[0], "get_weather", R"({"city":"Oslo"})");
  expect_call(a.calls[1], "get_weather", R"({"city":"Rome and \"Ostia\""})");
  EXPECT_NE(a.calls[0].id, a.calls[1].id);
  expect_split_invariant(kHermes, text);
}

TEST(ToolCallsHermes, WhitespaceInsideStringsIsKept) {
  const ParsedAnswer a = parse(kHermes, "<tool_call>{ \"arguments\" : { \"q\" : \" a  b \\n\" } , \"name\" : \"search\" }</tool_call>");
  ASSERT_EQ(a.calls.size(), 1u);
  expect_call(a.calls[0], "search", R"({"q":" a  b \n"})");  // arguments before the name: held until it is known
}

TEST(ToolCallsHermes, NoArgumentsIsAnEmptyObject) {
  const ParsedAnswer a = parse(kHermes, "<tool_call>\n{\"name\": \"now\"}\n</tool_call>");
  ASSERT_EQ(a.calls.size(), 1u);
  expect_call(a.calls[0], "now", "{}");
}

TEST(ToolCallsHermes, MissingClosingTagAtTheEndIsAccepted) {
  const ParsedAnswer a = parse(kHermes, "<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n");
  ASSERT_EQ(a.calls.size(), 1u);
  expect_call(a.calls[0], "now", "{}");
}

TEST(ToolCallsHermes, TextThatOnlyLooksLikeACallStaysContent) {
  for (const std::string text : {"a <b> and <tool_cal", "1 < 2, <tool_call> not json", "<tool_call>\n{\"x\": 1}\n</tool_call>",
                                 "<tool_call>{\"name\": 5}</tool_call>", "plain text\n"}) {
    const ParsedAnswer a = parse(kHermes, text);
    EXPECT_TRUE(a.calls.empty()) << text;
    ASSERT_TRUE(a.content.has_value()) << text;
    EXPECT_EQ(*a.content, text);
    const Streamed s = stream_bytes(kHermes, text);
    EXPECT_EQ(s.content, text);  // streamed as it was written: nothing lost or held
    EXPECT_TRUE(s.calls.empty());
  }
}

// A call that max_tokens cut short: the stream had sent its name and a piece
// of its arguments, and the whole answer says the same (as OpenAI's does).
TEST(ToolCallsHermes, ACallCutShortIsACallCutShort) {
  const std::string text = "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Os";
  const ParsedAnswer a = parse(kHermes, text);
  ASSERT_EQ(a.calls.size(), 1u);
  EXPECT_EQ(a.calls[0].name, "get_weather");
  EXPECT_EQ(a.calls[0].arguments, R"({"city":"Os)");
  EXPECT_FALSE(a.calls_complete);
  EXPECT_FALSE(a.content);
  const Streamed s = stream_bytes(kHermes, text);
  ASSERT_EQ(s.calls.size(), 1u);
  EXPECT_EQ(s.calls[0].arguments, R"({"city":"Os)");
  EXPECT_FALSE(s.complete);
}

// max_tokens that cut a call before its name (after a whole call, or at
// once): the tag and the piece of object are a call cut off, not prose (the
// answer said "\n<tool_call>\n" as content); a text that ends by itself
// there keeps them as text.
TEST(ToolCallsHermes, ACallCutBeforeItsNameIsDroppedNotContent) {
  const std::string whole = "<tool_call>\n{\"name\": \"now\", \"arguments\": {}}\n</tool_call>";
  for (const std::string& cut : {std::string("\n<tool_call>\n"), std::string("\n<tool_call>\n{\"name\": \"get_weat")}) {
    const std::string text = whole + cut;
    const ParsedAnswer a = parse_tool_calls(kHermes, text, counting_ids(), /*cut_short=*/true);
    ASSERT_EQ(a.calls.size(), 1u) << text;
    expect_call(a.calls[0], "now", "{}");
    EXPECT_FALSE(a.content) << *a.content;
    EXPECT_FALSE(a.calls_complete);
    const ParsedAnswer ended = parse(kHermes, text);  // stopped by itself: the text stays
    EXPECT_EQ(ended.content.value_or(""), cut);
  }
  const ParsedAnswer only = parse_tool_calls(kHermes, "<tool_call>\n{\"name\": \"get_weat", counting_ids(), true);
  EXPECT_TRUE(only.calls.empty());
  EXPECT_EQ(only.content.value_or(""), "");
  // Streamed: nothing of it was sent before the end, and nothing is then.
  ToolCallStream s(kHermes, counting_ids());
  ToolCallOutput out;
  for (char c : whole + "\n<tool_call>\n{\"na") s.feed(std::string_view(&c, 1), out);
  s.finish(out, /*cut_short=*/true);
  EXPECT_EQ(out.content, "");
  EXPECT_FALSE(s.calls_complete());
  // A JSON answer cut short where a bare '{' may open a call (Llama 3.1) is
  // the answer's text.
  const std::string json_answer = "{\"summary\": \"the weather in Os";
  EXPECT_EQ(parse_tool_calls(kLlama, json_answer, counting_ids(), true).content.value_or(""), json_answer);
  EXPECT_EQ(parse_tool_calls(kLlama, "{\"na", counting_ids(), true).content.value_or(""), "{\"na");
}

// Arguments that are not an object break the call where they start: the
// rest is content, streamed or not.
TEST(ToolCallsHermes, ArgumentsThatAreNotAnObjectAreContent) {
  const std::string text = "<tool_call>{\"name\": \"f\", \"arguments\": 5}</tool_call>";
  const ParsedAnswer a = parse(kHermes, text);
  const Streamed s = stream_bytes(kHermes, text);
  EXPECT_EQ(a.content.value_or(""), s.content);
  ASSERT_EQ(a.calls.size(), s.calls.size());
  for (const ToolCall& call : a.calls) EXPECT_EQ(call.arguments, "") << "no argument was read";
  EXPECT_NE(s.content.find('5'), std::string::npos) << s.content;
  EXPECT_FALSE(a.calls_complete);
}

TEST(ToolCallsStreaming, TheFirstFragmentNamesTheCallAndArgumentsFlowBeforeItEnds) {
  ToolCallStream s(kHermes, counting_ids());
  ToolCallOutput out;
  s.feed("Sure. <tool", out);
  EXPECT_EQ(out.content, "Sure. ");  // "<tool" may open a call: held back
  s.feed("_call>\n{\"name\": \"get_weather\", \"argu", out);
  ASSERT_EQ(out.calls.size(), 1u);
  EXPECT_TRUE(out.calls[0].first);
  EXPECT_EQ(out.calls[0].index, 0);
  EXPECT_EQ(out.calls[0].id, "call_0");
  EXPECT_EQ(out.calls[0].name, "get_weather");
  EXPECT_EQ(out.calls[0].arguments, "");
  out = {};
  s.feed("ments\": {\"city\": \"Pa", out);
  ASSERT_EQ(out.calls.size(), 1u);
  EXPECT_FALSE(out.calls[0].first);
  EXPECT_EQ(out.calls[0].index, 0);
  EXPECT_EQ(out.calls[0].arguments, R"({"city":"Pa)");
  out = {};
  s.feed("ris\"}}\n</tool_call>", out);
  s.finish(out);
  ASSERT_EQ(out.calls.size(), 1u);
  EXPECT_EQ(out.calls[0].arguments, R"(ris"})");
  EXPECT_EQ(out.content, "");
  EXPECT_EQ(s.calls_started(), 1);
  EXPECT_TRUE(s.calls_complete());
}

TEST(ToolCallsLlama3, ABareObjectAnswerIsACall) {
  const std::string text = " {\"name\": \"get_weather\", \"parameters\": {\"city\": \"Oslo\", \"n\": 3, \"ok\": true}}";
  const ParsedAnswer a = parse(kLlama, text);
  EXPECT_FALSE(a.content.has_value());
  ASSERT_EQ(a.calls.size(), 1u);
  expect_call(a.calls[0], "get_weather", R"({"city":"Oslo","n":3,"ok":true})");
  expect_split_invariant(kLlama, text);
}

TEST(ToolCallsLlama3, PythonTagAndSeveralCalls) {
  const std::string text =
      "<|python_tag|>{\"type\": \"function\", \"name\": \"a\", \"parameters\": {\"x\": 1}}; "
      "{\"name\": \"b\", \"parameters\": {}}\n{\"name\": \"c\", \"parameters\": {\"y\": [null, -1.5e3]}}";
  const ParsedAnswer a = parse(kLlama, text);
  EXPECT_FALSE(a.content.has_value());
  ASSERT_EQ(a.calls.size(), 3u);
  expect_call(a.calls[0], "a", R"({"x":1})");
  expect_call(a.calls[1], "b", "{}");
  expect_call(a.calls[2], "c", R"({"y":[null,-1.5e3]})");
  expect_split_invariant(kLlama, text);
}

TEST(ToolCallsLlama3, ProseIsContent) {
  for (const std::string text : {"{curly} prose", "The answer is {\"name\": \"x\"}.", "{\"a\": 1}", "Hello"}) {
    const ParsedAnswer a = parse(kLlama, text);
    EXPECT_TRUE(a.calls.empty()) << text;
    EXPECT_EQ(a.content, text);
    EXPECT_EQ(stream_bytes(kLlama, text).content, text);
  }
}

TEST(ToolCallsMistral, TheListWithAndWithoutItsControlToken) {
  for (const std::string text :
       {"[TOOL_CALLS][{\"name\": \"a\", \"arguments\": {\"x\": 1}}, {\"name\": \"b\", \"arguments\": {\"s\": \"]}\"}}]",
        "[{\"name\": \"a\", \"arguments\": {\"x\": 1}},{\"name\":\"b\",\"arguments\":{\"s\":\"]}\"}}]"}) {
    const ParsedAnswer a = parse(kMistral, text);
    EXPECT_FALSE(a.content.has_value()) << text;
    ASSERT_EQ(a.calls.size(), 2u) << text;
    expect_call(a.calls[0], "a", R"({"x":1})");
    expect_call(a.calls[1], "b", R"({"s":"]}"})");
    expect_split_invariant(kMistral, text);
  }
}

TEST(ToolCallsMistral, TheNewerNameArgsForm) {
  for (const std::string text : {"[TOOL_CALLS]get_weather[ARGS]{\"city\": \"Oslo\"}[TOOL_CALLS]now[ARGS]{}",
                                 "[TOOL_CALLS]get_weather{\"city\": \"Oslo\"}[TOOL_CALLS]now{}"}) {
    const ParsedAnswer a = parse(kMistral, text);
    ASSERT_EQ(a.calls.size(), 2u) << text;
    expect_call(a.calls[0], "get_weather", R"({"city":"Oslo"})");
    expect_call(a.calls[1], "now", "{}");
    expect_split_invariant(kMistral, text);
  }
}

TEST(ToolCallsMistral, ProseWithBracketsIsContent) {
  for (const std::string text : {"[1, 2, 3]", "see [TOOL_CALLS] later", "[citation needed]"}) {
    const ParsedAnswer a = parse(kMistral, text);
    EXPECT_TRUE(a.calls.empty()) << text;
    EXPECT_EQ(a.content, text);
  }
}

TEST(ToolCallsMistral, IdsAreNineLettersAndDigits) {
  const ParsedAnswer a = parse_tool_calls(kMistral, "[TOOL_CALLS][{\"name\": \"a\", \"arguments\": {}}]");
  ASSERT_EQ(a.calls.size(), 1u);
  EXPECT_EQ(a.calls[0].id.size(), 9u);
  const std::string openai = make_tool_call_id(kHermes);
  EXPECT_TRUE(openai.starts_with("call_"));
  EXPECT_EQ(openai.size(), 29u);
  EXPECT_NE(openai, make_tool_call_id(kHermes));
}

TEST(ToolCallsStreaming, EveryCutOfMixedTextReadsAsTheWhole) {
  const std::pair<ToolCallFormat, std::string> cases[] = {
      {kHermes, "  \n<tool_call>\n{\"name\": \"f\", \"arguments\": {\"a\": \"<tool_call>\"}}\n</tool_call>\n\nAfter <tool_c"},
      {kHermes, "x<<tool_call>{\"name\":\"f\",\"arguments\":{}}</tool_call> tail"},
      {kHermes, "<tool_call>{\"name\": \"f\", \"arguments\": {\"a\": 1}"},
      {kLlama, "{\"name\": \"f\", \"parameters\": {\"q\": \"{\\\"a\\\": 1}\"}} and then prose"},
      {kLlama, "{\"nam"},
      {kMistral, "Calling: [TOOL_CALLS] [ {\"name\": \"f\", \"arguments\": {\"k\": [1, {\"x\": \"y\"}]}} ] done"},
  };
  for (const auto& [format, text] : cases) expect_split_invariant(format, text);
}

// Random texts built from the formats' pieces (triggers, brackets, keys,
// quotes, escapes, prose): whatever the model writes, streaming in any cuts
// reads as the whole does, and parse_tool_calls gives only calls whose
// arguments are JSON objects, or else the text as written.
TEST(ToolCallsStreaming, RandomTextsReadTheSameInAnyCuts) {
  const std::vector<std::string> pieces = {
      "<tool_call>", "</tool_call>", "[TOOL_CALLS]", "[ARGS]", "<|python_tag|>", "<tool_", "{", "}", "[", "]",
      "\"name\"", "\"arguments\"", "\"parameters\"", ": ", ":", ", ", ",", "\"f\"", "\"g-1\"", "\"\\\"\"",
      "\"x y\"", "12", "-3.5e2", "true", "null", " ", "\n", ";", "é", "prose", "<", "\\", "\""};
  std::mt19937 rng(20261202);
  int with_calls = 0, without = 0;
  for (ToolCallFormat format : {kHermes, kLlama, kMistral}) {
    for (int round = 0; round < 400; ++round) {
      std::string text;
      // Often a well-formed call in the family's syntax, then noise.
      if (round % 2 == 0) {
        const std::string call = "{\"name\": \"f\", \"arguments\": {\"a\": [1, \"}\"]}}";
        text = format == kHermes ? "<tool_call>" + call + "</tool_call>" : format == kMistral ? "[" + call + "]" : call;
      }
      const int n = int(rng() % 12);
      for (int i = 0; i < n; ++i) text += pieces[rng() % pieces.size()];
      const Streamed whole = stream(format, text, {});
      std::vector<size_t> cuts;
      for (size_t at = 1 + rng() % 3; at < text.size(); at += 1 + rng() % 4) cuts.push_back(at);
      expect_same(stream(format, text, cuts), whole, text);
      expect_same(stream_bytes(format, text), whole, text);
      // A whole answer is what its stream adds up to.
      const ParsedAnswer a = parse(format, text);
      EXPECT_EQ(a.content.value_or(""), whole.content) << text;
      EXPECT_EQ(a.calls_complete, whole.complete) << text;
      ASSERT_EQ(a.calls.size(), whole.calls.size()) << text;
      for (size_t i = 0; i < a.calls.size(); ++i) {
        EXPECT_EQ(a.calls[i].name, whole.calls[i].name) << text;
        EXPECT_EQ(a.calls[i].arguments, whole.calls[i].arguments) << text;
        if (a.calls_complete) {  // then every call's arguments are an object
          boost::system::error_code ec;
          EXPECT_TRUE(boost::json::parse(a.calls[i].arguments, ec).is_object() && !ec) << text;
        }
      }
      if (a.calls.empty()) {
        EXPECT_EQ(a.content.value_or(""), text);  // no call began: the text as written
      }
      ++(a.calls.empty() ? without : with_calls);
    }
  }
  EXPECT_GT(with_calls, 100);  // both kinds of text were exercised
  EXPECT_GT(without, 100);
}

TEST(ToolCallFormats, DetectedFromTheTemplateOrSet) {
  EXPECT_EQ(detect_tool_call_format("{{- '<tool_call>\\n' }}"), ToolCallFormat::hermes);
  EXPECT_EQ(detect_tool_call_format("{{ '[TOOL_CALLS]' }}"), ToolCallFormat::mistral);
  EXPECT_EQ(detect_tool_call_format("{{ '<|start_header_id|>ipython<|end_header_id|>' }}"), ToolCallFormat::llama3_json);
  EXPECT_EQ(detect_tool_call_format(""), ToolCallFormat::hermes);
  EXPECT_EQ(resolve_tool_call_format(ToolCallParser::mistral, "<tool_call>"), ToolCallFormat::mistral);
  EXPECT_EQ(resolve_tool_call_format(ToolCallParser::automatic, "<tool_call>"), ToolCallFormat::hermes);
  EXPECT_EQ(parse_tool_call_parser("llama3_json").value(), ToolCallParser::llama3_json);
  EXPECT_FALSE(parse_tool_call_parser("qwen").has_value());
}

TEST(ToolSpecs, AreParsedWithDefaults) {
  auto tools = parse_tools(R"([{"type": "function", "function": {"name": "get_weather", "description": "d",
      "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}},
      {"function": {"name": "now", "strict": false}}])");
  ASSERT_TRUE(tools.has_value()) << tools.error().message;
  ASSERT_EQ(tools->size(), 2u);
  EXPECT_EQ((*tools)[0].name, "get_weather");
  EXPECT_EQ((*tools)[0].description, "d");
  EXPECT_TRUE((*tools)[0].strict);
  EXPECT_TRUE((*tools)[0].parameters.as_object().contains("properties"));
  EXPECT_EQ((*tools)[1].name, "now");
  EXPECT_FALSE((*tools)[1].strict);
  EXPECT_EQ((*tools)[1].parameters.as_object().at("type"), "object");  // none given: any object
}

TEST(ToolSpecs, RefuseWhatOpenAiRefuses) {
  const std::pair<const char*, const char*> cases[] = {
      {R"({"a": 1})", "must be an array"},
      {R"([1])", "tools[0] must be an object"},
      {R"([{"type": "custom", "custom": {"name": "x"}}])", "tools[0].type must be \"function\""},
      {R"([{"type": "function"}])", "tools[0].function must be an object"},
      {R"([{"type": "function", "function": {"name": "has space"}}])", "must be 1 to 64 letters"},
      {R"([{"type": "function", "function": {"name": ""}}])", "must be 1 to 64 letters"},
      {R"([{"type": "function", "function": {}}])", "tools[0].function.name must be a string"},
      {R"([{"type": "function", "function": {"name": "f", "parameters": []}}])", "must be a JSON Schema object"},
      {R"([{"type": "function", "function": {"name": "f", "parameters": {"type": "string"}}}])",
       "must describe an object"},
      {R"([{"type": "function", "function": {"name": "f", "strict": "yes"}}])", "strict must be a boolean"},
      {R"([{"type": "function", "function": {"name": "f"}}, {"type": "function", "function": {"name": "f"}}])",
       "tools[1].function.name 'f' is declared twice"},
  };
  for (const auto& [json, message] : cases) {
    auto tools = parse_tools(json);
    ASSERT_FALSE(tools.has_value()) << json;
    EXPECT_NE(tools.error().message.find(message), std::string::npos) << json << " -> " << tools.error().message;
  }
  const std::string name65(65, 'a');
  EXPECT_FALSE(parse_tools(R"([{"type": "function", "function": {"name": ")" + name65 + R"("}}])").has_value());
}

}  // namespace
}  // namespace conveyor::http
