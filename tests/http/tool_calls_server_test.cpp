// Tool calls end to end in-process: a server on the embedded model (byte
// vocabulary, plain template, so the Hermes syntax) answers forced calls
// over a whole body with n = 2, SSE and the WebSocket. The model knows
// nothing of tools: every call it makes is the constraint's doing, and each
// must name a declared function with arguments its schema accepts.
#include <algorithm>
#include <string>
#include <vector>

#include "model/formats/dummy.hpp"
#include "model/weights.hpp"
#include "tests/http/test_server.hpp"
#include "tests/http/test_util.hpp"

namespace conveyor::http::testing {
namespace {

namespace json = boost::json;

class ToolCallsServer : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = new TestServer(); }
  static void TearDownTestSuite() { delete server_; }
  static uint16_t port() { return server_->port(); }
  static Response post(const json::object& body) {
    return http_request(port(), "POST", "/v1/chat/completions", body_of(body),
                        {{"Content-Type", "application/json"}});
  }
  static TestServer* server_;
};
TestServer* ToolCallsServer::server_ = nullptr;

const json::array& tools() {
  static const json::array t = json::parse(R"([
    {"type": "function", "function": {"name": "set_alarm", "parameters": {"type": "object",
       "properties": {"hour": {"type": "integer", "minimum": 0, "maximum": 23},
                      "label": {"type": "string", "maxLength": 8},
                      "days": {"type": "array", "items": {"enum": ["mon", "tue"]}, "maxItems": 2}},
       "required": ["hour", "label", "days"]}}},
    {"type": "function", "function": {"name": "stop_alarm", "parameters": {"type": "object",
       "properties": {"all": {"type": "boolean"}}, "required": ["all"]}}}])")
                                 .as_array();
  return t;
}

json::object request(json::value tool_choice) {
  return {{"messages", json::array{json::object{{"role", "user"}, {"content", "Wake me at seven."}}}},
          {"tools", tools()},
          {"tool_choice", std::move(tool_choice)},
          {"parallel_tool_calls", false},
          {"max_tokens", 120},
          {"seed", 3}};
}

// What the schemas promise of a call's arguments.
void expect_valid_call(const std::string& name, const std::string& arguments) {
  boost::system::error_code ec;
  const json::value v = json::parse(arguments, ec);
  ASSERT_FALSE(ec) << arguments;
  const json::object& args = v.as_object();
  if (name == "set_alarm") {
    ASSERT_EQ(args.size(), 3u) << arguments;
    const int64_t hour = args.at("hour").as_int64();
    EXPECT_TRUE(hour >= 0 && hour <= 23) << arguments;
    EXPECT_LE(args.at("label").as_string().size(), 8u * 4) << arguments;  // 8 characters of at most 4 bytes
    EXPECT_LE(args.at("days").as_array().size(), 2u) << arguments;
    for (const json::value& d : args.at("days").as_array()) EXPECT_TRUE(d == "mon" || d == "tue") << arguments;
  } else {
    EXPECT_EQ(name, "stop_alarm");
    ASSERT_EQ(args.size(), 1u) << arguments;
    EXPECT_TRUE(args.at("all").is_bool()) << arguments;
  }
}

TEST_F(ToolCallsServer, ForcedCallsInEveryChoice) {
  json::object body = request("required");
  body["n"] = 2;
  const Response r = post(body);
  ASSERT_EQ(r.status, 200) << r.body;
  const json::array choices = parse_object(r.body).at("choices").as_array();
  ASSERT_EQ(choices.size(), 2u);
  for (const json::value& c : choices) {
    const json::object& message = c.at("message").as_object();
    EXPECT_TRUE(message.at("content").is_null()) << r.body;
    ASSERT_TRUE(message.contains("tool_calls")) << r.body;
    const json::array& calls = message.at("tool_calls").as_array();
    ASSERT_EQ(calls.size(), 1u) << r.body;
    const json::object& fn = calls[0].at("function").as_object();
    expect_valid_call(json::value_to<std::string>(fn.at("name")), json::value_to<std::string>(fn.at("arguments")));
    EXPECT_EQ(c.at("finish_reason"), "tool_calls") << r.body;
  }
}

TEST_F(ToolCallsServer, ANamedCallStreamsAsDeltas) {
  json::object body = request(json::object{{"type", "function"}, {"function", json::object{{"name", "set_alarm"}}}});
  body["stream"] = true;
  const Response r = http_request(port(), "POST", "/v1/chat/completions", body_of(body),
                                  {{"Content-Type", "application/json"}});
  ASSERT_EQ(r.status, 200) << r.body;
  std::string name, arguments, finish;
  int first_fragments = 0, fragments = 0;
  for (const std::string& payload : sse_payloads(r.body)) {
    if (payload == "[DONE]") continue;
    const json::object chunk = parse_object(payload);
    const json::object& choice = chunk.at("choices").as_array()[0].as_object();
    const json::object& delta = choice.at("delta").as_object();
    if (const json::value* calls = delta.if_contains("tool_calls")) {
      for (const json::value& call : calls->as_array()) {
        ++fragments;
        EXPECT_EQ(call.at("index"), 0);
        if (call.as_object().contains("id")) {
          ++first_fragments;
          name = json::value_to<std::string>(call.at("function").at("name"));
          EXPECT_TRUE(delta.contains("content") && delta.at("content").is_null()) << payload;  // as OpenAI's
        }
        arguments += json::value_to<std::string>(call.at("function").at("arguments"));
      }
    }
    if (!choice.at("finish_reason").is_null()) finish = json::value_to<std::string>(choice.at("finish_reason"));
  }
  EXPECT_EQ(first_fragments, 1);
  EXPECT_GT(fragments, 2);  // the arguments came in pieces
  EXPECT_EQ(name, "set_alarm");
  expect_valid_call(name, arguments);
  EXPECT_EQ(finish, "tool_calls");
}

TEST_F(ToolCallsServer, WebSocketChatCallsTools) {
  WsClient ws(port());
  ASSERT_TRUE(ws.connected());
  json::object message = request("required");
  message["id"] = 9;
  ws.send(body_of(message));
  std::string name, arguments;
  json::object final_event;
  while (auto text = ws.read()) {
    json::object e = parse_object(*text);
    if (e["type"] == "final") {
      final_event = e;
      break;
    }
    ASSERT_EQ(e["type"], "delta") << *text;
    if (const json::value* calls = e.if_contains("tool_calls")) {
      for (const json::value& call : calls->as_array()) {
        if (call.as_object().contains("id")) name = json::value_to<std::string>(call.at("function").at("name"));
        arguments += json::value_to<std::string>(call.at("function").at("arguments"));
      }
    }
  }
  EXPECT_EQ(final_event["finish_reason"], "tool_calls");
  expect_valid_call(name, arguments);
}

TEST_F(ToolCallsServer, RefusalsNameTheField) {
  const Response unknown = post(request(json::object{{"type", "function"}, {"function", json::object{{"name", "x"}}}}));
  EXPECT_EQ(unknown.status, 400);
  EXPECT_EQ(parse_object(unknown.body)["error"].as_object()["param"], "tool_choice") << unknown.body;
  json::object both = request("required");
  both["response_format"] = json::object{{"type", "json_object"}};
  const Response conflict = post(both);
  EXPECT_EQ(conflict.status, 400);
  const json::object conflict_error = parse_object(conflict.body)["error"].as_object();
  EXPECT_EQ(conflict_error.at("param"), "response_format") << conflict.body;
  EXPECT_NE(std::string(conflict_error.at("message").as_string()).find("tool_choice"), std::string::npos)
      << conflict.body;
  json::object bad_schema = request("required");
  bad_schema["tools"] = json::parse(R"([{"type": "function", "function": {"name": "f", "parameters":
      {"type": "object", "properties": {"n": {"type": "integer", "multipleOf": 3}}}}}])");
  const Response refused = post(bad_schema);
  EXPECT_EQ(refused.status, 400);
  EXPECT_EQ(parse_object(refused.body)["error"].as_object()["param"], "tools") << refused.body;
  // auto promised nothing: the same tools leave it unconstrained.
  bad_schema["tool_choice"] = "auto";
  bad_schema["max_tokens"] = 8;
  const Response unconstrained = post(bad_schema);
  EXPECT_EQ(unconstrained.status, 200) << unconstrained.body;
  // tool_choice none: the tools are given, nothing is forced or read.
  const Response none = post(request("none"));
  ASSERT_EQ(none.status, 200) << none.body;
  const json::object choice = parse_object(none.body).at("choices").as_array()[0].as_object();
  EXPECT_FALSE(choice.at("message").as_object().contains("tool_calls"));
  EXPECT_NE(choice.at("finish_reason"), "tool_calls");
}

// A streamed answer of one call: its content, the call's name and
// arguments assembled from the deltas, and the finish reason.
struct StreamedCall {
  std::string content, name, arguments, finish;
};
StreamedCall read_streamed_call(const std::string& body) {
  StreamedCall out;
  for (const std::string& payload : sse_payloads(body)) {
    if (payload == "[DONE]") continue;
    const json::object chunk = parse_object(payload);
    const json::object& choice = chunk.at("choices").as_array()[0].as_object();
    const json::object& delta = choice.at("delta").as_object();
    if (const json::value* text = delta.if_contains("content"); text && text->is_string())
      out.content += json::value_to<std::string>(*text);
    if (const json::value* calls = delta.if_contains("tool_calls")) {
      for (const json::value& call : calls->as_array()) {
        if (call.as_object().contains("id")) out.name = json::value_to<std::string>(call.at("function").at("name"));
        out.arguments += json::value_to<std::string>(call.at("function").at("arguments"));
      }
    }
    if (!choice.at("finish_reason").is_null()) out.finish = json::value_to<std::string>(choice.at("finish_reason"));
  }
  return out;
}

// Mistral's syntax, where a control token opens the calls: the embedded
// model with one more token, 258, spelled [TOOL_CALLS] as in Mistral's
// vocabularies. With auto the model writes freely until it writes that
// token; a strong logit_bias makes it do so at once, and from there the
// grammar must make the rest a list of valid calls (the random weights
// would write anything).
constexpr int32_t kCallToken = 258;
constexpr int32_t kArgsToken = 259;

// The embedded model with Mistral's control tokens: [TOOL_CALLS], and with
// `args` [ARGS] too.
LoadedModel mistral_model(bool args) {
  LoadedModel m = embedded_default_model();
  m.config.vocab_size = args ? kArgsToken + 1 : kCallToken + 1;
  m.weights = make_random_weights(m.config, 11);
  Vocabulary v = byte_vocabulary(m.config.vocab_size);
  v.pieces[kCallToken] = "[TOOL_CALLS]";
  v.types[kCallToken] = TokenType::control;
  if (args) {
    v.pieces[kArgsToken] = "[ARGS]";
    v.types[kArgsToken] = TokenType::control;
  }
  m.tokenizer = std::shared_ptr<const Tokenizer>(make_bpe_tokenizer(v).value());
  m.vocabulary = std::move(v);
  return m;
}

class MistralToolCallsServer : public ::testing::Test {
 protected:
  static LoadedModel model() { return mistral_model(false); }
  static void SetUpTestSuite() {
    ServerOptions options;
    options.tool_call_parser = ToolCallParser::mistral;
    server_ = new TestServer(model(), small_engine(), options);
  }
  static void TearDownTestSuite() { delete server_; }
  static uint16_t port() { return server_->port(); }
  // tool_choice auto, the call token's logit raised by `bias`.
  static json::object auto_request(int bias) {
    json::object body = request("auto");
    body["logit_bias"] = json::object{{std::to_string(kCallToken), bias}};
    body["max_tokens"] = 200;
    return body;
  }
  static TestServer* server_;
};
TestServer* MistralToolCallsServer::server_ = nullptr;

TEST_F(MistralToolCallsServer, AutoHoldsTheCallsThatTheControlTokenOpensToTheSchemas) {
  json::object body = auto_request(100);
  body["n"] = 3;
  const Response r = http_request(port(), "POST", "/v1/chat/completions", body_of(body),
                                  {{"Content-Type", "application/json"}});
  ASSERT_EQ(r.status, 200) << r.body;
  const json::array choices = parse_object(r.body).at("choices").as_array();
  ASSERT_EQ(choices.size(), 3u);
  for (const json::value& c : choices) {
    const json::object& message = c.at("message").as_object();
    ASSERT_TRUE(message.contains("tool_calls")) << r.body;
    EXPECT_TRUE(message.at("content").is_null()) << r.body;
    const json::array& calls = message.at("tool_calls").as_array();
    ASSERT_EQ(calls.size(), 1u) << r.body;  // parallel_tool_calls false
    const json::object& fn = calls[0].at("function").as_object();
    expect_valid_call(json::value_to<std::string>(fn.at("name")), json::value_to<std::string>(fn.at("arguments")));
    EXPECT_EQ(c.at("finish_reason"), "tool_calls") << r.body;
  }
}

TEST_F(MistralToolCallsServer, StreamedCallsAssembleAndFreeTextStaysFree) {
  json::object body = auto_request(100);
  body["stream"] = true;
  const Response r = http_request(port(), "POST", "/v1/chat/completions", body_of(body),
                                  {{"Content-Type", "application/json"}});
  ASSERT_EQ(r.status, 200) << r.body;
  const StreamedCall streamed = read_streamed_call(r.body);
  EXPECT_EQ(streamed.content, "") << "the token and the list are the call, not content";
  expect_valid_call(streamed.name, streamed.arguments);
  EXPECT_EQ(streamed.finish, "tool_calls");

  // Without the token nothing is constrained: the model's text is content.
  const Response text = http_request(port(), "POST", "/v1/chat/completions", body_of(auto_request(-100)),
                                     {{"Content-Type", "application/json"}});
  ASSERT_EQ(text.status, 200) << text.body;
  const json::object answer = parse_object(text.body);
  const json::object& choice = answer.at("choices").as_array()[0].as_object();
  EXPECT_FALSE(choice.at("message").as_object().contains("tool_calls")) << text.body;
  EXPECT_NE(choice.at("finish_reason"), "tool_calls");
}

// Mistral's newer form, [TOOL_CALLS]f[ARGS]{...}, which the model's own
// template writes (the form and the parser come from it): both markers are
// control tokens, so the grammar asks for them as tokens, and the text shows
// them to the parser. (The tools' names only: the byte vocabulary's context is short.)
constexpr std::string_view kNamedCallsTemplate =
    "{%- if tools %}[AVAILABLE_TOOLS]{%- for t in tools %}{{ t.function.name }} {% endfor %}[/AVAILABLE_TOOLS]{%- endif %}"
    "{%- for message in messages %}"
    "{%- if message.role == 'user' %}[INST]{{ message.content }}[/INST]"
    "{%- elif message.role == 'assistant' %}"
    "{%- for call in message.tool_calls or [] %}[TOOL_CALLS]{{ call.function.name }}[ARGS]{{ call.function.arguments }}"
    "{%- endfor %}{{ message.content or '' }}"
    "{%- elif message.role == 'tool' %}[TOOL_RESULTS]{{ message.content }}[/TOOL_RESULTS]"
    "{%- endif %}{%- endfor %}";

class MistralNamedCallsServer : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    LoadedModel m = mistral_model(true);
    m.chat_template = std::string(kNamedCallsTemplate);
    server_ = new TestServer(std::move(m), small_engine(), ServerOptions{});
  }
  static void TearDownTestSuite() { delete server_; }
  static Response post(const json::object& body) {
    return http_request(server_->port(), "POST", "/v1/chat/completions", body_of(body),
                        {{"Content-Type", "application/json"}});
  }
  static TestServer* server_;
};
TestServer* MistralNamedCallsServer::server_ = nullptr;

TEST_F(MistralNamedCallsServer, RequiredCallsAreTheNewerFormUnderTheSchemas) {
  for (const json::value& choice : {json::value("required"), json::value(json::parse(
                                       R"({"type": "function", "function": {"name": "stop_alarm"}})"))}) {
    json::object body = request(choice);
    body["n"] = 2;
    body["logprobs"] = true;  // the tokens, to see the form
    const Response r = post(body);
    ASSERT_EQ(r.status, 200) << r.body;
    const json::object answer = parse_object(r.body);
    for (const json::value& c : answer.at("choices").as_array()) {
      const json::object& message = c.at("message").as_object();
      ASSERT_TRUE(message.contains("tool_calls")) << r.body;
      EXPECT_TRUE(message.at("content").is_null()) << r.body;
      const json::array& calls = message.at("tool_calls").as_array();
      ASSERT_EQ(calls.size(), 1u) << r.body;
      const json::object& fn = calls[0].at("function").as_object();
      const std::string name = json::value_to<std::string>(fn.at("name"));
      if (choice.is_object()) {
        EXPECT_EQ(name, "stop_alarm");
      }
      expect_valid_call(name, json::value_to<std::string>(fn.at("arguments")));
      EXPECT_EQ(c.at("finish_reason"), "tool_calls") << r.body;
      // [TOOL_CALLS] name [ARGS] {...}: the control tokens have no text of their own.
      std::vector<std::string> tokens;
      for (const json::value& t : c.at("logprobs").at("content").as_array())
        tokens.push_back(json::value_to<std::string>(t.at("token")));
      const auto args = std::find(tokens.begin() + 1, tokens.end(), "");
      ASSERT_TRUE(tokens.size() > 2 && tokens[0].empty() && args != tokens.end() && args + 1 != tokens.end()) << r.body;
      std::string written;
      for (auto t = tokens.begin() + 1; t != args; ++t) written += *t;
      EXPECT_EQ(written, name);
      EXPECT_EQ(args[1], "{") << "the arguments follow [ARGS]";
    }
  }
}

TEST_F(MistralNamedCallsServer, AutoStreamsTheCallTheTokenOpens) {
  json::object body = request("auto");
  body["logit_bias"] = json::object{{std::to_string(kCallToken), 100}};
  body["max_tokens"] = 200;
  body["stream"] = true;
  const Response r = post(body);
  ASSERT_EQ(r.status, 200) << r.body;
  const StreamedCall streamed = read_streamed_call(r.body);
  EXPECT_EQ(streamed.content, "");
  expect_valid_call(streamed.name, streamed.arguments);
  EXPECT_EQ(streamed.finish, "tool_calls");
}

}  // namespace
}  // namespace conveyor::http::testing
