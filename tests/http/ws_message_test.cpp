// decide_ws_message: what one /v1/ws client message asks for, and the job
// spec of a started request, without a socket.
#include <gtest/gtest.h>

#include <set>

#include "http/api_json.hpp"
#include "http/ws_message.hpp"
#include "model/tokenizer/tokenizer.hpp"

namespace conveyor::http {
namespace {

const ModelContext& byte_model() {
  static const ModelContext m = [] {
    ModelConfig c;
    c.name = "ws";
    c.vocab_size = 258;
    c.context_length = 64;
    return make_model_context(c, make_byte_tokenizer(), "ws-model", "chatml", "").value();
  }();
  return m;
}

WsAction decide(std::string_view text, const std::set<std::string>& running = {}, bool draining = false) {
  return decide_ws_message(text, byte_model(), draining,
                           [&](const std::string& key) { return running.count(key) > 0; });
}

TEST(WsMessage, StartsARequestWithItsPlanAndKey) {
  const WsAction a = decide(R"({"id": 7, "prompt": "abc", "max_tokens": 3, "n": 2})");
  ASSERT_TRUE(std::holds_alternative<WsStart>(a));
  const WsStart& s = std::get<WsStart>(a);
  EXPECT_EQ(s.key, "n:7");
  ASSERT_EQ(s.plan.prompts.size(), 1u);
  EXPECT_EQ(s.plan.n, 2);
  EXPECT_EQ(s.plan.sampling.max_tokens, 3);
  const JobSpec spec = ws_job_spec(s.request, s.plan, byte_model());
  EXPECT_EQ(spec.mode, OutputMode::websocket);
  EXPECT_EQ(spec.model, "ws-model");
  EXPECT_EQ(spec.client_id, "7");
  EXPECT_TRUE(spec.client_id_is_number);
  EXPECT_EQ(spec.prompts, s.plan.prompts);
  EXPECT_FALSE(spec.chat);
}

TEST(WsMessage, StringAndNumberIdsAreDifferentKeys) {
  EXPECT_EQ(ws_id_key("7", true), "n:7");
  EXPECT_EQ(ws_id_key("7", false), "s:7");
  const WsAction a = decide(R"({"id": "7", "messages": [{"role": "user", "content": "hi"}]})", {"n:7"});
  ASSERT_TRUE(std::holds_alternative<WsStart>(a));
  EXPECT_EQ(std::get<WsStart>(a).key, "s:7");
  EXPECT_TRUE(std::get<WsStart>(a).request.chat);
}

TEST(WsMessage, RefusesAnIdStillRunning) {
  const WsAction a = decide(R"({"id": "x", "prompt": "abc"})", {"s:x"});
  ASSERT_TRUE(std::holds_alternative<WsRefuse>(a));
  EXPECT_EQ(std::get<WsRefuse>(a).error.status, 400);
  EXPECT_EQ(std::get<WsRefuse>(a).error.param, "id");
  EXPECT_EQ(std::get<WsRefuse>(a).request.client_id, "x");
}

TEST(WsMessage, RefusesAnEmptyId) {
  // Its events said "id": null, as for a message whose id could not be read.
  const WsAction a = decide(R"({"id": "", "prompt": "abc"})");
  ASSERT_TRUE(std::holds_alternative<WsRefuse>(a));
  EXPECT_EQ(std::get<WsRefuse>(a).error.status, 400);
  EXPECT_EQ(std::get<WsRefuse>(a).error.param, "id");
}

TEST(WsMessage, CancelsWhateverTheStateWhileDrainingRefusesNewWork) {
  const WsAction c = decide(R"({"type": "cancel", "id": 3})", {}, /*draining=*/true);
  ASSERT_TRUE(std::holds_alternative<WsCancel>(c));
  EXPECT_EQ(std::get<WsCancel>(c).key, "n:3");
  const WsAction d = decide(R"({"id": 4, "prompt": "abc"})", {}, /*draining=*/true);
  ASSERT_TRUE(std::holds_alternative<WsRefuse>(d));
  EXPECT_EQ(std::get<WsRefuse>(d).error.status, 503);
  EXPECT_EQ(std::get<WsRefuse>(d).error.code, "shutting_down");
}

TEST(WsMessage, RefusesMalformedMessagesAndWhatTheModelCannotRun) {
  const WsAction bad = decide("{not json");
  ASSERT_TRUE(std::holds_alternative<WsRefuse>(bad));
  EXPECT_EQ(std::get<WsRefuse>(bad).error.status, 400);
  EXPECT_TRUE(std::get<WsRefuse>(bad).request.client_id.empty());
  // Parses, but 100 prompt bytes do not fit the model's 64-token context.
  const WsAction long_prompt = decide(R"({"id": 1, "prompt": ")" + std::string(100, 'a') + R"("})");
  ASSERT_TRUE(std::holds_alternative<WsRefuse>(long_prompt));
  EXPECT_EQ(std::get<WsRefuse>(long_prompt).error.status, 400);
  EXPECT_EQ(std::get<WsRefuse>(long_prompt).request.client_id, "1");
}

// An id given twice is the last one, with its own kind. A string id after a
// number once kept the number's kind: the first event for it called
// std::stoll on the string, whose exception ended the server (ws_fuzz).
TEST(WsMessage, AnIdGivenTwiceIsTheLastOneWithItsKind) {
  const WsAction a = decide(R"({"id": 5, "id": "x", "prompt": "abc"})");
  ASSERT_TRUE(std::holds_alternative<WsStart>(a));
  EXPECT_EQ(std::get<WsStart>(a).key, "s:x");
  EXPECT_FALSE(std::get<WsStart>(a).request.client_id_is_number);
  const WsAction refused = decide(R"({"id": 5, "id": "x", "prompt": "abc", "n": 0})");
  ASSERT_TRUE(std::holds_alternative<WsRefuse>(refused));
  const ApiRequest& r = std::get<WsRefuse>(refused).request;
  const std::string event = ws_error_json(std::get<WsRefuse>(refused).error, r.client_id, r.client_id_is_number);
  EXPECT_NE(event.find(R"("id":"x")"), std::string::npos) << event;
}

}  // namespace
}  // namespace conveyor::http
