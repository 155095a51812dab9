// The table of request fields (http/request_fields.hpp), walked: every field
// marked implemented parses with a valid value; every field marked refused
// is answered with 400 naming it, except for its harmless values; fields in
// no row are refused as unrecognized.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "http/api_request.hpp"
#include "http/request_fields.hpp"

namespace conveyor::http {
namespace {

// A valid value for every implemented field (the test fails when a field is
// added to the table without one here), with the members it needs.
const std::map<std::string_view, std::string_view> kExamples = {
    {"model", R"("m")"},
    {"max_tokens", "5"},
    {"temperature", "0.5"},
    {"top_p", "0.9"},
    {"n", "2"},
    {"stream", "true"},
    {"stream_options", R"({"include_usage": true})"},
    {"stop", R"(["x"])"},
    {"logit_bias", R"({"65": 5, "66": -100})"},
    {"seed", "7"},
    {"presence_penalty", "0.1"},
    {"frequency_penalty", "0.1"},
    {"logprobs", "true"},
    {"user", R"("u")"},
    {"session_id", R"("s")"},
    {"prompt", R"("hello")"},
    {"messages", R"([{"role": "user", "content": "hi"}])"},
    {"max_completion_tokens", "5"},
    {"top_logprobs", R"(2, "logprobs": true)"},  // needs logprobs on chat
    {"prompt_cache_key", R"("k")"},
    {"safety_identifier", R"("s")"},
    {"top_k", "5"},
    {"min_p", "0.05"},
    {"repetition_penalty", "1.1"},
    {"ignore_eos", "true"},
    {"stop_token_ids", "[2, 3]"},
    {"priority", "3"},
    {"return_token_ids", "true"},
    {"echo", "true"},
    {"prompt_logprobs", "0"},  // more is refused where the answer streams (the WebSocket)
    {"response_format", R"({"type": "json_object"})"},
    {"structured_outputs", R"({"regex": "[a-z]+"})"},
    {"json_schema", R"({"type": "integer"})"},
    {"grammar", R"("root ::= \"a\"")"},
    {"add_special_tokens", "false"},
    {"parse_special", "false"},
    {"add_generation_prompt", "false"},
    {"chat_template_kwargs", R"({"enable_thinking": false})"},
    {"tools", R"([{"type": "function", "function": {"name": "f", "parameters": {}}}])"},
    {"tool_choice", R"("auto")"},
    {"parallel_tool_calls", "false"},
    {"id", R"("r1")"},
    {"type", R"("completion")"},
    // /v1/embeddings' own (tests/http/embeddings_test.cpp parses them).
    {"input", R"("hello")"},
    {"encoding_format", R"("base64")"},
    {"dimensions", "64"},
};

struct Target {
  Endpoint endpoint;
  uint8_t scope;
  std::string base;  // the required fields, as JSON members
};

const Target kTargets[] = {
    {Endpoint::completions, kCompletions, R"("prompt": "x")"},
    {Endpoint::chat, kChat, R"("messages": [{"role": "user", "content": "x"}])"},
    {Endpoint::render, kRender, R"("messages": [{"role": "user", "content": "x"}])"},
    {Endpoint::websocket, kWebSocket, R"("id": "w", "prompt": "x")"},
};

std::string body_with(const Target& t, std::string_view name, std::string_view value) {
  std::string body = "{" + t.base;
  if (t.base.find("\"" + std::string(name) + "\"") == std::string::npos) {
    body += ", \"";
    body.append(name).append("\": ").append(value);
  }
  return body + "}";
}

TEST(RequestFields, EveryImplementedFieldParses) {
  int checked = 0;
  for (const RequestField& f : request_fields()) {
    if (f.support != FieldSupport::implemented) continue;
    const auto example = kExamples.find(f.name);
    ASSERT_NE(example, kExamples.end()) << "no example value for '" << f.name << "'";
    for (const Target& t : kTargets) {
      if (!(f.scope & t.scope)) continue;
      // A WebSocket request takes prompt or messages, not both (its base has a prompt).
      if (t.endpoint == Endpoint::websocket && f.name == "messages") continue;
      const ParseResult r = parse_api_request(body_with(t, f.name, example->second), t.endpoint);
      EXPECT_FALSE(r.error) << f.name << ": " << (r.error ? r.error->message : "");
      ++checked;
    }
  }
  EXPECT_GT(checked, 30);
}

TEST(RequestFields, EveryRefusedFieldIsRefusedByNameUnlessHarmless) {
  int refused = 0;
  for (const RequestField& f : request_fields()) {
    if (f.support != FieldSupport::refused) continue;
    EXPECT_FALSE(f.note.empty()) << f.name;
    for (const Target& t : kTargets) {
      if (!(f.scope & scope_of(t.endpoint))) continue;
      if (find_request_field(f.name, scope_of(t.endpoint))->support != FieldSupport::refused) continue;
      const ParseResult r = parse_api_request(body_with(t, f.name, R"({"asks": "something"})"), t.endpoint);
      ASSERT_TRUE(r.error) << f.name << " was accepted";
      EXPECT_EQ(r.error->status, 400);
      EXPECT_EQ(r.error->param, f.name);
      EXPECT_NE(r.error->message.find(std::string(f.name)), std::string::npos) << r.error->message;
      ++refused;
      // Each harmless value, spelled with spaces, passes.
      std::string_view harmless = f.harmless;
      while (!harmless.empty()) {
        const size_t bar = harmless.find('|');
        std::string spaced;
        for (char c : harmless.substr(0, bar)) spaced += c == ':' || c == ',' ? std::string(1, c) + " " : std::string(1, c);
        const ParseResult ok = parse_api_request(body_with(t, f.name, spaced), t.endpoint);
        EXPECT_FALSE(ok.error) << f.name << " = " << spaced << ": " << ok.error->message;
        harmless = bar == std::string_view::npos ? std::string_view() : harmless.substr(bar + 1);
      }
    }
  }
  EXPECT_GT(refused, 20);
}

TEST(RequestFields, TheOpenAiFieldsAreAllInTheTable) {
  // The request bodies of POST /v1/completions and /v1/chat/completions in
  // OpenAI's API reference.
  const std::set<std::string_view> completions = {
      "model", "prompt", "best_of", "echo", "frequency_penalty", "logit_bias", "logprobs",
      "max_tokens", "n", "presence_penalty", "seed", "stop", "stream", "stream_options",
      "suffix", "temperature", "top_p", "user"};
  const std::set<std::string_view> chat = {
      "messages", "model", "audio", "frequency_penalty", "function_call", "functions",
      "logit_bias", "logprobs", "max_completion_tokens", "max_tokens", "metadata", "modalities",
      "n", "parallel_tool_calls", "prediction", "presence_penalty", "prompt_cache_key",
      "reasoning_effort", "response_format", "safety_identifier", "seed", "service_tier", "stop",
      "store", "stream", "stream_options", "temperature", "tool_choice", "tools", "top_logprobs",
      "top_p", "user", "verbosity", "web_search_options"};
  for (std::string_view name : completions)
    EXPECT_NE(find_request_field(name, kCompletions), nullptr) << name;
  for (std::string_view name : chat) EXPECT_NE(find_request_field(name, kChat), nullptr) << name;
}

TEST(RequestFields, UnknownFieldsAreRefusedAsUnrecognized) {
  const ParseResult r = parse_api_request(R"({"prompt": "x", "max_tokenz": 5})", Endpoint::completions);
  ASSERT_TRUE(r.error);
  EXPECT_EQ(r.error->param, "max_tokenz");
  EXPECT_NE(r.error->message.find("unrecognized request field 'max_tokenz'"), std::string::npos);
  // A chat-only field on completions is unknown there.
  const ParseResult c = parse_api_request(R"({"prompt": "x", "tools": []})", Endpoint::completions);
  ASSERT_TRUE(c.error);
  EXPECT_EQ(c.error->param, "tools");
  // null counts as absent, even for refused fields.
  EXPECT_FALSE(parse_api_request(R"({"prompt": "x", "logit_bias": null})", Endpoint::completions).error);
}

// logit_bias's keys are token ids as strings; the engine gets them sorted,
// each once (a key given twice: its last value, as JSON readers do).
TEST(RequestFields, LogitBiasIsSortedByToken) {
  const ParseResult r =
      parse_api_request(R"({"prompt": "x", "logit_bias": {"66": 1, "65": -2.5, "66": 3}})", Endpoint::completions);
  ASSERT_FALSE(r.error) << r.error->message;
  const auto& bias = r.request.sampling.logit_bias;
  ASSERT_EQ(bias.size(), 2u);
  EXPECT_EQ(bias[0].token, 65);
  EXPECT_EQ(bias[0].bias, -2.5f);
  EXPECT_EQ(bias[1].token, 66);
  EXPECT_EQ(bias[1].bias, 3.0f);
  for (const char* bad : {R"({"-1": 1})", R"({"1.5": 1})", R"({"": 1})", R"({"7": true})"}) {
    const ParseResult e = parse_api_request(std::string(R"({"prompt": "x", "logit_bias": )") + bad + "}",
                                            Endpoint::completions);
    ASSERT_TRUE(e.error) << bad;
    EXPECT_EQ(e.error->param, "logit_bias") << bad;
  }
}

TEST(RequestFields, NonTextContentPartsAreRefused) {
  const ParseResult r = parse_api_request(
      R"({"messages": [{"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}]}]})",
      Endpoint::chat);
  ASSERT_TRUE(r.error);
  EXPECT_NE(r.error->message.find("image_url"), std::string::npos);
}

}  // namespace
}  // namespace conveyor::http
