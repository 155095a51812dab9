// The server's pieces without a network: request parsing, chat templates,
// the completion job's output, Prometheus text, routing and the API key
// check, the serve config file.
#include <gtest/gtest.h>

#include <boost/json.hpp>

#include "http/api_request.hpp"
#include "http/request_plan.hpp"
#include "http/chat_template.hpp"
#include "http/completion_job.hpp"
#include "http/metrics_text.hpp"
#include "http/routes.hpp"
#include "http/serve_settings.hpp"

namespace conveyor::http {
namespace {

namespace json = boost::json;

TEST(ApiRequest, ParsesEveryField) {
  const ParseResult r = parse_api_request(
      R"({"model": "m", "prompt": "hi", "max_tokens": 7, "temperature": 0.5, "top_p": 0.9, "top_k": -1,
          "min_p": 0.1, "seed": 42, "stop": ["a", "b"], "n": 3, "logprobs": 2, "presence_penalty": 0.5,
          "frequency_penalty": -0.5, "stream": true, "stream_options": {"include_usage": true},
          "user": "u", "ignore_eos": true, "priority": 4, "return_token_ids": true, "echo": false,
          "suffix": null})",
      Endpoint::completions);
  ASSERT_FALSE(r.error) << r.error->message;
  const ApiRequest& a = r.request;
  EXPECT_EQ(a.model, "m");
  ASSERT_EQ(a.prompts.size(), 1u);
  EXPECT_EQ(*a.prompts[0].text, "hi");
  EXPECT_EQ(a.sampling.max_tokens, 7);
  EXPECT_FLOAT_EQ(a.sampling.temperature, 0.5f);
  EXPECT_EQ(a.sampling.top_k, 0);
  EXPECT_TRUE(a.sampling.has_seed);
  EXPECT_EQ(a.sampling.seed, 42u);
  EXPECT_EQ(a.stop, (std::vector<std::string>{"a", "b"}));
  EXPECT_EQ(a.n, 3);
  EXPECT_EQ(a.sampling.logprobs, 2);
  EXPECT_TRUE(a.stream && a.include_usage && a.return_token_ids && a.sampling.ignore_eos);
  EXPECT_EQ(a.priority, 4);
}

TEST(ApiRequest, SeedsSpanSignedAndUnsigned64Bits) {
  const auto seed = [](const std::string& value) {
    return parse_api_request(R"({"prompt": "hi", "seed": )" + value + "}", Endpoint::completions);
  };
  EXPECT_EQ(seed("18446744073709551615").request.sampling.seed, UINT64_MAX);
  EXPECT_EQ(seed("-1").request.sampling.seed, UINT64_MAX);  // the same generator, as a signed value
  EXPECT_EQ(seed("9223372036854775808").request.sampling.seed, uint64_t(1) << 63);
  for (const char* refused : {"18446744073709551616", "1.5", "\"7\"", "1e3"}) {
    const ParseResult r = seed(refused);
    ASSERT_TRUE(r.error) << refused;
    EXPECT_EQ(r.error->param, "seed") << refused;
  }
}

TEST(ApiRequest, PromptForms) {
  auto prompts = [](const char* body) { return parse_api_request(body, Endpoint::completions); };
  EXPECT_EQ(prompts(R"({"prompt": [1, 2, 3]})").request.prompts.at(0).ids, (std::vector<int32_t>{1, 2, 3}));
  const auto list = prompts(R"({"prompt": ["a", [4, 5], "b"]})").request.prompts;
  ASSERT_EQ(list.size(), 3u);
  EXPECT_EQ(*list[0].text, "a");
  EXPECT_EQ(list[1].ids, (std::vector<int32_t>{4, 5}));
  EXPECT_TRUE(prompts(R"({"prompt": []})").error);
  EXPECT_TRUE(prompts(R"({"prompt": [1, -2]})").error);
  EXPECT_TRUE(prompts(R"({"prompt": [1.5]})").error);
  EXPECT_TRUE(prompts(R"({"prompt": [[1], 2]})").error);
}

TEST(ApiRequest, ChatMessagesAndLogprobs) {
  const ParseResult r = parse_api_request(
      R"({"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": [{"type": "text", "text": "a"}, {"type": "text", "text": "b"}]}],
          "logprobs": true, "top_logprobs": 3, "max_completion_tokens": 9, "max_tokens": 100})",
      Endpoint::chat);
  ASSERT_FALSE(r.error) << r.error->message;
  ASSERT_EQ(r.request.messages.size(), 2u);
  EXPECT_EQ(r.request.messages[1].content, "a\nb");  // parts joined by newlines, as vLLM and llama.cpp join them
  EXPECT_EQ(r.request.sampling.logprobs, 3);
  EXPECT_EQ(r.request.sampling.max_tokens, 9);  // max_completion_tokens wins
  EXPECT_TRUE(parse_api_request(R"({"messages": [{"content": "x"}]})", Endpoint::chat).error);
  EXPECT_TRUE(parse_api_request(R"({"prompt": "x"})", Endpoint::chat).error);
  // developer is read as system; a role no template knows is refused, not dropped.
  const ParseResult developer =
      parse_api_request(R"({"messages": [{"role": "developer", "content": "d"}, {"role": "user", "content": "u"}]})",
                        Endpoint::chat);
  ASSERT_FALSE(developer.error) << developer.error->message;
  EXPECT_EQ(developer.request.messages[0].role, "system");
  const ParseResult wizard = parse_api_request(
      R"({"messages": [{"role": "user", "content": "u"}, {"role": "wizard", "content": "w"}]})", Endpoint::chat);
  ASSERT_TRUE(wizard.error);
  EXPECT_EQ(wizard.error->param, "messages");
  EXPECT_NE(wizard.error->message.find("messages[1]: role 'wizard'"), std::string::npos) << wizard.error->message;
  // Only an assistant may go without content (its tool calls stand for it), as in OpenAI's API.
  const ParseResult mute = parse_api_request(
      R"({"messages": [{"role": "system", "content": "s"}, {"role": "user", "content": null}]})", Endpoint::chat);
  ASSERT_TRUE(mute.error);
  EXPECT_EQ(mute.error->message, "messages[1]: a user message needs 'content' (a string or an array of text parts)");
  EXPECT_TRUE(parse_api_request(R"({"messages": [{"role": "tool", "tool_call_id": "c"}]})", Endpoint::chat).error);
  const ParseResult calls = parse_api_request(
      R"({"messages": [{"role": "user", "content": "u"}, {"role": "assistant", "content": null, "reasoning_content": "r",
          "tool_calls": [{"id": "c", "type": "function", "function": {"name": "f", "arguments": "{}"}}]}],
          "chat_template_kwargs": {"enable_thinking": false}})",
      Endpoint::chat);
  ASSERT_FALSE(calls.error) << calls.error->message;
  EXPECT_EQ(calls.request.messages[1].reasoning_content, "r");
  EXPECT_EQ(calls.request.chat_template_kwargs_json, R"({"enable_thinking": false})");
  const ParseResult kwargs_list =
      parse_api_request(R"({"messages": [{"role": "user", "content": "u"}], "chat_template_kwargs": [1]})", Endpoint::chat);
  ASSERT_TRUE(kwargs_list.error);
  EXPECT_EQ(kwargs_list.error->param, "chat_template_kwargs");
}

TEST(ApiRequest, RejectsBadJsonWithParam) {
  auto error = [](const char* body) { return parse_api_request(body, Endpoint::completions).error; };
  EXPECT_TRUE(error(R"({"prompt": "x"} {"prompt": "y"})"));
  EXPECT_TRUE(error(R"({"prompt": "x",})"));
  EXPECT_TRUE(error("\"x\""));
  EXPECT_EQ(error(R"({"prompt": "x", "n": "2"})")->param, "n");
  EXPECT_EQ(error(R"({"prompt": "x", "max_tokens": 1e99})")->param, "max_tokens");
  EXPECT_EQ(error(R"({"prompt": "x", "stop": [1]})")->param, "stop");
  EXPECT_EQ(error(R"({"prompt": "x", "logprobs": 21})")->status, 400);
  EXPECT_EQ(error(R"({"prompt": "x", "logprobs": -1})")->param, "logprobs");
  // What is wrong is named: content after the object, a lone surrogate.
  const auto trailing = error(R"({"prompt": "x"} x)");
  ASSERT_TRUE(trailing);
  EXPECT_EQ(trailing->code, "invalid_json");
  EXPECT_NE(trailing->message.find("extra data"), std::string::npos) << trailing->message;
  const auto surrogate = error(R"({"prompt": "\ud800"})");
  ASSERT_TRUE(surrogate);
  EXPECT_EQ(surrogate->param, "prompt");
  EXPECT_NE(surrogate->message.find("lone surrogate"), std::string::npos) << surrogate->message;
  // A schema nested 40 deep is JSON the API reads (Boost's default stops at 32).
  std::string schema = R"({"type": "integer"})";
  for (int i = 0; i < 40; ++i) schema = R"({"type": "array", "items": )" + schema + "}";
  const std::string deep_body =
      R"({"prompt": "x", "response_format": {"type": "json_schema", "json_schema": {"name": "d", "schema": )" + schema +
      "}}}";
  const auto deep = error(deep_body.c_str());
  EXPECT_FALSE(deep) << deep->message;
  EXPECT_EQ(error(R"({"prompt": "x", "top_k": -5})")->param, "top_k");
  EXPECT_FALSE(error(R"({"prompt": "x", "top_k": -1})"));  // off, as in vLLM
  // The other endpoint's body fields are refused, not ignored.
  EXPECT_EQ(error(R"({"prompt": "x", "messages": [{"role": "user", "content": "y"}]})")->param, "messages");
  auto chat_error = [](const char* body) { return parse_api_request(body, Endpoint::chat).error; };
  const char* kMessages = R"("messages": [{"role": "user", "content": "x"}])";
  EXPECT_EQ(chat_error((std::string("{") + kMessages + R"(, "prompt": "y"})").c_str())->param, "prompt");
  // Chat's logprobs is a flag and top_logprobs its count, each named when wrong.
  EXPECT_EQ(chat_error((std::string("{") + kMessages + R"(, "logprobs": 5})").c_str())->param, "logprobs");
  EXPECT_EQ(chat_error((std::string("{") + kMessages + R"(, "logprobs": true, "top_logprobs": -1})").c_str())->param,
            "top_logprobs");
  const auto over = chat_error((std::string("{") + kMessages + R"(, "logprobs": true, "top_logprobs": 21})").c_str());
  ASSERT_TRUE(over);
  EXPECT_EQ(over->param, "top_logprobs");
  EXPECT_NE(over->message.find("'top_logprobs'"), std::string::npos) << over->message;
}

// Under fcfs a request's priority must be 0: a 400 naming it when the request
// is planned, not a refusal from the engine (which counts as a failure).
// A model of 300 tokens and a 64-token context, without a tokenizer.
Expected<ModelContext> model_without_tokenizer() {
  ModelConfig config;
  config.vocab_size = 300;
  config.context_length = 64;
  return make_model_context(config, nullptr, "m", "auto", "");
}

TEST(RequestPlan, PriorityNeedsThePriorityPolicy) {
  auto model = model_without_tokenizer();
  ASSERT_TRUE(model) << model.error().message;
  const ParseResult r =
      parse_api_request(R"({"prompt": [1, 2], "max_tokens": 2, "priority": 1})", Endpoint::completions);
  ASSERT_FALSE(r.error) << r.error->message;
  model->fcfs_only = true;
  auto refused = plan_request(r.request, *model);
  ASSERT_TRUE(std::holds_alternative<ApiError>(refused));
  EXPECT_EQ(std::get<ApiError>(refused).param, "priority");
  model->fcfs_only = false;  // --scheduling-policy priority, or a router's nodes
  EXPECT_TRUE(std::holds_alternative<RequestPlan>(plan_request(r.request, *model)));
}

TEST(RequestPlan, NPastTheEnginesRunningSequencesNamesN) {
  auto model = model_without_tokenizer();
  ASSERT_TRUE(model) << model.error().message;
  const ParseResult r = parse_api_request(R"({"prompt": [1, 2], "max_tokens": 2, "n": 9})", Endpoint::completions);
  ASSERT_FALSE(r.error) << r.error->message;
  model->max_samples = 8;  // --max-num-seqs 8
  auto refused = plan_request(r.request, *model);
  ASSERT_TRUE(std::holds_alternative<ApiError>(refused));
  EXPECT_EQ(std::get<ApiError>(refused).param, "n");
  EXPECT_NE(std::get<ApiError>(refused).message.find("between 1 and 8"), std::string::npos);
  // Out of range on either side, the one bound in force is named.
  for (const char* body :
       {R"({"prompt": [1, 2], "max_tokens": 2, "n": 0})", R"({"prompt": [1, 2], "max_tokens": 2, "n": 65})"}) {
    const ParseResult out = parse_api_request(body, Endpoint::completions);
    ASSERT_FALSE(out.error) << out.error->message;
    auto bounded = plan_request(out.request, *model);
    ASSERT_TRUE(std::holds_alternative<ApiError>(bounded)) << body;
    EXPECT_EQ(std::get<ApiError>(bounded).param, "n");
    EXPECT_NE(std::get<ApiError>(bounded).message.find("between 1 and 8"), std::string::npos) << body;
  }
  model->max_samples = 0;  // a router's nodes decide
  EXPECT_TRUE(std::holds_alternative<RequestPlan>(plan_request(r.request, *model)));
  const ParseResult past = parse_api_request(R"({"prompt": [1, 2], "max_tokens": 2, "n": 65})", Endpoint::completions);
  auto protocol = plan_request(past.request, *model);
  ASSERT_TRUE(std::holds_alternative<ApiError>(protocol));
  EXPECT_EQ(std::get<ApiError>(protocol).message, "'n' must be between 1 and 64");
}

// Stop strings match text: a model without a tokenizer has none, so they
// are a 400 naming `stop`, not a request that runs as if they were absent.
TEST(RequestPlan, StopStringsNeedATokenizer) {
  auto model = model_without_tokenizer();
  ASSERT_TRUE(model) << model.error().message;
  const ParseResult r = parse_api_request(R"({"prompt": [1, 2], "max_tokens": 2, "stop": ["x"]})", Endpoint::completions);
  ASSERT_FALSE(r.error) << r.error->message;
  auto refused = plan_request(r.request, *model);
  ASSERT_TRUE(std::holds_alternative<ApiError>(refused));
  EXPECT_EQ(std::get<ApiError>(refused).param, "stop");
  const ParseResult none = parse_api_request(R"({"prompt": [1, 2], "max_tokens": 2, "stop": []})", Endpoint::completions);
  ASSERT_FALSE(none.error) << none.error->message;
  EXPECT_TRUE(std::holds_alternative<RequestPlan>(plan_request(none.request, *model)));
}

TEST(ApiRequest, WebSocketEnvelope) {
  const auto cancel = parse_api_request(R"({"type": "cancel", "id": 12})", Endpoint::websocket);
  ASSERT_FALSE(cancel.error);
  EXPECT_TRUE(cancel.request.cancel);
  EXPECT_TRUE(cancel.request.client_id_is_number);
  EXPECT_EQ(cancel.request.client_id, "12");
  const auto chat = parse_api_request(R"({"id": "c", "messages": [{"role": "user", "content": "x"}]})",
                                      Endpoint::websocket);
  ASSERT_FALSE(chat.error);
  EXPECT_TRUE(chat.request.chat);
  EXPECT_TRUE(parse_api_request(R"({"prompt": "x"})", Endpoint::websocket).error);  // no id
  EXPECT_TRUE(parse_api_request(R"({"id": 1, "prompt": "x", "messages": []})", Endpoint::websocket).error);
}

TEST(ChatTemplate, DetectsFromGgufTemplate) {
  EXPECT_EQ(detect_chat_template("{% for m in messages %}<|im_start|>{{m.role}}"), ChatTemplateKind::chatml);
  EXPECT_EQ(detect_chat_template("{{ bos_token + '[INST] ' + content }}"), ChatTemplateKind::llama2);
  EXPECT_EQ(detect_chat_template(""), ChatTemplateKind::plain);
  EXPECT_FALSE(parse_chat_template_kind("jinja").has_value());
}

TEST(ChatTemplate, RendersTheThreeFormats) {
  std::shared_ptr<const Tokenizer> bytes = make_byte_tokenizer();
  const std::vector<ChatMessage> chat = {{"system", "S"}, {"user", "U1"}, {"assistant", "A1"}, {"user", "U2"}};
  EXPECT_EQ(ChatTemplate(ChatTemplateKind::llama2, bytes).apply(chat)->text,
            "<s>[INST] <<SYS>>\nS\n<</SYS>>\n\nU1 [/INST] A1 </s><s>[INST] U2 [/INST]");
  EXPECT_EQ(ChatTemplate(ChatTemplateKind::chatml, bytes).apply(chat)->text,
            "<s><|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU1<|im_end|>\n<|im_start|>assistant\nA1"
            "<|im_end|>\n<|im_start|>user\nU2<|im_end|>\n<|im_start|>assistant\n");
  const ChatTemplate plain(ChatTemplateKind::plain, bytes);
  EXPECT_EQ(plain.apply(chat)->text, "<s>S\n\nUser: U1\nAssistant: A1\nUser: U2\nAssistant:");
  // Special tokens go in as ids: BOS first, then the text's bytes.
  const std::vector<int32_t> ids = plain.apply({{"user", "x"}})->ids;
  EXPECT_EQ(ids, bytes->encode("User: x\nAssistant:", /*add_bos=*/true));
}

JobSpec spec(OutputMode mode, bool chat = false) {
  JobSpec s;
  s.mode = mode;
  s.chat = chat;
  s.response_id = "cmpl-1";
  s.model = "m";
  s.prompts = {{1, 2, 3}};
  s.return_token_ids = true;
  return s;
}

StreamEvent event(std::string text, int32_t token, FinishReason finish = FinishReason::none) {
  StreamEvent e;
  e.text = std::move(text);
  e.token_ids = {token};
  e.finish = finish;
  e.prompt_tokens = 3;
  e.completion_tokens = finish == FinishReason::none ? 0 : 2;
  return e;
}

TEST(CompletionJob, BodyCollectsEverything) {
  CompletionJob job(spec(OutputMode::body, /*chat=*/true));
  std::vector<std::string> out;
  job.on_event(0, event("he", 7), out);
  EXPECT_FALSE(job.done());
  job.on_event(0, event("y", 8, FinishReason::stop), out);
  EXPECT_TRUE(out.empty());
  ASSERT_TRUE(job.done());
  json::object body = json::parse(job.body()).as_object();
  json::object choice = body["choices"].as_array()[0].as_object();
  EXPECT_EQ(choice["message"].as_object()["content"], "hey");
  EXPECT_EQ(choice["finish_reason"], "stop");
  EXPECT_EQ(choice["token_ids"], (json::array{7, 8}));
  EXPECT_EQ(body["usage"].as_object()["total_tokens"], 5);
}

TEST(CompletionJob, SseFailureBeforeOutputBecomesAStatus) {
  CompletionJob job(spec(OutputMode::sse));
  StreamEvent full;
  full.finish = FinishReason::error;
  full.error_code = Errc::resource_exhausted;
  full.message = "queue full";
  std::vector<std::string> out;
  job.on_event(0, full, out);
  EXPECT_TRUE(out.empty());
  ASSERT_TRUE(job.failure());
  EXPECT_EQ(job.failure()->status, 429);
}

TEST(CompletionJob, SseFailureAfterOutputIsAnErrorChunk) {
  CompletionJob job(spec(OutputMode::sse));
  std::vector<std::string> out;
  job.on_event(0, event("a", 97), out);
  job.abort(ApiError{503, "bye", "server_error", {}, "shutting_down"}, out);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_TRUE(json::parse(out[1]).as_object().contains("error"));
  EXPECT_EQ(out[2], "[DONE]");
  EXPECT_FALSE(job.failure());
}

TEST(CompletionJob, WebSocketFinalCarriesTheClientId) {
  JobSpec s = spec(OutputMode::websocket);
  s.client_id = "42";
  s.client_id_is_number = true;
  CompletionJob job(s);
  std::vector<std::string> out;
  job.on_event(0, event("a", 97, FinishReason::length), out);
  ASSERT_EQ(out.size(), 2u);
  json::object delta = json::parse(out[0]).as_object(), final_event = json::parse(out[1]).as_object();
  EXPECT_EQ(delta["type"], "delta");
  EXPECT_EQ(delta["id"], 42);
  EXPECT_EQ(delta["prompt_token_ids"], (json::array{1, 2, 3}));
  EXPECT_EQ(final_event["type"], "final");
  EXPECT_EQ(final_event["finish_reason"], "length");
}

// An error after some tokens (a router whose last node died): the final
// event's usage counts the tokens delivered (it said 0).
TEST(CompletionJob, WebSocketFinalAfterAnErrorCountsTheTokensSent) {
  CompletionJob job(spec(OutputMode::websocket));
  std::vector<std::string> out;
  job.on_event(0, event("a", 97), out);
  job.on_event(0, event("b", 98), out);
  StreamEvent failed;
  failed.finish = FinishReason::error;
  failed.error_code = Errc::io_error;
  failed.message = "no engine node is available to take the request";
  job.on_event(0, failed, out);
  ASSERT_FALSE(out.empty());
  json::object final_event = json::parse(out.back()).as_object();
  EXPECT_EQ(final_event["type"], "final") << out.back();
  EXPECT_EQ(final_event["usage"].as_object()["completion_tokens"], 2) << out.back();
}

// The drain's cancel: a choice that ends cancelled after set_cancel_reason
// says why, in OpenAI's chunk shape (SSE) and in the final event (WebSocket).
TEST(CompletionJob, CancelReasonRidesOnTheLastChunk) {
  CompletionJob job(spec(OutputMode::sse));
  std::vector<std::string> out;
  job.on_event(0, event("a", 97), out);
  job.set_cancel_reason("the server is shutting down");
  StreamEvent last;
  last.finish = FinishReason::cancelled;
  last.completion_tokens = 1;
  job.on_event(0, last, out);
  ASSERT_EQ(out.size(), 3u);
  json::object chunk = json::parse(out[1]).as_object();
  json::object choice = chunk["choices"].as_array()[0].as_object();
  EXPECT_EQ(choice["finish_reason"], "cancelled");
  EXPECT_EQ(choice["cancel_reason"], "the server is shutting down");
  EXPECT_EQ(out[2], "[DONE]");
  const JobSummary summary = job.summary();
  EXPECT_EQ(summary.finish, FinishReason::cancelled);
  EXPECT_TRUE(summary.cancelled);
  EXPECT_EQ(summary.prompt_tokens, 3);
  EXPECT_EQ(summary.completion_tokens, 1);
}

TEST(CompletionJob, CancelReasonInTheWebSocketFinalEvent) {
  CompletionJob job(spec(OutputMode::websocket));
  job.set_cancel_reason("shutdown");
  StreamEvent last;
  last.finish = FinishReason::cancelled;
  std::vector<std::string> out;
  job.on_event(0, last, out);
  ASSERT_EQ(out.size(), 1u);
  json::object final_event = json::parse(out[0]).as_object();
  EXPECT_EQ(final_event["finish_reason"], "cancelled");
  EXPECT_EQ(final_event["cancel_reason"], "shutdown");
}

TEST(CompletionJob, NoCancelReasonWithoutTheDrainOrForOtherEnds) {
  CompletionJob job(spec(OutputMode::body));
  job.set_cancel_reason("shutdown");
  std::vector<std::string> out;
  job.on_event(0, event("a", 97, FinishReason::length), out);
  ASSERT_TRUE(job.done());
  json::object choice = json::parse(job.body()).as_object()["choices"].as_array()[0].as_object();
  EXPECT_FALSE(choice.contains("cancel_reason"));
  const JobSummary summary = job.summary();
  EXPECT_EQ(summary.finish, FinishReason::length);
  EXPECT_FALSE(summary.cancelled);
  EXPECT_EQ(summary.completion_tokens, 2);
}

TEST(CompletionJob, SummaryOfAFailedJobSaysError) {
  CompletionJob job(spec(OutputMode::sse));
  std::vector<std::string> out;
  job.abort(ApiError{503, "bye", "server_error", {}, "shutting_down"}, out);
  const JobSummary summary = job.summary();
  EXPECT_EQ(summary.finish, FinishReason::error);
  ASSERT_TRUE(summary.error);
  EXPECT_EQ(summary.error->message, "bye");
  EXPECT_TRUE(summary.cancelled);  // its choice never ended
}

TEST(MetricsText, HistogramsAreCumulativeWithInf) {
  EngineMetrics metrics;
  metrics.iteration_tokens.observe(3);
  metrics.iteration_tokens.observe(5000);
  EngineStats stats;
  stats.num_running = 2;
  RefusalCounters refusals;
  refusals.add(Refusal::ws_rate);
  const std::string text = render_metrics(stats, metrics, refusals);
  EXPECT_NE(text.find("conveyor:num_requests_running 2\n"), std::string::npos);
  EXPECT_NE(text.find("# TYPE conveyor:http_refused_total counter\n"), std::string::npos);
  EXPECT_NE(text.find("conveyor:http_refused_total{reason=\"ws_rate\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("conveyor:http_refused_total{reason=\"header_timeout\"} 0\n"), std::string::npos);
  EXPECT_NE(text.find("conveyor:iteration_tokens_bucket{le=\"8\"} 1\n"), std::string::npos);
  EXPECT_NE(text.find("conveyor:iteration_tokens_bucket{le=\"+Inf\"} 2\n"), std::string::npos);
  EXPECT_NE(text.find("conveyor:iteration_tokens_count 2\n"), std::string::npos);
  EXPECT_NE(text.find("# TYPE conveyor:time_to_first_token_seconds histogram\n"), std::string::npos);
}

TEST(MetricsText, HistogramQuantileInterpolatesInItsBucket) {
  Histogram h({1.0, 2.0, 4.0});
  EXPECT_EQ(h.quantile(0.5), 0.0);  // empty
  for (double v : {0.5, 1.5, 1.5, 3.0}) h.observe(v);
  EXPECT_DOUBLE_EQ(h.quantile(0.25), 1.0);   // the first observation fills bucket (0, 1]
  EXPECT_DOUBLE_EQ(h.quantile(0.5), 1.5);    // halfway through the two in (1, 2]
  EXPECT_DOUBLE_EQ(h.quantile(1.0), 4.0);
  h.observe(100.0);                          // +Inf: the last finite bound
  EXPECT_DOUBLE_EQ(h.quantile(1.0), 4.0);
  EngineMetrics metrics;
  metrics.executor_idle.observe(2e-5);
  EXPECT_NE(render_metrics(EngineStats{}, metrics, RefusalCounters{}).find("conveyor:executor_idle_seconds_count 1\n"),
            std::string::npos);
}

TEST(Routes, MatchesPathsMethodsAndKeys) {
  EXPECT_EQ(match_route("POST", "/v1/completions").route, Route::completions);
  EXPECT_EQ(match_route("POST", "/v1/chat/completions?x=1").route, Route::chat);
  EXPECT_EQ(match_route("GET", "/v1/completions").route, Route::wrong_method);
  EXPECT_EQ(match_route("HEAD", "/health").route, Route::health);
  EXPECT_EQ(match_route("HEAD", "/v1/ws").route, Route::wrong_method);
  EXPECT_EQ(match_route("HEAD", "/v1/completions").route, Route::wrong_method);
  EXPECT_EQ(match_route("GET", "/v2").route, Route::not_found);
  EXPECT_EQ(origin_form("http://host:8000/v1/models?x=1"), "/v1/models?x=1");
  EXPECT_EQ(origin_form("HTTPS://host"), "/");
  EXPECT_EQ(origin_form("http://host?next=/admin"), "/");  // a query is no path
  EXPECT_EQ(origin_form("/health"), "/health");
  EXPECT_EQ(origin_form("*"), "*");
  EXPECT_EQ(origin_form("http:/x"), "http:/x");
  EXPECT_FALSE(match_route("GET", "/health").needs_key);
  EXPECT_TRUE(authorized("", ""));
  EXPECT_TRUE(authorized("Bearer k1", "k1"));
  EXPECT_TRUE(authorized("bearer k1", "k1"));  // the scheme is case-insensitive
  EXPECT_TRUE(authorized("BEARER k1", "k1"));
  EXPECT_FALSE(authorized("Bearer K1", "k1"));  // the key is not
  EXPECT_FALSE(authorized("Bearer k", "k1"));
  EXPECT_FALSE(authorized("k1", "k1"));
  EXPECT_EQ(sse_chunk({"x"}), "9\r\ndata: x\n\n\r\n");
}

TEST(ServeSettings, TomlOverridesAndRejectsUnknownKeys) {
  ServeSettings s;
  ASSERT_TRUE(parse_serve_config("model = \"dummy:tiny\"\n[server]\nport = 9001\napi_key = \"k\"\n"
                                 "[engine]\nblock_size = 32\npreemption = \"swap\"\nprefix_caching = false\n",
                                 "t.toml", s)
                  .is_ok());
  EXPECT_EQ(s.model, "dummy:tiny");
  EXPECT_EQ(s.server.port, 9001);
  EXPECT_EQ(s.engine.block_size, 32);
  EXPECT_EQ(s.engine.preemption, PreemptionMode::swap);
  EXPECT_FALSE(s.engine.prefix_caching);
  EXPECT_FALSE(parse_serve_config("[server]\nprot = 1\n", "t.toml", s).is_ok());
  EXPECT_FALSE(parse_serve_config("[server]\nport = \"x\"\n", "t.toml", s).is_ok());
  EXPECT_FALSE(parse_serve_config("[server]\nport = 70000\n", "t.toml", s).is_ok());
  EXPECT_FALSE(parse_serve_config("[engine\n", "t.toml", s).is_ok());
}

TEST(ServeSettings, KvCacheMemoryTakesASizeOrBytes) {
  ServeSettings s;
  ASSERT_TRUE(parse_serve_config("[engine]\nkv_cache_memory = \"4GiB\"\nkv_cache_dtype = \"f16\"\n"
                                 "kv_cache_memory_fraction = 0.25\n",
                                 "t.toml", s)
                  .is_ok());
  EXPECT_EQ(s.engine.kv_cache_memory, int64_t(4) << 30);
  EXPECT_EQ(s.engine.kv_cache_dtype, KvDtype::f16);
  EXPECT_EQ(s.engine.kv_cache_memory_fraction, 0.25);
  ASSERT_TRUE(parse_serve_config("[engine]\nkv_cache_memory = 1048576\n", "t.toml", s).is_ok());
  EXPECT_EQ(s.engine.kv_cache_memory, 1048576);
  const Status bad = parse_serve_config("[engine]\nkv_cache_memory = \"4 gigs\"\n", "t.toml", s);
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.error().message.find("engine.kv_cache_memory"), std::string::npos) << bad.error().message;
  EXPECT_FALSE(parse_serve_config("[engine]\nkv_cache_memory = true\n", "t.toml", s).is_ok());
}

TEST(ServeSettings, ShutdownAndLogKeys) {
  ServeSettings s;
  ASSERT_TRUE(parse_serve_config("[server]\nshutdown_timeout = 5\nlog_level = \"warn\"\nlog_format = \"json\"\n"
                                 "log_stats_interval = 0\n",
                                 "t.toml", s)
                  .is_ok());
  EXPECT_EQ(s.server.shutdown_timeout_seconds, 5.0);
  EXPECT_EQ(s.server.log_level, LogLevel::warn);
  EXPECT_EQ(s.server.log_format, LogFormat::json);
  EXPECT_EQ(s.server.log_stats_interval_seconds, 0.0);
  const Status old_key = parse_serve_config("[server]\nshutdown_grace_seconds = 3.0\n", "t.toml", s);
  ASSERT_FALSE(old_key.is_ok());
  EXPECT_NE(old_key.error().message.find("replaced by server.shutdown_timeout"), std::string::npos)
      << old_key.error().message;
  const Status level = parse_serve_config("[server]\nlog_level = \"loud\"\n", "t.toml", s);
  ASSERT_FALSE(level.is_ok());
  EXPECT_NE(level.error().message.find("server.log_level"), std::string::npos) << level.error().message;
  EXPECT_FALSE(parse_serve_config("[server]\nlog_format = \"xml\"\n", "t.toml", s).is_ok());
  EXPECT_FALSE(parse_serve_config("[server]\nshutdown_timeout = -1\n", "t.toml", s).is_ok());
  EXPECT_FALSE(parse_serve_config("[server]\nlog_stats_interval = \"10s\"\n", "t.toml", s).is_ok());
}

TEST(ServeSettings, ExampleConfigsLoad) {
  for (const char* name : {"serve.toml", "serve-llama-110m.toml"}) {
    ServeSettings s;
    const Status st = load_serve_config(std::string(CONVEYOR_SOURCE_DIR) + "/configs/" + name, s);
    EXPECT_TRUE(st.is_ok()) << name << ": " << (st.is_ok() ? "" : st.error().message);
  }
}

}  // namespace
}  // namespace conveyor::http
