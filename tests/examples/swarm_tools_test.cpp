// The agent swarm's check of a tool call (examples/swarm_tools.hpp): the
// share of valid calls it reports is only worth what this check refuses, so
// each rule of the tools' schemas is broken once here, beside calls that
// keep them all; and the tools answer as the example's transcript says.
#include <gtest/gtest.h>

#include "examples/swarm_tools.hpp"

namespace conveyor::examples::swarm {
namespace {

std::string violation(const std::string& name, const std::string& arguments, const TurnChoice& choice = {"required", ""}) {
  json::object args;
  return call_violation(Call{"call_1", name, arguments}, choice, args);
}

TEST(SwarmTools, CallsWithinTheSchemasAreValid) {
  EXPECT_EQ(violation("calc", R"({"op":"*","a":-999,"b":999})"), "");
  EXPECT_EQ(violation("lookup", R"({"city":"Abcdefghijkl","days":7})"), "");
  EXPECT_EQ(violation("lookup", R"({"city":"Oslo"})"), "");            // days is optional
  EXPECT_EQ(violation("calc", R"({"op":"+","a":2.0,"b":3})"), "");      // 2.0 is an integer in JSON Schema
  EXPECT_EQ(violation("calc", R"({"op":"-","a":1,"b":2})", {"named", "calc"}), "");
}

TEST(SwarmTools, EachBrokenRuleIsNamed) {
  const std::vector<std::pair<std::pair<std::string, std::string>, std::string>> cases = {
      {{"search", R"({"q":"x"})"}, "'search' is not a declared tool"},
      {{"calc", R"({"op":"+","a":1,)"}, "arguments are not JSON"},
      {{"calc", R"([1,2])"}, "arguments are not an object"},
      {{"calc", R"({"op":"/","a":1,"b":2})"}, "#/op: \"/\" is not one of"},
      {{"calc", R"({"op":"+","a":1000,"b":2})"}, "#/a: 1000 is above the maximum 999"},
      {{"calc", R"({"op":"+","a":1,"b":-1000})"}, "#/b: -1000 is below the minimum -999"},
      {{"calc", R"({"op":"+","a":1.5,"b":2})"}, "#/a: 1.5E0 is not of type integer"},
      {{"calc", R"({"op":"+","a":"1","b":2})"}, "#/a: \"1\" is not of type integer"},
      {{"calc", R"({"op":"+","a":1})"}, "#: the required 'b' is missing"},
      {{"calc", R"({"op":"+","a":1,"b":2,"c":3})"}, "#/c: not a declared property"},
      {{"lookup", R"({"city":"oslo"})"}, "#/city: \"oslo\" does not match ^[A-Z][a-z]{1,11}$"},
      {{"lookup", R"({"city":"Abcdefghijklm"})"}, "does not match"},  // 13 characters
      {{"lookup", R"({"city":"Oslo","days":0})"}, "#/days: 0 is below the minimum 1"},
      {{"lookup", R"({"days":3})"}, "#: the required 'city' is missing"},
  };
  for (const auto& [call, expected] : cases) {
    const std::string why = violation(call.first, call.second);
    EXPECT_NE(why.find(expected), std::string::npos) << call.first << call.second << ": " << why;
  }
  EXPECT_EQ(violation("lookup", R"({"city":"Oslo"})", {"named", "calc"}),
            "tool_choice named 'calc', the call is 'lookup'");
}

TEST(SwarmTools, SchemaKeywordsOutsideTheSubsetAreNotPassedUnchecked) {
  const json::value schema = json::parse(R"({"type": "integer", "multipleOf": 3})");
  EXPECT_EQ(schema_violation(schema, json::value(4)), "#: keyword 'multipleOf' is not checked here");
  const json::value lengths = json::parse(R"({"type": "string", "minLength": 2, "maxLength": 3})");
  EXPECT_EQ(schema_violation(lengths, json::value("\xc3\xa9\xc3\xa9\xc3\xa9")), "");  // 3 characters, 6 bytes
  EXPECT_NE(schema_violation(lengths, json::value("abcd")), "");
  EXPECT_NE(schema_violation(lengths, json::value("a")), "");
}

TEST(SwarmTools, TheToolsAnswerDeterministically) {
  EXPECT_EQ(json::serialize(run_tool("calc", json::parse(R"({"op":"*","a":-12,"b":11})").as_object())),
            R"({"result":-132})");
  const json::object forecast = run_tool("lookup", json::parse(R"({"city":"Oslo","days":3})").as_object());
  EXPECT_EQ(forecast.at("high_c").as_array().size(), 3u);
  EXPECT_EQ(forecast, run_tool("lookup", json::parse(R"({"city":"Oslo","days":3})").as_object()));
  EXPECT_EQ(run_tool("lookup", json::parse(R"({"city":"Oslo"})").as_object()).at("high_c").as_array().size(), 1u);
}

// A turn's calls and its answers join the conversation in OpenAI's shapes;
// an invalid call is answered with the error, a text answer with a request
// for a call.
TEST(SwarmTools, TheConversationCarriesCallsAndAnswers) {
  ToolAgent agent(2, 3, ChoicePolicy::alternate, "system");
  EXPECT_EQ(agent.choice().describe(), "required");
  agent.finish_turn(TurnRecord{}, {{"call_a", "calc", R"({"op":"+","a":1,"b":2})"}}, "");
  EXPECT_EQ(agent.choice().describe(), "named calc");  // agent 2, turn 2
  agent.finish_turn(TurnRecord{}, {{"call_b", "calc", R"({"op":"+","a":1})"}}, "");
  agent.finish_turn(TurnRecord{}, {}, "hello");
  const json::array& m = agent.messages();
  ASSERT_EQ(m.size(), 2u + 2 + 2 + 2);
  EXPECT_EQ(m[2].at("tool_calls").at(0).at("function").at("arguments"), R"({"op":"+","a":1,"b":2})");
  EXPECT_EQ(m[3].at("role"), "tool");
  EXPECT_EQ(m[3].at("tool_call_id"), "call_a");
  EXPECT_EQ(m[3].at("content"), R"({"result":3})");
  EXPECT_EQ(m[5].at("content"), R"({"error":"#: the required 'b' is missing"})");
  EXPECT_EQ(m[6].at("content"), "hello");
  EXPECT_EQ(m[7].at("role"), "user");
  ASSERT_EQ(agent.outcomes().size(), 3u);
  EXPECT_EQ(agent.outcomes()[0].verdict, Verdict::valid);
  EXPECT_EQ(agent.outcomes()[1].verdict, Verdict::invalid);
  EXPECT_EQ(agent.outcomes()[1].choice, "named");
  EXPECT_EQ(agent.outcomes()[2].verdict, Verdict::text);
}

}  // namespace
}  // namespace conveyor::examples::swarm
