// The Responses API's pieces without a network: a request translated into
// chat terms (http/responses_request.hpp), its refusals, the store's bounds
// and scopes (http/response_store.hpp), and the job's output: the response
// object and the streaming events in the order the official clients read.
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <map>

#include "http/response_store.hpp"
#include "http/responses_continuation.hpp"
#include "http/responses_input.hpp"
#include "http/responses_job.hpp"
#include "http/responses_request.hpp"
#include "http/routes.hpp"

namespace conveyor::http {
namespace {

namespace json = boost::json;

ResponsesRequest parse_ok(const std::string& body) {
  auto r = parse_responses_request(body);
  if (auto* e = std::get_if<ApiError>(&r)) ADD_FAILURE() << body << ": " << e->message;
  return std::get_if<ResponsesRequest>(&r) ? std::get<ResponsesRequest>(std::move(r)) : ResponsesRequest{};
}

ApiError parse_error(const std::string& body) {
  auto r = parse_responses_request(body);
  if (std::holds_alternative<ResponsesRequest>(r)) {
    ADD_FAILURE() << body << " was accepted";
    return {};
  }
  return std::get<ApiError>(r);
}

TEST(ResponsesRequest, StringInputIsOneUserMessageBehindTheInstructions) {
  const ResponsesRequest r = parse_ok(
      R"({"model": "m", "input": "Hi", "instructions": "Be brief.", "max_output_tokens": 9, "temperature": 0,
          "top_p": 0.5, "user": "u", "metadata": {"k": "v"}, "store": false, "stream": true})");
  ASSERT_EQ(r.chat.messages.size(), 1u);
  EXPECT_EQ(r.chat.messages[0].role, "user");
  EXPECT_EQ(r.chat.messages[0].content, "Hi");
  EXPECT_EQ(r.instructions, "Be brief.");
  EXPECT_TRUE(r.chat.chat && r.chat.stream && r.chat.max_tokens_given);
  EXPECT_EQ(r.chat.sampling.max_tokens, 9);
  EXPECT_EQ(r.chat.sampling.temperature, 0.0f);
  EXPECT_FALSE(r.echo.store);
  EXPECT_EQ(r.echo.max_output_tokens, 9);
  EXPECT_EQ(r.echo.temperature, 0.0);
  EXPECT_EQ(r.echo.top_p, 0.5);
  EXPECT_EQ(parse_ok(R"({"input": "x", "temperature": 0.7})").echo.temperature, 0.7);  // as sent, not as a float
  EXPECT_EQ(r.echo.metadata_json, R"({"k":"v"})");
  EXPECT_EQ(r.echo.instructions, "Be brief.");
  EXPECT_EQ(r.echo.user, "u");
  // Defaults: stored, text output, no tools.
  const ResponsesRequest d = parse_ok(R"({"input": "x"})");
  EXPECT_TRUE(d.echo.store);
  EXPECT_FALSE(d.chat.max_tokens_given);
  EXPECT_EQ(d.chat.constraint.kind, OutputConstraint::Kind::none);
  EXPECT_TRUE(d.chat.tools_json.empty());
}

TEST(ResponsesRequest, ItemsBecomeChatMessages) {
  const ResponsesRequest r = parse_ok(R"({"input": [
      {"role": "developer", "content": "Use tools."},
      {"type": "message", "role": "user", "content": [{"type": "input_text", "text": "Weather in "},
                                                      {"type": "input_text", "text": "Paris?"}]},
      {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Checking.", "annotations": []}]},
      {"type": "function_call", "id": "fc_1", "call_id": "call_a", "name": "get_weather", "arguments": "{\"city\":\"Paris\"}"},
      {"type": "function_call", "call_id": "call_b", "name": "get_time", "arguments": "{}"},
      {"type": "function_call_output", "call_id": "call_a", "output": "18C"},
      {"type": "function_call_output", "call_id": "call_b", "output": "noon"}]})");
  std::vector<ChatMessage> m = r.chat.messages;
  ASSERT_EQ(m.size(), 5u);
  EXPECT_EQ(m[0].role, "system");
  EXPECT_EQ(m[1].content, "Weather in Paris?");
  // The message and both calls are one assistant turn, as chat has it.
  EXPECT_EQ(m[2].role, "assistant");
  EXPECT_EQ(m[2].content, "Checking.");
  const json::value calls = json::parse(m[2].tool_calls_json);
  ASSERT_EQ(calls.as_array().size(), 2u);
  EXPECT_EQ(calls.at(0).at("id"), "call_a");
  EXPECT_EQ(calls.at(0).at("type"), "function");
  EXPECT_EQ(calls.at(0).at("function").at("name"), "get_weather");
  EXPECT_EQ(calls.at(0).at("function").at("arguments"), "{\"city\":\"Paris\"}");
  EXPECT_EQ(m[3].role, "tool");
  EXPECT_EQ(m[3].tool_call_id, "call_a");
  EXPECT_EQ(m[3].content, "18C");
  // Results learn the name of the call they answer.
  responses::name_tool_results(m);
  EXPECT_EQ(m[3].name, "get_weather");
  EXPECT_EQ(m[4].name, "get_time");
  // The input as OpenAI lists it back: ids (the client's, or new), statuses, content as parts.
  const json::value items = json::parse(r.input_items_json);
  ASSERT_EQ(items.as_array().size(), 7u);
  EXPECT_TRUE(items.at(0).at("id").as_string().starts_with("msg_"));
  EXPECT_EQ(items.at(0).at("type"), "message");
  EXPECT_EQ(items.at(0).at("role"), "developer");
  EXPECT_EQ(items.at(0).at("content").at(0), json::parse(R"({"type": "input_text", "text": "Use tools."})"));
  EXPECT_EQ(items.at(3).at("id"), "fc_1");
  EXPECT_EQ(items.at(3).at("status"), "completed");
  EXPECT_TRUE(items.at(4).at("id").as_string().starts_with("fc_"));
  EXPECT_TRUE(items.at(5).at("id").as_string().starts_with("fco_"));
  const json::value one = json::parse(parse_ok(R"({"input": "Hi"})").input_items_json);
  EXPECT_EQ(one.at(0).at("content").at(0).at("text"), "Hi");
  EXPECT_EQ(one.at(0).at("role"), "user");
}

TEST(ResponsesRequest, FunctionToolsTakeChatsShape) {
  const ResponsesRequest r = parse_ok(R"({"input": "x", "parallel_tool_calls": false,
      "tools": [{"type": "function", "name": "get_weather", "description": "d",
                 "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}, "strict": true}],
      "tool_choice": {"type": "function", "name": "get_weather"}})");
  const json::value tools = json::parse(r.chat.tools_json);
  ASSERT_EQ(tools.as_array().size(), 1u);
  EXPECT_EQ(tools.at(0).at("type"), "function");
  EXPECT_EQ(tools.at(0).at("function").at("name"), "get_weather");
  EXPECT_EQ(tools.at(0).at("function").at("description"), "d");
  EXPECT_EQ(tools.at(0).at("function").at("parameters").at("type"), "object");
  EXPECT_EQ(tools.at(0).at("function").at("strict"), true);
  EXPECT_EQ(r.chat.tool_choice.mode, ToolChoice::Mode::function);
  EXPECT_EQ(r.chat.tool_choice.function, "get_weather");
  EXPECT_FALSE(r.chat.parallel_tool_calls);
  // The response repeats the tools as the client sent them.
  EXPECT_EQ(json::parse(r.echo.tools_json).at(0).at("name"), "get_weather");
  EXPECT_EQ(json::parse(r.echo.tool_choice_json).at("name"), "get_weather");
  EXPECT_EQ(parse_ok(R"({"input": "x", "tool_choice": "none"})").chat.tool_choice.mode, ToolChoice::Mode::none);
  EXPECT_EQ(parse_ok(R"({"input": "x", "tools": [{"type": "function", "name": "f"}], "tool_choice": "required"})")
                .chat.tool_choice.mode,
            ToolChoice::Mode::required);
}

TEST(ResponsesRequest, TextFormatBecomesTheConstraint) {
  const ResponsesRequest s = parse_ok(R"({"input": "x", "text": {"format": {"type": "json_schema", "name": "person",
      "schema": {"type": "object", "properties": {"name": {"type": "string"}}}, "strict": true}}})");
  EXPECT_EQ(s.chat.constraint.kind, OutputConstraint::Kind::json_schema);
  EXPECT_EQ(s.chat.constraint.name, "person");
  EXPECT_EQ(s.chat.constraint.field, "text.format");
  EXPECT_TRUE(s.chat.constraint.strict);
  EXPECT_EQ(json::parse(s.chat.constraint.source).at("properties").at("name").at("type"), "string");
  EXPECT_EQ(json::parse(s.echo.text_json).at("format").at("name"), "person");
  EXPECT_EQ(parse_ok(R"({"input": "x", "text": {"format": {"type": "json_object"}}})").chat.constraint.kind,
            OutputConstraint::Kind::json_object);
  EXPECT_EQ(parse_ok(R"({"input": "x", "text": {"format": {"type": "text"}, "verbosity": "medium"}})")
                .chat.constraint.kind,
            OutputConstraint::Kind::none);
  const ApiError nameless = parse_error(R"({"input": "x", "text": {"format": {"type": "json_schema", "schema": {}}}})");
  EXPECT_EQ(nameless.param, "text.format.name");
  EXPECT_EQ(nameless.message, "missing required parameter 'text.format.name'");
  EXPECT_EQ(parse_error(R"({"input": "x", "text": {"format": {"type": "json_schema", "name": "n"}}})").param,
            "text.format.schema");
  EXPECT_EQ(parse_error(R"({"input": "x", "text": {"format": {"type": "json_schema", "name": "n", "schema": 1}}})")
                .param,
            "text.format.schema");
  // A boolean is a schema too (true: any JSON), as in chat's response_format.
  EXPECT_EQ(parse_ok(R"({"input": "x", "text": {"format": {"type": "json_schema", "name": "n", "schema": true}}})")
                .chat.constraint.source,
            "true");
  EXPECT_EQ(parse_error(R"({"input": "x", "text": {"format": {"type": "yaml"}}})").param, "text.format");
  EXPECT_EQ(parse_error(R"({"input": "x", "text": {"verbosity": "low"}})").param, "text.verbosity");
}

// What the API has and conveyor does not do is refused by name, with a 400
// that says so; what it does not know at all is "unrecognized".
TEST(ResponsesRequest, RefusalsNameWhatTheyRefuse) {
  struct Case {
    const char* body;
    const char* param;
    const char* says;
  };
  const Case cases[] = {
      {R"({})", "input", "'input' is required"},
      {R"({"input": []})", "input", "must not be empty"},
      {R"({"input": 5})", "input", "a string or an array"},
      {R"({"input": [{"role": "user", "content": [{"type": "input_image", "image_url": "x"}]}]})", "input",
       "'input_image' are not supported"},
      {R"({"input": [{"type": "item_reference", "id": "msg_1"}]})", "input", "previous_response_id"},
      {R"({"input": [{"type": "reasoning", "summary": []}]})", "input", "'reasoning' are not supported"},
      {R"({"input": [{"role": "tool", "content": "x"}]})", "input", "role 'tool'"},
      {R"({"input": [{"type": "function_call", "name": "f", "arguments": "{}"}]})", "input", "'call_id' is required"},
      {R"({"input": "x", "tools": [{"type": "web_search_preview"}]})", "tools", "'web_search_preview' are not supported"},
      {R"({"input": "x", "tools": [{"type": "file_search", "vector_store_ids": []}]})", "tools", "'file_search'"},
      {R"({"input": "x", "tools": [{"type": "function"}]})", "tools", "'name' is required in 'tools'"},
      {R"({"input": "x", "tool_choice": "required"})", "tool_choice", "needs 'tools'"},
      {R"({"input": "x", "tools": [{"type": "function", "name": "f"}], "tool_choice": {"type": "function", "name": "g"}})",
       "tool_choice", "'g'"},
      {R"({"input": "x", "tool_choice": {"type": "web_search_preview"}})", "tool_choice", "not supported"},
      {R"({"input": "x", "background": true})", "background", "not supported"},
      {R"({"input": "x", "truncation": "auto"})", "truncation", "never truncated"},
      {R"({"input": "x", "max_output_tokens": 0})", "max_output_tokens", "at least 1"},
      {R"({"input": "x", "temperature": "hot"})", "temperature", "a number"},
      {R"({"input": "x", "metadata": {"k": 1}})", "metadata", "strings"},
      {R"({"input": "x", "max_tokens": 5})", "max_tokens", "unrecognized request field 'max_tokens'"},
      {R"({"input": "x", "messages": []})", "messages", "unrecognized"},
  };
  for (const Case& c : cases) {
    const ApiError e = parse_error(c.body);
    EXPECT_EQ(e.status, 400) << c.body;
    EXPECT_EQ(e.param, c.param) << c.body << ": " << e.message;
    EXPECT_NE(e.message.find(c.says), std::string::npos) << c.body << ": " << e.message;
  }
  std::string many = R"({"input": "x", "metadata": {)";
  for (int i = 0; i < 17; ++i) many += (i ? ", " : "") + std::string("\"k") + std::to_string(i) + "\": \"v\"";
  EXPECT_EQ(parse_error(many + "}}").param, "metadata");
  EXPECT_EQ(parse_error("{\"input\": \"x\"} 7").status, 400);
  EXPECT_EQ(parse_error("[1]").message, "the request body must be a JSON object");
}

// A valid value for every implemented field of the table.
const std::map<std::string_view, std::string_view> kExamples = {
    {"model", R"("m")"},           {"input", R"("x")"},
    {"instructions", R"("i")"},    {"previous_response_id", R"("resp_1")"},
    {"store", "false"},            {"stream", "true"},
    {"stream_options", R"({"include_obfuscation": false})"},
    {"metadata", R"({"a": "b"})"}, {"user", R"("u")"},
    {"safety_identifier", R"("s")"}, {"prompt_cache_key", R"("k")"},
    {"temperature", "0.2"},        {"top_p", "0.9"},
    {"max_output_tokens", "16"},   {"parallel_tool_calls", "false"},
    {"tools", R"([{"type": "function", "name": "f", "parameters": {}}])"},
    {"tool_choice", R"("auto")"},  {"text", R"({"format": {"type": "json_object"}})"},
    {"top_k", "4"},                {"min_p", "0.1"},
    {"seed", "3"},                 {"presence_penalty", "0.5"},
    {"frequency_penalty", "0.5"},  {"repetition_penalty", "1.1"},
    {"stop", R"(["\n"])"},         {"ignore_eos", "true"},
    {"priority", "2"},
};

TEST(ResponsesRequest, TheFieldTableIsWhatTheParserDoes) {
  int implemented = 0, refused = 0;
  for (const RequestField& f : responses_fields()) {
    const std::string name(f.name);
    const std::string base = name == "input" ? "{" : R"({"input": "x", )";
    if (f.support == FieldSupport::implemented) {
      const auto example = kExamples.find(f.name);
      ASSERT_NE(example, kExamples.end()) << "no example value for '" << f.name << "'";
      parse_ok(base + "\"" + name + "\": " + std::string(example->second) + "}");
      ++implemented;
      continue;
    }
    const ApiError e = parse_error(base + "\"" + name + R"(": {"asks": "something"}})");
    EXPECT_EQ(e.param, name);
    EXPECT_NE(e.message.find("'" + name + "' is not supported"), std::string::npos) << e.message;
    ++refused;
    std::string_view harmless = f.harmless;  // each harmless value passes
    while (!harmless.empty()) {
      const size_t bar = harmless.find('|');
      parse_ok(base + "\"" + name + "\": " + std::string(harmless.substr(0, bar)) + "}");
      harmless = bar == std::string_view::npos ? std::string_view() : harmless.substr(bar + 1);
    }
  }
  EXPECT_GT(implemented, 20);
  EXPECT_GT(refused, 5);
  // null counts as absent, even for refused fields.
  parse_ok(R"({"input": "x", "background": null, "reasoning": null})");
}

// ---- the store ---------------------------------------------------------------------------

StoredResponse stored(const std::string& id, const std::string& session, size_t text_bytes = 10) {
  StoredResponse r;
  r.id = id;
  r.json = "{}";
  r.conversation.push_back(responses::chat_message("user", std::string(text_bytes, 'x')));
  r.session = session;
  return r;
}

struct Released {
  std::vector<std::string> sessions;
  ResponseStore::Release fn() {
    return [this](const std::string& s) { sessions.push_back(s); };
  }
};

TEST(ResponseStore, EntriesExpireAfterTheirTtl) {
  Released released;
  ResponseStore store(ResponseStoreLimits{10.0, 100, 1 << 20}, released.fn());
  const auto t0 = ResponseStore::Clock::now();
  store.put({}, stored("resp_a", "s_a"), t0);
  EXPECT_NE(store.get({}, "resp_a", t0 + std::chrono::seconds(9)), nullptr);
  EXPECT_EQ(store.get({}, "resp_a", t0 + std::chrono::seconds(11)), nullptr);
  EXPECT_EQ(store.size(), 0u);
  EXPECT_EQ(store.bytes(), 0u);
  EXPECT_EQ(released.sessions, std::vector<std::string>{"s_a"});
}

TEST(ResponseStore, PastItsCountOrBytesTheOldestGo) {
  ResponseStore by_count(ResponseStoreLimits{3600.0, 2, 1 << 20});
  const auto t = ResponseStore::Clock::now();
  for (const char* id : {"r1", "r2", "r3"}) by_count.put({}, stored(id, ""), t);
  EXPECT_EQ(by_count.size(), 2u);
  EXPECT_EQ(by_count.get({}, "r1", t), nullptr);
  EXPECT_NE(by_count.get({}, "r3", t), nullptr);

  ResponseStore by_bytes(ResponseStoreLimits{3600.0, 100, 5000});
  for (const char* id : {"b1", "b2", "b3"}) by_bytes.put({}, stored(id, "", 2000), t);
  EXPECT_LE(by_bytes.bytes(), 5000u);
  EXPECT_EQ(by_bytes.get({}, "b1", t), nullptr);
  EXPECT_NE(by_bytes.get({}, "b3", t), nullptr);
  by_bytes.put({}, stored("huge", "", 6000), t);  // larger than the whole bound: not kept
  EXPECT_EQ(by_bytes.get({}, "huge", t), nullptr);
  EXPECT_NE(by_bytes.get({}, "b3", t), nullptr);
}

TEST(ResponseStore, AnotherKeySeesNothing) {
  auto key_a = std::make_shared<int>(1), key_b = std::make_shared<int>(2);
  ResponseStore store;
  store.put(key_a, stored("r", ""));
  EXPECT_NE(store.get(key_a, "r"), nullptr);
  EXPECT_EQ(store.get(key_b, "r"), nullptr);
  EXPECT_EQ(store.get({}, "r"), nullptr);  // nor a request without a key
  EXPECT_FALSE(store.erase(key_b, "r"));
  EXPECT_TRUE(store.erase(key_a, "r"));
  EXPECT_FALSE(store.erase(key_a, "r"));
}

// A session is let go when the latest response of its conversation goes,
// not when an earlier one does (the latest still continues it).
TEST(ResponseStore, TheLatestResponseOfASessionReleasesIt) {
  Released released;
  ResponseStore store(ResponseStoreLimits{}, released.fn());
  store.put({}, stored("turn1", "resp:turn1"));
  store.put({}, stored("turn2", "resp:turn1"));
  EXPECT_TRUE(store.erase({}, "turn1"));
  EXPECT_TRUE(released.sessions.empty());
  EXPECT_TRUE(store.erase({}, "turn2"));
  EXPECT_EQ(released.sessions, std::vector<std::string>{"resp:turn1"});
}

// A finished response takes its in-progress entry's place; once that entry
// is gone (deleted while the response ran) it is not stored again, and a
// session nothing else continues is let go.
TEST(ResponseStore, AFinishedResponseReplacesOnlyItsRunningEntry) {
  Released released;
  ResponseStore store(ResponseStoreLimits{}, released.fn());
  StoredResponse running = stored("r", "");
  running.in_progress = true;
  store.put({}, running);
  EXPECT_TRUE(store.complete({}, stored("r", "s_r")));
  EXPECT_FALSE(store.get({}, "r")->in_progress);

  // Evicted while it ran (not deleted): stored as the newest entry.
  ResponseStore one(ResponseStoreLimits{3600.0, 1, 1 << 20});
  one.put({}, running);
  one.put({}, stored("other", ""));
  EXPECT_EQ(one.get({}, "r"), nullptr);
  EXPECT_TRUE(one.complete({}, stored("r", "")));
  EXPECT_NE(one.get({}, "r"), nullptr);

  store.erase({}, "r");
  released.sessions.clear();
  store.put({}, running);
  store.erase({}, "r");
  EXPECT_FALSE(store.complete({}, stored("r", "s_r")));
  EXPECT_EQ(store.get({}, "r"), nullptr);
  EXPECT_EQ(released.sessions, std::vector<std::string>{"s_r"});

  // A continuation (same session) deleted while it ran: the response it
  // continued still continues the session, which stays. And one that
  // completes while the response it continues is evicted for it keeps the
  // session too.
  released.sessions.clear();
  store.put({}, stored("turn1", "s_t"));
  StoredResponse turn2 = stored("turn2", "");
  turn2.in_progress = true;
  store.put({}, turn2);
  store.erase({}, "turn2");
  EXPECT_FALSE(store.complete({}, stored("turn2", "s_t")));
  EXPECT_TRUE(released.sessions.empty());
  ResponseStore full(ResponseStoreLimits{3600.0, 1, 1 << 20}, released.fn());
  full.put({}, stored("t1", "s_f"));
  full.put({}, stored("t2", "s_f"));  // evicts t1, the session's latest until now
  EXPECT_EQ(full.get({}, "t1"), nullptr);
  EXPECT_TRUE(released.sessions.empty());
}

// ---- the job's output ----------------------------------------------------------------------

struct Event {
  std::string type;
  json::object data;
};

std::vector<Event> events_of(const std::vector<std::string>& out) {
  std::vector<Event> events;
  for (const std::string& e : out) {
    const size_t data = e.find("\ndata: ");
    EXPECT_TRUE(e.starts_with("event: ") && data != std::string::npos) << e;
    if (data == std::string::npos) continue;
    Event ev{e.substr(7, data - 7), json::parse(e.substr(data + 7)).as_object()};
    EXPECT_EQ(ev.data.at("type").as_string(), ev.type);
    events.push_back(std::move(ev));
  }
  return events;
}

StreamEvent piece(std::string text, FinishReason finish = FinishReason::none) {
  StreamEvent e;
  e.text = std::move(text);
  e.token_ids = {1};
  e.finish = finish;
  if (finish != FinishReason::none) {
    e.completion_tokens = 3;
    e.cached_prompt_tokens = 16;
  }
  return e;
}

ResponsesJobSpec job_spec(bool stream, ResponseStore* store = nullptr) {
  ResponsesJobSpec s;
  s.response.id = "resp_test";
  s.response.created_at = 1700000000;
  s.response.model = "tiny";
  s.stream = stream;
  s.prompt.assign(20, 7);
  s.store = store;
  s.conversation.push_back(responses::chat_message("user", "Hi"));
  s.session = "resp:resp_test";
  return s;
}

TEST(ResponsesJob, StreamsTheEventsClientsRead) {
  ResponsesJob job(job_spec(true));
  std::vector<std::string> out;
  job.on_event(0, piece("Hel"), out);
  job.on_event(0, piece("lo"), out);
  job.on_event(0, piece("", FinishReason::stop), out);
  ASSERT_TRUE(job.done());
  const std::vector<Event> events = events_of(out);
  std::vector<std::string> types;
  for (const Event& e : events) types.push_back(e.type);
  EXPECT_EQ(types, (std::vector<std::string>{
                       "response.created", "response.in_progress", "response.output_item.added",
                       "response.content_part.added", "response.output_text.delta", "response.output_text.delta",
                       "response.output_text.done", "response.content_part.done", "response.output_item.done",
                       "response.completed"}));
  for (size_t i = 0; i < events.size(); ++i) EXPECT_EQ(events[i].data.at("sequence_number"), int64_t(i));
  EXPECT_EQ(events[0].data.at("response").at("status"), "in_progress");
  EXPECT_EQ(events[0].data.at("response").at("output").as_array().size(), 0u);
  const json::object& added = events[2].data;
  EXPECT_EQ(added.at("output_index"), 0);
  EXPECT_EQ(added.at("item").at("type"), "message");
  EXPECT_EQ(added.at("item").at("status"), "in_progress");
  const json::value item_id = added.at("item").at("id");
  EXPECT_TRUE(item_id.as_string().starts_with("msg_"));
  EXPECT_EQ(events[4].data.at("delta"), "Hel");
  EXPECT_EQ(events[4].data.at("item_id"), item_id);
  EXPECT_EQ(events[4].data.at("content_index"), 0);
  EXPECT_EQ(events[6].data.at("text"), "Hello");
  EXPECT_EQ(events[7].data.at("part").at("text"), "Hello");
  EXPECT_EQ(events[8].data.at("item").at("status"), "completed");
  const json::value& done = events[9].data.at("response");
  EXPECT_EQ(done.at("status"), "completed");
  EXPECT_EQ(done.at("output").at(0).at("content").at(0).at("text"), "Hello");
  EXPECT_EQ(done.at("usage").at("input_tokens"), 20);
  EXPECT_EQ(done.at("usage").at("input_tokens_details").at("cached_tokens"), 16);
  EXPECT_EQ(done.at("usage").at("output_tokens"), 3);
  EXPECT_EQ(done.at("usage").at("total_tokens"), 23);
  EXPECT_EQ(job.summary().finish, FinishReason::stop);
  EXPECT_EQ(job.summary().prompt_tokens, 20);
  // The framing: "event: TYPE\ndata: JSON\n\n" in one HTTP chunk.
  const std::string chunk = job.frame_events({out[0]});
  EXPECT_NE(chunk.find("\r\nevent: response.created\ndata: {"), std::string::npos);
  EXPECT_TRUE(chunk.ends_with("}\n\n\r\n"));
}

TEST(ResponsesJob, ABodyIsTheResponseObjectAndIsStored) {
  ResponseStore store;
  ResponsesJob job(job_spec(false, &store));
  std::vector<std::string> out;
  job.on_event(0, piece("All "), out);
  job.on_event(0, piece("done", FinishReason::length), out);
  EXPECT_TRUE(out.empty());
  ASSERT_TRUE(job.done());
  const json::value body = json::parse(job.body());
  EXPECT_EQ(body.at("id"), "resp_test");
  EXPECT_EQ(body.at("object"), "response");
  EXPECT_EQ(body.at("status"), "incomplete");
  EXPECT_EQ(body.at("incomplete_details").at("reason"), "max_output_tokens");
  EXPECT_EQ(body.at("output").at(0).at("role"), "assistant");
  EXPECT_EQ(body.at("output").at(0).at("status"), "incomplete");
  EXPECT_EQ(body.at("output").at(0).at("content").at(0).at("type"), "output_text");
  EXPECT_EQ(body.at("output").at(0).at("content").at(0).at("text"), "All done");
  EXPECT_EQ(body.at("error"), nullptr);
  EXPECT_EQ(body.at("tool_choice"), "auto");
  EXPECT_EQ(body.at("text").at("format").at("type"), "text");
  EXPECT_EQ(job.summary().prompt_tokens, 20);  // the access log's, after the store took its copy
  const auto kept = store.get({}, "resp_test");
  ASSERT_NE(kept, nullptr);
  EXPECT_EQ(kept->json, job.body());
  EXPECT_EQ(kept->session, "resp:resp_test");
  ASSERT_EQ(kept->conversation.size(), 2u);  // the input, then the answer
  EXPECT_EQ(kept->conversation[1].role, "assistant");
  EXPECT_EQ(kept->conversation[1].content, "All done");
}

// While it runs, a stored response is there for GET, in progress; a
// failure answered with an error status leaves nothing stored.
TEST(ResponsesJob, ARunningResponseIsStoredInProgress) {
  ResponseStore store;
  ResponsesJobSpec spec = job_spec(true, &store);
  spec.input_items_json = R"([{"type":"message","role":"user","content":"Hi"}])";
  ResponsesJob job(spec);
  auto running = store.get({}, "resp_test");
  ASSERT_NE(running, nullptr);
  EXPECT_TRUE(running->in_progress);
  EXPECT_EQ(json::parse(running->json).at("status"), "in_progress");
  EXPECT_EQ(running->input_items_json, spec.input_items_json);
  EXPECT_TRUE(running->session.empty());  // its going releases no session
  std::vector<std::string> out;
  job.on_event(0, piece("Hi", FinishReason::stop), out);
  auto done = store.get({}, "resp_test");
  ASSERT_NE(done, nullptr);
  EXPECT_FALSE(done->in_progress);
  EXPECT_EQ(json::parse(done->json).at("status"), "completed");

  StreamEvent refused;
  refused.finish = FinishReason::error;
  refused.error_code = Errc::resource_exhausted;
  ResponseStore other;
  ResponsesJob early(job_spec(false, &other));
  ASSERT_NE(other.get({}, "resp_test"), nullptr);
  early.on_event(0, refused, out);
  ASSERT_TRUE(early.failure());
  EXPECT_EQ(other.get({}, "resp_test"), nullptr);
}

// DELETE while it runs: the response goes on for its client, is not stored
// when it ends, and says so.
TEST(ResponsesJob, AResponseDeletedWhileItRunsStaysDeleted) {
  for (bool stream : {false, true}) {
    ResponseStore store;
    ResponsesJob job(job_spec(stream, &store));
    std::vector<std::string> out;
    job.on_event(0, piece("Hi"), out);
    ASSERT_TRUE(store.erase({}, "resp_test"));
    job.on_event(0, piece("!", FinishReason::stop), out);
    ASSERT_TRUE(job.done());
    EXPECT_EQ(store.get({}, "resp_test"), nullptr) << stream;
    const json::value last = stream ? events_of(out).back().data.at("response") : json::parse(job.body());
    EXPECT_EQ(last.at("status"), "completed");
    EXPECT_EQ(last.at("store"), false) << stream;
  }
  ResponseStore tiny(ResponseStoreLimits{3600.0, 10, 64});  // smaller than any response
  ResponsesJob big(job_spec(false, &tiny));
  std::vector<std::string> out;
  big.on_event(0, piece("Hi", FinishReason::stop), out);
  EXPECT_EQ(tiny.get({}, "resp_test"), nullptr);
  EXPECT_EQ(json::parse(big.body()).at("store"), false);
}

// The drain's cancel fails a response (code shutting_down) where a client
// that went away leaves it incomplete.
TEST(ResponsesJob, TheDrainsCancelFailsTheResponse) {
  StreamEvent cancelled;
  cancelled.finish = FinishReason::cancelled;
  ResponseStore store;
  ResponsesJob streamed(job_spec(true, &store));
  std::vector<std::string> out;
  streamed.on_event(0, piece("Hi"), out);
  streamed.set_cancel_reason("the server is shutting down: the request was still running");
  streamed.on_event(0, cancelled, out);
  ASSERT_TRUE(streamed.done());
  EXPECT_FALSE(streamed.failure());
  const Event last = events_of(out).back();
  EXPECT_EQ(last.type, "response.failed");
  EXPECT_EQ(last.data.at("response").at("status"), "failed");
  EXPECT_EQ(last.data.at("response").at("error").at("code"), "shutting_down");
  EXPECT_EQ(last.data.at("response").at("incomplete_details"), nullptr);
  ASSERT_NE(store.get({}, "resp_test"), nullptr);
  EXPECT_EQ(json::parse(store.get({}, "resp_test")->json).at("status"), "failed");

  ResponsesJob whole(job_spec(false));
  whole.on_event(0, piece("Hi"), out);
  whole.set_cancel_reason("the server is shutting down");
  whole.on_event(0, cancelled, out);
  ASSERT_TRUE(whole.failure());
  EXPECT_EQ(whole.failure()->status, 503);
  EXPECT_EQ(whole.failure()->code, "shutting_down");

  ResponsesJob unstarted(job_spec(true));  // streamed, cancelled before any output: nothing was sent
  unstarted.set_cancel_reason("the server is shutting down");
  std::vector<std::string> none;
  unstarted.on_event(0, cancelled, none);
  ASSERT_TRUE(unstarted.failure());
  EXPECT_EQ(unstarted.failure()->status, 503);
  EXPECT_TRUE(none.empty());

  ResponsesJob gone(job_spec(false));
  gone.on_event(0, cancelled, out);
  ASSERT_FALSE(gone.failure());
  EXPECT_EQ(json::parse(gone.body()).at("incomplete_details").at("reason"), "cancelled");
}

TEST(ResponsesJob, FailuresBeforeAndAfterOutput) {
  StreamEvent error;
  error.finish = FinishReason::error;
  error.error_code = Errc::resource_exhausted;
  error.message = "queue full";
  ResponsesJob early(job_spec(true));
  std::vector<std::string> out;
  early.on_event(0, error, out);
  ASSERT_TRUE(early.failure());
  EXPECT_EQ(early.failure()->status, 429);
  EXPECT_TRUE(out.empty());

  ResponseStore store;
  ResponsesJob late(job_spec(true, &store));
  late.on_event(0, piece("Hi"), out);
  error.error_code = Errc::internal;
  late.on_event(0, error, out);
  EXPECT_FALSE(late.failure());
  const std::vector<Event> events = events_of(out);
  ASSERT_FALSE(events.empty());
  EXPECT_EQ(events.back().type, "response.failed");
  EXPECT_EQ(events.back().data.at("response").at("status"), "failed");
  EXPECT_EQ(events.back().data.at("response").at("error").at("code"), "engine_failure");
  EXPECT_EQ(late.summary().finish, FinishReason::error);
  ASSERT_NE(store.get({}, "resp_test"), nullptr);
  EXPECT_EQ(store.get({}, "resp_test")->conversation.size(), 1u);  // a failed answer does not continue
}

constexpr const char* kHermesCall =
    "<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"city\": \"Paris\"}}\n</tool_call>";

TEST(ResponsesJob, StreamedFunctionCallsAreFunctionCallItems) {
  ResponsesJobSpec spec = job_spec(true);
  spec.tool_format = ToolCallFormat::hermes;
  ResponsesJob job(std::move(spec));
  std::vector<std::string> out;
  const std::string text = kHermesCall;
  for (size_t i = 0; i < text.size(); i += 7) job.on_event(0, piece(text.substr(i, 7)), out);
  job.on_event(0, piece("", FinishReason::stop), out);
  const std::vector<Event> events = events_of(out);
  std::string arguments;
  int added = 0;
  for (const Event& e : events) {
    if (e.type == "response.output_item.added") {
      ++added;
      EXPECT_EQ(e.data.at("item").at("type"), "function_call");
      EXPECT_EQ(e.data.at("item").at("name"), "get_weather");
      EXPECT_TRUE(e.data.at("item").at("call_id").as_string().starts_with("call_"));
    }
    if (e.type == "response.function_call_arguments.delta") arguments += e.data.at("delta").as_string();
    EXPECT_NE(e.type, "response.output_text.delta");
  }
  EXPECT_EQ(added, 1);
  EXPECT_EQ(json::parse(arguments), json::parse(R"({"city": "Paris"})"));
  ASSERT_GE(events.size(), 3u);
  EXPECT_EQ(events[events.size() - 3].type, "response.function_call_arguments.done");
  EXPECT_EQ(events[events.size() - 3].data.at("arguments").as_string(), arguments);
  EXPECT_EQ(events[events.size() - 2].type, "response.output_item.done");
  const json::value& item = events.back().data.at("response").at("output").at(0);
  EXPECT_EQ(item.at("type"), "function_call");
  EXPECT_TRUE(item.at("id").as_string().starts_with("fc_"));
  EXPECT_EQ(item.at("status"), "completed");
  EXPECT_EQ(item.at("arguments").as_string(), arguments);
}

TEST(ResponsesJob, AWholeAnswersCallsAndTheirConversation) {
  ResponseStore store;
  ResponsesJobSpec spec = job_spec(false, &store);
  spec.tool_format = ToolCallFormat::hermes;
  ResponsesJob job(std::move(spec));
  std::vector<std::string> out;
  job.on_event(0, piece(kHermesCall, FinishReason::stop), out);
  const json::value body = json::parse(job.body());
  ASSERT_EQ(body.at("output").as_array().size(), 1u);  // no empty message beside the call
  const json::value& call = body.at("output").at(0);
  EXPECT_EQ(call.at("type"), "function_call");
  EXPECT_EQ(call.at("name"), "get_weather");
  EXPECT_EQ(json::parse(call.at("arguments").as_string()), json::parse(R"({"city": "Paris"})"));
  // The stored conversation holds the call as chat's tool_calls, for the next turn.
  const ChatMessage& answer = store.get({}, "resp_test")->conversation.back();
  const json::value calls = json::parse(answer.tool_calls_json);
  EXPECT_EQ(calls.at(0).at("id"), call.at("call_id"));
  EXPECT_EQ(calls.at(0).at("function").at("name"), "get_weather");
}

// Streamed or not, an answer has the same items in the same order (their
// ids aside): prose, a call, more prose, and a call max_output_tokens cut.
TEST(ResponsesJob, AWholeAnswerHasTheItemsItsStreamAddsUpTo) {
  const std::string text = std::string("Let me look. ") + kHermesCall + "\nAnd also <tool_call>\n{\"name\": \"get_time\", " +
                           "\"arguments\": {\"zone\": \"Eu";
  auto items_of = [&](bool stream) {
    ResponsesJobSpec spec = job_spec(stream);
    spec.tool_format = ToolCallFormat::hermes;
    ResponsesJob job(std::move(spec));
    std::vector<std::string> out;
    for (size_t i = 0; i < text.size(); i += 5)
      job.on_event(0, piece(text.substr(i, 5), i + 5 >= text.size() ? FinishReason::length : FinishReason::none), out);
    EXPECT_TRUE(job.done());
    const json::value response = stream ? events_of(out).back().data.at("response") : json::parse(job.body());
    json::array items = response.at("output").as_array();
    for (json::value& item : items) {
      item.as_object().erase("id");
      item.as_object().erase("call_id");
    }
    return items;
  };
  const json::array streamed = items_of(true), whole = items_of(false);
  EXPECT_EQ(whole, streamed);
  ASSERT_EQ(whole.size(), 4u) << json::serialize(whole);
  EXPECT_EQ(whole.at(0).at("type"), "message");
  EXPECT_EQ(whole.at(1).at("type"), "function_call");
  EXPECT_EQ(whole.at(1).at("status"), "incomplete");  // the answer's last call was cut short
  EXPECT_EQ(whole.at(2).at("type"), "message");
  EXPECT_EQ(whole.at(3).at("name"), "get_time");
  EXPECT_EQ(whole.at(3).at("arguments"), R"({"zone":"Eu)");
}

// ---- a continued prompt in the tokens the engine holds ------------------------------------

// Texts of a few ids; 100 and 101 are control tokens (no bytes).
class FakeTokenizer : public Tokenizer {
 public:
  int32_t vocab_size() const override { return 128; }
  std::string token_bytes(int32_t id) const override {
    static const std::map<int32_t, std::string> text = {{1, "a"}, {2, "b"}, {3, "ab"}, {4, "c"}, {5, "cd"}, {6, "d"}};
    const auto it = text.find(id);
    return it == text.end() ? std::string() : it->second;
  }
  std::string decode(std::span<const int32_t> ids) const override {
    std::string out;
    for (int32_t id : ids) out += token_bytes(id);
    return out;
  }
  std::string piece(int32_t id) const override { return token_bytes(id); }

 protected:
  void encode_text(std::string_view, bool, std::vector<int32_t>&) const override {}
};

TEST(ContinuePrompt, StartsWithTheKeptTokensWhileTheTextsAgree) {
  const FakeTokenizer tok;
  using Ids = std::vector<int32_t>;
  // "ab" kept as a, b; the template's encoding says ab: the kept ids, then the rest.
  EXPECT_EQ(continue_prompt(tok, Ids{1, 2}, Ids{3, 4}), (Ids{1, 2, 4}));
  // An answer's end token the template writes as another control token.
  EXPECT_EQ(continue_prompt(tok, Ids{1, 2, 100}, Ids{3, 101, 4}), (Ids{1, 2, 101, 4}));
  EXPECT_EQ(continue_prompt(tok, Ids{1, 2, 100}, Ids{3, 100, 4}), (Ids{1, 2, 100, 4}));
  // No token boundary where "abc" ends ("cd"): the kept tokens up to the last shared one.
  EXPECT_EQ(continue_prompt(tok, Ids{1, 2, 4}, Ids{3, 5}), (Ids{1, 2, 5}));
  // Texts that part (the answer was rewritten): kept up to where they part.
  EXPECT_EQ(continue_prompt(tok, Ids{1, 2, 4, 4}, Ids{3, 6, 4}), (Ids{1, 2, 6, 4}));
  // A control token is not its spelling, nor another control token.
  EXPECT_EQ(continue_prompt(tok, Ids{1, 100, 2}, Ids{1, 101, 2, 4}), std::nullopt);
  // Nothing new, nothing to gain, or nothing shared: the prompt stands.
  EXPECT_EQ(continue_prompt(tok, Ids{1, 2}, Ids{3}), std::nullopt);
  EXPECT_EQ(continue_prompt(tok, Ids{1, 2}, Ids{1, 2, 4}), std::nullopt);
  EXPECT_EQ(continue_prompt(tok, Ids{4}, Ids{1, 2}), std::nullopt);
}

TEST(ResponsesRoutes, PathsAndMethods) {
  EXPECT_EQ(match_route("POST", "/v1/responses").route, Route::responses);
  EXPECT_EQ(match_route("GET", "/v1/responses").route, Route::wrong_method);
  const RouteMatch get = match_route("GET", "/v1/responses/resp_123?x=1");
  EXPECT_EQ(get.route, Route::response);
  EXPECT_EQ(get.id, "resp_123");
  EXPECT_TRUE(get.needs_key);
  EXPECT_EQ(match_route("DELETE", "/v1/responses/resp_123").route, Route::response);
  const RouteMatch post = match_route("POST", "/v1/responses/resp_123");
  EXPECT_EQ(post.route, Route::wrong_method);
  EXPECT_STREQ(post.allow, "GET, DELETE");
  const RouteMatch items = match_route("GET", "/v1/responses/resp_1/input_items?limit=2");
  EXPECT_EQ(items.route, Route::response_input_items);
  EXPECT_EQ(items.id, "resp_1");
  EXPECT_EQ(match_route("DELETE", "/v1/responses/resp_1/input_items").route, Route::wrong_method);
  EXPECT_EQ(match_route("GET", "/v1/responses/resp_1/other").route, Route::not_found);
  EXPECT_EQ(match_route("GET", "/v1/responses//input_items").route, Route::not_found);
}

}  // namespace
}  // namespace conveyor::http
