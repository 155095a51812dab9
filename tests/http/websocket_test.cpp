// The WebSocket API on /v1/ws: several requests multiplexed on one socket,
// each answered with deltas and one final event under its own id; cancel;
// malformed messages; a closed socket cancelling its requests; the output bound.
#include <map>
#include <set>

#include "tests/http/test_server.hpp"
#include "tests/http/test_util.hpp"

namespace conveyor::http::testing {
namespace {

namespace json = boost::json;

class WebSocket : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = new TestServer(); }
  static void TearDownTestSuite() { delete server_; }
  static uint16_t port() { return server_->port(); }
  static TestServer* server_;
};
TestServer* WebSocket::server_ = nullptr;

// What one request id received.
struct Received {
  std::vector<int32_t> tokens;
  std::string text;
  int finals = 0;
  json::object final_event;
};

// Reads until `finals` final events arrived (or a read times out); keys are the ids as JSON.
std::map<std::string, Received> read_until_finals(WsClient& ws, int finals) {
  std::map<std::string, Received> out;
  int seen = 0;
  while (seen < finals) {
    auto message = ws.read();
    if (!message) {
      ADD_FAILURE() << "no final event within the timeout";
      break;
    }
    json::object e = parse_object(*message);
    Received& r = out[json::serialize(e["id"])];
    if (e["type"] == "delta") {
      r.text += std::string(e["text"].as_string());
      if (e.contains("token_ids"))
        for (int32_t id : ids_of(e["token_ids"])) r.tokens.push_back(id);
    } else if (e["type"] == "final") {
      ++r.finals;
      ++seen;
      r.final_event = e;
    } else {
      ADD_FAILURE() << "unexpected event " << *message;
      break;
    }
  }
  return out;
}

TEST_F(WebSocket, MultiplexedRequestsEachGetTheirTokensAndOneFinal) {
  WsClient ws(port());
  ASSERT_TRUE(ws.connected()) << ws.upgrade_status();
  const std::vector<int32_t> p1 = {256, 10, 20, 30}, p2 = {256, 40, 50};
  ws.send(body_of({{"id", "a"}, {"prompt", ids_json(p1)}, {"max_tokens", 30}, {"temperature", 0},
                   {"ignore_eos", true}, {"return_token_ids", true}}));
  ws.send(body_of({{"id", 7}, {"prompt", ids_json(p2)}, {"max_tokens", 25}, {"temperature", 0},
                   {"ignore_eos", true}, {"return_token_ids", true}}));
  ws.send(body_of({{"id", "chat"}, {"messages", json::array{json::object{{"role", "user"}, {"content", "hi"}}}},
                   {"max_tokens", 5}, {"ignore_eos", true}}));
  auto got = read_until_finals(ws, 3);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got["\"a\""].tokens, server_->engine_greedy(p1, 30, true));
  EXPECT_EQ(got["7"].tokens, server_->engine_greedy(p2, 25, true));  // a numeric id stays a number
  for (auto& [id, r] : got) {
    EXPECT_EQ(r.finals, 1) << id;
    EXPECT_EQ(r.final_event["finish_reason"], "length") << id;
    EXPECT_TRUE(r.final_event["usage"].is_object()) << id;
  }
  EXPECT_EQ(got["\"chat\""].final_event["usage"].as_object()["completion_tokens"], 5);
}

TEST_F(WebSocket, CancelEndsOneRequestAndLeavesTheOthers) {
  WsClient ws(port());
  ASSERT_TRUE(ws.connected());
  ws.send(body_of({{"id", "long"}, {"prompt", "x"}, {"max_tokens", 480}, {"ignore_eos", true}}));
  ws.send(body_of({{"id", "short"}, {"prompt", "y"}, {"max_tokens", 3}, {"ignore_eos", true}}));
  ws.send(body_of({{"type", "cancel"}, {"id", "long"}}));
  ws.send(body_of({{"type", "cancel"}, {"id", "nobody"}}));  // ignored
  auto got = read_until_finals(ws, 2);
  EXPECT_EQ(got["\"long\""].final_event["finish_reason"], "cancelled");
  EXPECT_EQ(got["\"short\""].final_event["finish_reason"], "length");
  EXPECT_EQ(got["\"long\""].finals, 1);
}

// A request is planned off the I/O thread (ServerState::plan): from its
// message on, its id is taken, and a cancel that comes while it is planned
// still ends it (the cancel above may come then too).
TEST_F(WebSocket, AnIdIsTakenFromItsMessageOn) {
  WsClient ws(port());
  ASSERT_TRUE(ws.connected());
  ws.send(body_of({{"id", "dup"}, {"prompt", "x"}, {"max_tokens", 480}, {"ignore_eos", true}}));
  ws.send(body_of({{"id", "dup"}, {"prompt", "y"}, {"max_tokens", 3}, {"ignore_eos", true}}));
  ws.send(body_of({{"id", "gone"}, {"prompt", "z"}, {"max_tokens", 480}, {"ignore_eos", true}}));
  ws.send(body_of({{"type", "cancel"}, {"id", "gone"}}));
  ws.send(body_of({{"type", "cancel"}, {"id", "dup"}}));
  int errors = 0;
  std::map<std::string, json::object> finals;
  while (finals.size() < 2 || errors < 1) {
    auto message = ws.read();
    ASSERT_TRUE(message) << "no event within the timeout";
    json::object e = parse_object(*message);
    if (e["type"] == "error") {
      ++errors;
      EXPECT_EQ(e["id"], "dup");
      EXPECT_EQ(e["error"].as_object()["param"], "id");
    } else if (e["type"] == "final") {
      EXPECT_TRUE(finals.emplace(std::string(e["id"].as_string()), e).second) << *message;
    }
  }
  EXPECT_EQ(errors, 1);
  EXPECT_EQ(finals["dup"]["finish_reason"], "cancelled");
  EXPECT_EQ(finals["gone"]["finish_reason"], "cancelled");
}

TEST_F(WebSocket, MalformedMessagesGetErrorEventsAndTheSocketStays) {
  WsClient ws(port());
  ASSERT_TRUE(ws.connected());
  ws.send("{not json");
  json::object e = parse_object(ws.read().value_or("{}"));
  EXPECT_EQ(e["type"], "error");
  EXPECT_TRUE(e["id"].is_null());
  EXPECT_TRUE(e["error"].as_object()["message"].is_string());

  ws.send(body_of({{"id", "t"}, {"prompt", "x"}, {"temperature", -3}}));
  e = parse_object(ws.read().value_or("{}"));
  EXPECT_EQ(e["type"], "error");
  EXPECT_EQ(e["id"], "t");
  EXPECT_EQ(e["error"].as_object()["param"], "temperature");

  ws.send(body_of({{"prompt", "x"}}));  // no id
  EXPECT_EQ(parse_object(ws.read().value_or("{}"))["type"], "error");

  ws.send(body_of({{"id", "ok"}, {"prompt", "x"}, {"max_tokens", 2}, {"ignore_eos", true}}));
  auto got = read_until_finals(ws, 1);
  EXPECT_EQ(got["\"ok\""].final_event["finish_reason"], "length");
}

TEST_F(WebSocket, ClosingTheSocketCancelsItsRequests) {
  const double cancelled = metric(port(), "conveyor:request_success_total{finished_reason=\"cancelled\"}");
  {
    WsClient ws(port());
    ASSERT_TRUE(ws.connected());
    ws.send(body_of({{"id", 1}, {"prompt", "x"}, {"max_tokens", 480}, {"ignore_eos", true}}));
    ws.send(body_of({{"id", 2}, {"prompt", "y"}, {"max_tokens", 480}, {"ignore_eos", true}}));
    ASSERT_TRUE(ws.read().has_value());  // running
    ws.drop();
  }
  EXPECT_TRUE(eventually([&] {
    return metric(port(), "conveyor:num_requests_running") == 0 && metric(port(), "conveyor:kv_cache_usage_ratio") == 0;
  }));
  // Both were running when the socket went (a loaded machine may let one end first).
  EXPECT_GE(metric(port(), "conveyor:request_success_total{finished_reason=\"cancelled\"}"), cancelled + 1);
}

// A schema of many bounded strings: a new one takes a while to compile
// (tens of milliseconds here, more under the sanitizers).
json::object slow_schema(const std::string& prefix) {
  json::object properties;
  json::array required;
  for (int i = 0; i < 120; ++i) {
    const std::string name = prefix + std::to_string(i);
    properties[name] = json::object{{"type", "string"}, {"maxLength", 200 + i}};
    required.push_back(json::value(name));
  }
  return json::object{{"type", "object"}, {"properties", std::move(properties)}, {"required", std::move(required)}};
}

json::object schema_request(const std::string& id, const std::string& prefix, int n = 1) {
  return json::object{
      {"id", id},
      {"prompt", "x"},
      {"max_tokens", 2},
      {"n", n},
      {"response_format",
       json::object{{"type", "json_schema"}, {"json_schema", json::object{{"name", "s"}, {"schema", slow_schema(prefix)}}}}}};
}

// A request still planned (its grammar queued behind another's compile) is
// cancelled at once: its final comes before anything of the request ahead
// of it, with no tokens and a choice for each of its n, and its grammar is
// never compiled.
TEST_F(WebSocket, ACancelBeforeTheEngineIsAnsweredAtOnceAndCompilesNothing) {
  const double compiled = metric(port(), "conveyor:grammars_compiled_total");
  WsClient ws(port());
  ASSERT_TRUE(ws.connected());
  ws.send(json::serialize(schema_request("first", "cancel_test_a")));
  ws.send(json::serialize(schema_request("second", "cancel_test_b", 2)));
  ws.send(body_of({{"type", "cancel"}, {"id", "second"}}));
  auto message = ws.read();
  ASSERT_TRUE(message) << "no event within the timeout";
  json::object e = parse_object(*message);
  EXPECT_EQ(e["type"], "final") << *message;
  EXPECT_EQ(e["id"], "second") << *message;
  EXPECT_EQ(e["finish_reason"], "cancelled");
  EXPECT_EQ(e["usage"].as_object()["completion_tokens"], 0);
  EXPECT_EQ(e["usage"].as_object()["prompt_tokens"], 0);
  ASSERT_TRUE(e["choices"].is_array()) << *message;
  ASSERT_EQ(e["choices"].as_array().size(), 2u);
  for (const json::value& c : e["choices"].as_array()) EXPECT_EQ(c.as_object().at("finish_reason"), "cancelled");
  auto got = read_until_finals(ws, 1);
  EXPECT_EQ(got.count("\"second\""), 0u);
  EXPECT_EQ(got["\"first\""].final_event["finish_reason"], "length");
  EXPECT_EQ(metric(port(), "conveyor:grammars_compiled_total"), compiled + 1);
  // The id is free again.
  ws.send(body_of({{"id", "second"}, {"prompt", "x"}, {"max_tokens", 1}}));
  got = read_until_finals(ws, 1);
  EXPECT_EQ(got["\"second\""].finals, 1);
}

TEST(WebSocketBound, OutputPastTheBoundCancelsTheRequest) {
  ServerOptions options;
  options.max_output_bytes = 1;
  TestServer server(small_engine(), options);
  WsClient ws(server.port());
  ASSERT_TRUE(ws.connected());
  ws.send(body_of({{"id", "big"}, {"prompt", "x"}, {"max_tokens", 480}, {"ignore_eos", true}}));
  auto got = read_until_finals(ws, 1);
  EXPECT_EQ(got["\"big\""].final_event["finish_reason"], "cancelled");
  EXPECT_EQ(metric(server.port(), "conveyor:http_refused_total{reason=\"output_size\"}"), 1);
}

}  // namespace
}  // namespace conveyor::http::testing
