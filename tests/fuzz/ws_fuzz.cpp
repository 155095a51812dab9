// libFuzzer target: one /v1/ws connection's messages, as the WebSocket
// session handles them, without the socket.
//
// The input is lines. A line that starts with '{' is a client message:
// decide_ws_message (http/ws_message.hpp) parses it and decides, against the
// ids this connection runs, whether to refuse it (its error event is checked),
// cancel a running request, or start one (planned with the byte tokenizer of
// the embedded default model; its CompletionJob is created as the session
// creates it). Any other line is engine events: each three bytes pick a
// running request, one of its unfinished choices, and a token or a finish
// reason, delivered as the engine delivers them (whole UTF-8 text, logprobs
// when asked for). At the end the rest are aborted as a shutdown does.
//
// Checked: every event sent is a JSON object of type "error", "delta" or
// "final" carrying the request's id; a request ends with exactly one final
// event, sent last; the decision agrees with the ids running.
#include <boost/json/parse.hpp>
#include <boost/json/value.hpp>

#include <cstddef>
#include <cstdint>
#include <iterator>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "http/api_json.hpp"
#include "http/completion_job.hpp"
#include "http/ws_message.hpp"

namespace {

using namespace conveyor;
using namespace conveyor::http;
namespace json = boost::json;

const ModelContext& model() {
  static const ModelContext m = [] {
    ModelConfig c;
    c.name = "fuzz";
    c.vocab_size = 258;
    c.context_length = 256;
    auto context = make_model_context(c, make_byte_tokenizer(), "fuzz", "auto", "");
    if (!context) __builtin_trap();
    return std::move(context).value();
  }();
  return m;
}

void check(bool ok) {
  if (!ok) __builtin_trap();
}

// The event's "id" is the client's id: the integer, the string, or null for
// a message without one (an empty string id is sent back as null too).
void check_id(const json::object& event, const std::string& id, bool is_number) {
  const json::value* v = event.if_contains("id");
  check(v != nullptr);
  if (is_number) {
    check(v->is_int64() && std::to_string(v->as_int64()) == id);
  } else if (id.empty()) {
    check(v->is_null());
  } else {
    check(v->is_string() && v->as_string() == id);
  }
}

json::object parse_event(const std::string& text, std::string_view type) {
  json::error_code ec;
  json::value v = json::parse(text, ec);
  check(!ec && v.is_object());
  const json::value* t = v.as_object().if_contains("type");
  check(t != nullptr && t->is_string() && t->as_string() == type);
  return std::move(v.as_object());
}

struct Running {
  std::unique_ptr<CompletionJob> job;
  std::vector<bool> finished;  // per choice: its last event was delivered
};

class Connection {
 public:
  void message(std::string_view text, bool draining) {
    const WsAction action =
        decide_ws_message(text, model(), draining, [&](const std::string& key) { return running_.count(key) > 0; });
    if (const auto* refuse = std::get_if<WsRefuse>(&action)) {
      check(refuse->error.status >= 400 && !refuse->error.message.empty());
      const json::object e = parse_event(
          ws_error_json(refuse->error, refuse->request.client_id, refuse->request.client_id_is_number), "error");
      check_id(e, refuse->request.client_id, refuse->request.client_id_is_number);
      check(e.contains("error") && e.at("error").is_object());
    } else if (const auto* cancel = std::get_if<WsCancel>(&action)) {
      auto it = running_.find(cancel->key);
      if (it == running_.end()) return;  // already finished: ignored
      // The engine ends each unfinished choice with a cancelled last event.
      for (int32_t c = 0; c < int32_t(it->second.finished.size()); ++c) {
        if (it->second.finished[size_t(c)]) continue;
        StreamEvent e;
        e.index = c % it->second.job->spec().n;
        e.finish = FinishReason::cancelled;
        deliver(it, c, e);
        if (running_.find(cancel->key) == running_.end()) return;
      }
      check(false);  // every choice ended, so the job must be done and gone
    } else {
      const WsStart& start = std::get<WsStart>(action);
      check(running_.count(start.key) == 0 && !draining);
      check(start.plan.num_choices() >= 1 && !start.plan.prompts.empty());
      for (const auto& prompt : start.plan.prompts)
        for (int32_t id : prompt) check(id >= 0 && id < model().config.vocab_size);
      Running r;
      r.job = std::make_unique<CompletionJob>(ws_job_spec(start.request, start.plan, model()));
      check(r.job->num_choices() == start.plan.num_choices());
      r.finished.assign(size_t(r.job->num_choices()), false);
      running_.emplace(start.key, std::move(r));
    }
  }

  // Three bytes per event: which request, which choice, what happens.
  void events(std::string_view bytes) {
    for (size_t i = 0; i + 3 <= bytes.size() && !running_.empty(); i += 3) {
      auto it = running_.begin();
      std::advance(it, uint8_t(bytes[i]) % running_.size());
      Running& r = it->second;
      int32_t choice = uint8_t(bytes[i + 1]) % r.job->num_choices();
      while (r.finished[size_t(choice)]) choice = (choice + 1) % r.job->num_choices();
      deliver(it, choice, event_for(r.job->spec(), choice, uint8_t(bytes[i + 2])));
    }
  }

  // The server stops: the rest end with a final event each.
  void shutdown() {
    for (auto& [key, r] : running_) {
      std::vector<std::string> out;
      r.job->abort(ApiError{503, "the server is shutting down", "server_error", {}, "shutting_down"}, out);
      check(r.job->done() && !out.empty());
      for (size_t i = 0; i < out.size(); ++i)
        check_output(r, out[i], /*final=*/i + 1 == out.size());
    }
    running_.clear();
  }

 private:
  static StreamEvent event_for(const JobSpec& spec, int32_t choice, uint8_t what) {
    StreamEvent e;
    e.index = choice % spec.n;
    const int32_t token = int32_t(what % 256) + 2;  // byte tokens: ids 2..257 hold the bytes
    switch (what % 16) {
      case 12: e.finish = FinishReason::stop; break;
      case 13: e.finish = FinishReason::length; break;
      case 14: e.finish = FinishReason::cancelled; break;
      case 15:
        e.finish = FinishReason::error;
        e.error_code = Errc(what % 4);
        e.message = "engine error";
        return e;
      default: break;
    }
    // The engine sends whole UTF-8 characters: an ASCII byte, or nothing yet.
    if (what < 128) e.text = std::string(1, char(what));
    e.token_ids = {token};
    if (spec.logprobs >= 0 && what % 3 != 0) {  // an entry may be left out (certain tokens)
      SampleResult s{token, -0.5f, {}};
      for (int32_t k = 0; k < spec.logprobs; ++k) s.top.push_back({(token + k) % 258, -1.0f - float(k)});
      e.logprobs.push_back(std::move(s));
    }
    if (e.last()) {
      e.prompt_tokens = int32_t(spec.prompts[size_t(choice / spec.n)].size());
      e.completion_tokens = what % 7;
    }
    return e;
  }

  void deliver(std::map<std::string, Running>::iterator it, int32_t choice, const StreamEvent& e) {
    Running& r = it->second;
    check(!r.finished[size_t(choice)] && !r.job->done());
    if (e.last()) r.finished[size_t(choice)] = true;
    std::vector<std::string> out;
    r.job->on_event(choice, e, out);
    for (size_t i = 0; i < out.size(); ++i) check_output(r, out[i], r.job->done() && i + 1 == out.size());
    bool all = true;
    for (bool f : r.finished) all = all && f;
    if (all || e.finish == FinishReason::error) check(r.job->done());
    if (r.job->done()) {
      check(!out.empty());  // the final event
      running_.erase(it);
    }
  }

  static void check_output(const Running& r, const std::string& text, bool final) {
    const JobSpec& spec = r.job->spec();
    const json::object e = parse_event(text, final ? "final" : "delta");
    check_id(e, spec.client_id, spec.client_id_is_number);
    if (final) {
      check(e.contains("finish_reason") && e.contains("usage"));
    } else {
      const json::value* index = e.if_contains("index");
      check(index != nullptr && index->is_int64() && index->as_int64() >= 0 &&
            index->as_int64() < r.job->num_choices());
    }
  }

  std::map<std::string, Running> running_;  // by ws_id_key
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  Connection connection;
  bool draining = false;
  for (size_t pos = 0; pos <= input.size();) {
    size_t end = input.find('\n', pos);
    if (end == std::string_view::npos) end = input.size();
    const std::string_view line = input.substr(pos, end - pos);
    if (!line.empty() && line[0] == '{') {
      connection.message(line, draining);
    } else if (line == "drain") {
      draining = true;
    } else {
      connection.events(line);
    }
    pos = end + 1;
  }
  connection.shutdown();
  return 0;
}
