// Tool calling through the server's pieces, without a network: the request
// fields (tools, tool_choice, parallel_tool_calls, tool messages), Qwen's
// real templates and a Llama 3.x-style one rendering a history with calls
// and results, the
// format chosen from the template, and the chat answers CompletionJob writes
// (whole, SSE, WebSocket).
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include "http/api_request.hpp"
#include "http/chat_template.hpp"
#include "http/completion_job.hpp"
#include "http/request_plan.hpp"
#include "model/formats/dummy.hpp"

namespace conveyor::http {
namespace {

namespace json = boost::json;

const std::string kTemplates = std::string(CONVEYOR_SOURCE_DIR) + "/tests/template/data/templates/";
const std::string kLlamaTools = std::string(CONVEYOR_SOURCE_DIR) + "/tests/http/data/llama3_tools.jinja";

constexpr const char* kWeatherTool =
    R"({"type": "function", "function": {"name": "get_weather", "description": "Weather in a city",
        "parameters": {"type": "object", "properties": {"city": {"type": "string"}}, "required": ["city"]}}})";

std::string chat_body(std::string_view extra) {
  return std::string(R"({"messages": [{"role": "user", "content": "Weather in Oslo?"}], "tools": [)") +
         kWeatherTool + "]" + std::string(extra) + "}";
}

ParseResult parse_chat(std::string_view body) { return parse_api_request(body, Endpoint::chat); }

TEST(ToolCallRequest, ReadsToolsChoiceAndParallel) {
  ParseResult r = parse_chat(chat_body(R"(, "tool_choice": "required", "parallel_tool_calls": false)"));
  ASSERT_FALSE(r.error) << r.error->message;
  EXPECT_NE(r.request.tools_json.find("get_weather"), std::string::npos);
  EXPECT_EQ(r.request.tool_choice.mode, ToolChoice::Mode::required);
  EXPECT_FALSE(r.request.parallel_tool_calls);

  r = parse_chat(chat_body(R"(, "tool_choice": {"type": "function", "function": {"name": "get_weather"}})"));
  ASSERT_FALSE(r.error) << r.error->message;
  EXPECT_EQ(r.request.tool_choice.mode, ToolChoice::Mode::function);
  EXPECT_EQ(r.request.tool_choice.function, "get_weather");

  r = parse_chat(chat_body(""));
  ASSERT_FALSE(r.error);
  EXPECT_EQ(r.request.tool_choice.mode, ToolChoice::Mode::automatic);  // OpenAI's default with tools
  EXPECT_TRUE(r.request.parallel_tool_calls);

  r = parse_chat(R"({"messages": [{"role": "user", "content": "x"}], "tools": [], "tool_choice": "none"})");
  ASSERT_FALSE(r.error);
  EXPECT_TRUE(r.request.tools_json.empty());  // no tools
}

TEST(ToolCallRequest, RefusesWithANamedParam) {
  const std::pair<std::string, std::string> cases[] = {
      {chat_body(R"(, "tool_choice": "sometimes")"), "tool_choice"},
      {chat_body(R"(, "tool_choice": {"type": "function", "function": {"name": "get_time"}})"), "tool_choice"},
      {chat_body(R"(, "tool_choice": {"type": "function"})"), "tool_choice"},
      {chat_body(R"(, "parallel_tool_calls": "yes")"), "parallel_tool_calls"},
      {R"({"messages": [{"role": "user", "content": "x"}], "tool_choice": "required"})", "tool_choice"},
      {R"({"messages": [{"role": "user", "content": "x"}], "tools": {"type": "function"}})", "tools"},
      {R"({"messages": [{"role": "user", "content": "x"}], "tools": [{"type": "function", "function": {"name": "a b"}}]})",
       "tools"},
      {R"({"messages": [{"role": "assistant", "content": null, "tool_calls": {"id": "x"}}]})", "messages"},
      {R"({"messages": [{"role": "assistant", "tool_calls": [{"id": "x", "function": {"arguments": "{}"}}]}]})",
       "messages"},
      {R"({"messages": [{"role": "tool", "content": "x", "tool_call_id": 5}]})", "tool_call_id"},
  };
  for (const auto& [body, param] : cases) {
    const ParseResult r = parse_chat(body);
    ASSERT_TRUE(r.error) << body;
    EXPECT_EQ(r.error->status, 400);
    EXPECT_EQ(r.error->param, param) << body << " -> " << r.error->message;
  }
  // Tools on a WebSocket completion (a prompt, no messages).
  const ParseResult ws = parse_api_request(
      std::string(R"({"id": 1, "prompt": "x", "tools": [)") + kWeatherTool + "]}", Endpoint::websocket);
  ASSERT_TRUE(ws.error);
  EXPECT_EQ(ws.error->param, "tools");
}

// The history an agent sends back: the assistant's call (content null,
// arguments a JSON string) and the tool's result.
constexpr const char* kHistory = R"({"messages": [
    {"role": "user", "content": "Weather in Oslo?"},
    {"role": "assistant", "content": null, "tool_calls": [{"id": "call_1", "type": "function",
        "function": {"name": "get_weather", "arguments": "{\"city\": \"Oslo\"}"}}]},
    {"role": "tool", "tool_call_id": "call_1", "name": "get_weather", "content": "-3 C, snow"}],
  "tools": [)";

ApiRequest history_request() {
  ParseResult r = parse_chat(std::string(kHistory) + kWeatherTool + "]}");
  EXPECT_FALSE(r.error) << r.error->message;
  return std::move(r.request);
}

TEST(ToolCallRequest, ToolMessagesFillTheirFields) {
  const ApiRequest r = history_request();
  ASSERT_EQ(r.messages.size(), 3u);
  EXPECT_EQ(r.messages[1].content, "");
  EXPECT_NE(r.messages[1].tool_calls_json.find("call_1"), std::string::npos);
  EXPECT_EQ(r.messages[2].role, "tool");
  EXPECT_EQ(r.messages[2].tool_call_id, "call_1");
  EXPECT_EQ(r.messages[2].name, "get_weather");
  EXPECT_EQ(r.messages[2].content, "-3 C, snow");
}

std::string render(const std::string& template_path, const ApiRequest& r) {
  auto chat = make_chat_template(template_path, "", make_byte_tokenizer());
  EXPECT_TRUE(chat) << chat.error().message;
  auto prompt = (*chat)->apply(r.messages, {.tools_json = r.tools_json});
  EXPECT_TRUE(prompt) << prompt.error().message;
  return prompt ? prompt->text : std::string();
}

TEST(ToolCallTemplates, QwenRendersTheCallAndTheResult) {
  const ApiRequest r = history_request();
  for (const char* name : {"qwen2_5.jinja", "qwen3.jinja"}) {
    const std::string text = render(kTemplates + name, r);
    // The arguments string became an object that tojson writes back.
    EXPECT_NE(text.find("<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Oslo\"}}\n</tool_call>"),
              std::string::npos)
        << name << ":\n" << text;
    EXPECT_NE(text.find("<tool_response>\n-3 C, snow\n</tool_response>"), std::string::npos) << name;
    EXPECT_NE(text.find("\"name\": \"get_weather\", \"description\": \"Weather in a city\""), std::string::npos)
        << name;  // the tools in the system prompt
  }
}

TEST(ToolCallTemplates, LlamaRendersTheCallAsParametersAndTheResultAsIpython) {
  const std::string text = render(kLlamaTools, history_request());
  EXPECT_NE(text.find("Environment: ipython"), std::string::npos) << text;
  EXPECT_NE(text.find("<|start_header_id|>assistant<|end_header_id|>\n\n{\"name\": \"get_weather\", \"parameters\": "
                      "{\"city\": \"Oslo\"}}<|eot_id|>"),
            std::string::npos)
      << text;
  // A string is iterable in Jinja: the template writes the result as JSON.
  EXPECT_NE(text.find("<|start_header_id|>ipython<|end_header_id|>\n\n\"-3 C, snow\"<|eot_id|>"), std::string::npos)
      << text;
  // Messages without calls have no tool_calls key ('tool_calls' in message is false for them).
  EXPECT_NE(text.find("Weather in Oslo?<|eot_id|>"), std::string::npos) << text;
}

// Mistral's form and markers come from the template and the vocabulary.
TEST(ToolCallTemplates, MistralsSyntaxFromTheTemplateAndTheVocabulary) {
  Vocabulary v = byte_vocabulary(260);
  v.pieces[258] = "[TOOL_CALLS]";
  v.types[258] = TokenType::control;
  v.pieces[259] = "[ARGS]";
  v.types[259] = TokenType::control;
  const auto tokenizer = make_bpe_tokenizer(v).value();
  const std::string newer = "{% for c in m.tool_calls %}[TOOL_CALLS]{{ c.name }}[ARGS]{{ c.arguments }}{% endfor %}";
  const std::string list = "[TOOL_CALLS] {{ m.tool_calls | tojson }}";

  const ToolCallSyntax named = tool_call_syntax(ToolCallFormat::mistral, newer, tokenizer.get());
  EXPECT_TRUE(named.named_calls);
  EXPECT_EQ(named.call_token, 258);
  EXPECT_EQ(named.args_token, 259);
  EXPECT_EQ(named.shown_tokens(), (std::vector<int32_t>{258, 259}));

  const ToolCallSyntax listed = tool_call_syntax(ToolCallFormat::mistral, list, tokenizer.get());
  EXPECT_FALSE(listed.named_calls);
  EXPECT_EQ(listed.call_token, 258);
  EXPECT_EQ(listed.args_token, -1) << "the list form has no [ARGS]";
  EXPECT_EQ(listed.shown_tokens(), std::vector<int32_t>{258});

  // A vocabulary that spells the markers as text, and no vocabulary.
  const auto bytes = make_byte_tokenizer();
  const ToolCallSyntax text = tool_call_syntax(ToolCallFormat::mistral, newer, bytes.get());
  EXPECT_TRUE(text.named_calls);
  EXPECT_EQ(text.call_token, -1);
  EXPECT_EQ(text.args_token, -1);
  EXPECT_TRUE(text.shown_tokens().empty());
  EXPECT_EQ(tool_call_syntax(ToolCallFormat::mistral, newer, nullptr).call_token, -1);
  // Other families have no control tokens to show.
  const ToolCallSyntax hermes = tool_call_syntax(ToolCallFormat::hermes, newer, tokenizer.get());
  EXPECT_FALSE(hermes.named_calls);
  EXPECT_TRUE(hermes.shown_tokens().empty());
}

TEST(ToolCallTemplates, TheFormatComesFromTheTemplateOrTheSetting) {
  ModelConfig config;
  config.vocab_size = 258;
  config.context_length = 4096;
  auto qwen = make_model_context(config, make_byte_tokenizer(), "m", kTemplates + "qwen2_5.jinja", "");
  ASSERT_TRUE(qwen) << qwen.error().message;
  EXPECT_EQ(qwen->tool_calls.format, ToolCallFormat::hermes);
  auto llama = make_model_context(config, make_byte_tokenizer(), "m", kLlamaTools, "");
  ASSERT_TRUE(llama);
  EXPECT_EQ(llama->tool_calls.format, ToolCallFormat::llama3_json);
  auto forced = make_model_context(config, make_byte_tokenizer(), "m", kLlamaTools, "", ToolCallParser::mistral);
  ASSERT_TRUE(forced);
  EXPECT_EQ(forced->tool_calls.format, ToolCallFormat::mistral);

  // tool_choice none: the tools reach the template, the output is not read for calls.
  ParseResult none = parse_chat(chat_body(R"(, "tool_choice": "none")"));
  ASSERT_FALSE(none.error);
  auto plan = plan_request(none.request, *qwen);
  ASSERT_TRUE(std::holds_alternative<RequestPlan>(plan));
  EXPECT_FALSE(std::get<RequestPlan>(plan).tool_calls.has_value());
  ParseResult automatic = parse_chat(chat_body(""));
  plan = plan_request(automatic.request, *qwen);
  ASSERT_TRUE(std::holds_alternative<RequestPlan>(plan));
  EXPECT_EQ(std::get<RequestPlan>(plan).tool_calls, ToolCallFormat::hermes);
}

// ---- the answers ----------------------------------------------------------------

JobSpec tool_spec(OutputMode mode, int32_t n = 1) {
  JobSpec s;
  s.mode = mode;
  s.chat = true;
  s.response_id = "chatcmpl-1";
  s.model = "m";
  s.prompts = {{1, 2, 3}};
  s.n = n;
  s.tool_calls = ToolCallFormat::hermes;
  return s;
}

StreamEvent event(std::string text, FinishReason finish = FinishReason::none, int32_t index = 0) {
  StreamEvent e;
  e.index = index;
  e.text = std::move(text);
  e.token_ids = {7};
  e.finish = finish;
  return e;
}

const std::vector<std::string> kCallPieces = {"<tool_", "call>\n{\"name\": \"get_weather\", ", "\"arguments\": {\"ci",
                                              "ty\": \"Oslo\"}}\n</tool_call>"};

TEST(ToolCallAnswers, WholeMessageHasToolCallsAndNullContent) {
  CompletionJob job(tool_spec(OutputMode::body, 2));
  std::vector<std::string> out;
  for (const std::string& piece : kCallPieces) job.on_event(0, event(piece), out);
  job.on_event(0, event("", FinishReason::stop), out);
  job.on_event(1, event("No call here.", FinishReason::stop, 1), out);
  ASSERT_TRUE(job.done());
  const json::array choices = json::parse(job.body()).as_object().at("choices").as_array();
  const json::object& called = choices[0].as_object();
  const json::object& message = called.at("message").as_object();
  EXPECT_TRUE(message.at("content").is_null());
  const json::array& calls = message.at("tool_calls").as_array();
  ASSERT_EQ(calls.size(), 1u);
  EXPECT_TRUE(calls[0].at("id").as_string().starts_with("call_"));
  EXPECT_EQ(calls[0].at("type"), "function");
  EXPECT_EQ(calls[0].at("function").at("name"), "get_weather");
  EXPECT_EQ(calls[0].at("function").at("arguments"), R"({"city":"Oslo"})");
  EXPECT_EQ(called.at("finish_reason"), "tool_calls");
  // Per choice: the other one answered in prose.
  EXPECT_EQ(choices[1].at("message").at("content"), "No call here.");
  EXPECT_FALSE(choices[1].at("message").as_object().contains("tool_calls"));
  EXPECT_EQ(choices[1].at("finish_reason"), "stop");
}

// Cut short by max_tokens, a call is a call whose arguments are cut short
// too, finish_reason length: what the stream's deltas add up to.
TEST(ToolCallAnswers, ACallCutByMaxTokensIsACallAndLength) {
  CompletionJob job(tool_spec(OutputMode::body));
  std::vector<std::string> out;
  job.on_event(0, event(kCallPieces[0] + kCallPieces[1], FinishReason::length), out);
  const json::object choice = json::parse(job.body()).as_object().at("choices").as_array()[0].as_object();
  EXPECT_EQ(choice.at("finish_reason"), "length");
  const json::object& message = choice.at("message").as_object();
  ASSERT_TRUE(message.contains("tool_calls")) << json::serialize(choice);
  EXPECT_EQ(message.at("tool_calls").as_array().size(), 1u);

  CompletionJob streamed(tool_spec(OutputMode::sse));
  std::vector<std::string> chunks;
  streamed.on_event(0, event(kCallPieces[0] + kCallPieces[1], FinishReason::length), chunks);
  std::string arguments;
  for (const std::string& chunk : chunks) {
    if (chunk == "[DONE]") continue;
    const json::value parsed = json::parse(chunk);
    const json::object& delta = parsed.at("choices").as_array()[0].at("delta").as_object();
    if (const json::value* calls = delta.if_contains("tool_calls"))
      for (const json::value& call : calls->as_array()) arguments += call.at("function").at("arguments").as_string();
  }
  EXPECT_EQ(message.at("tool_calls").as_array()[0].at("function").at("arguments").as_string(), arguments);
}

TEST(ToolCallAnswers, SseDeltasAssembleIntoOneCall) {
  CompletionJob job(tool_spec(OutputMode::sse));
  std::vector<std::string> out;
  job.on_event(0, event("Checking. "), out);
  for (const std::string& piece : kCallPieces) job.on_event(0, event(piece), out);
  job.on_event(0, event("", FinishReason::stop), out);
  ASSERT_EQ(out.back(), "[DONE]");
  std::string content, id, name, arguments, finish;
  int fragments = 0;
  for (size_t i = 0; i + 1 < out.size(); ++i) {
    const json::object chunk = json::parse(out[i]).as_object();
    EXPECT_EQ(chunk.at("object"), "chat.completion.chunk");
    const json::object& choice = chunk.at("choices").as_array()[0].as_object();
    const json::object& delta = choice.at("delta").as_object();
    if (const json::value* c = delta.if_contains("content"); c != nullptr && !c->is_null())
      content += json::value_to<std::string>(*c);
    if (delta.contains("tool_calls") && id.empty()) {
      EXPECT_TRUE(!delta.contains("content") || delta.at("content").is_null()) << out[i];
    }
    if (const json::value* calls = delta.if_contains("tool_calls")) {
      for (const json::value& call : calls->as_array()) {
        ++fragments;
        EXPECT_EQ(call.at("index"), 0);
        const json::object& fn = call.at("function").as_object();
        if (call.as_object().contains("id")) {
          EXPECT_TRUE(id.empty()) << "one first fragment";
          id = json::value_to<std::string>(call.at("id"));
          EXPECT_EQ(call.at("type"), "function");
          name = json::value_to<std::string>(fn.at("name"));
        } else {
          EXPECT_FALSE(fn.contains("name"));
        }
        arguments += json::value_to<std::string>(fn.at("arguments"));
      }
    }
    if (!choice.at("finish_reason").is_null()) finish = json::value_to<std::string>(choice.at("finish_reason"));
  }
  EXPECT_EQ(content, "Checking. ");
  EXPECT_TRUE(id.starts_with("call_"));
  EXPECT_EQ(name, "get_weather");
  EXPECT_EQ(arguments, R"({"city":"Oslo"})");
  EXPECT_GE(fragments, 2);  // the arguments flowed before the call ended
  EXPECT_EQ(finish, "tool_calls");
}

TEST(ToolCallAnswers, WebSocketDeltasAndFinalEvent) {
  CompletionJob job(tool_spec(OutputMode::websocket));
  std::vector<std::string> out;
  for (const std::string& piece : kCallPieces) job.on_event(0, event(piece), out);
  job.on_event(0, event("", FinishReason::stop), out);
  std::string arguments;
  for (size_t i = 0; i + 1 < out.size(); ++i) {
    const json::object e = json::parse(out[i]).as_object();
    EXPECT_EQ(e.at("type"), "delta");
    if (const json::value* calls = e.if_contains("tool_calls"))
      for (const json::value& call : calls->as_array())
        arguments += json::value_to<std::string>(call.at("function").at("arguments"));
  }
  EXPECT_EQ(arguments, R"({"city":"Oslo"})");
  const json::object final_event = json::parse(out.back()).as_object();
  EXPECT_EQ(final_event.at("type"), "final");
  EXPECT_EQ(final_event.at("finish_reason"), "tool_calls");
}

}  // namespace
}  // namespace conveyor::http
