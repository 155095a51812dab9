#include "actors/request_actor.hpp"

#include <algorithm>
#include <chrono>
#include <optional>

#include "model/tokenizer/detokenizer.hpp"

namespace conveyor {

StopMatcher::StopMatcher(std::vector<std::string> stops) : stops_(std::move(stops)) {
  std::erase_if(stops_, [](const std::string& s) { return s.empty(); });
}

std::string StopMatcher::push(const std::string& text) {
  if (stopped_) return {};
  held_ += text;
  if (stops_.empty()) return std::exchange(held_, {});
  size_t first = std::string::npos;
  for (const std::string& stop : stops_) first = std::min(first, held_.find(stop));
  if (first != std::string::npos) {
    stopped_ = true;
    std::string out = held_.substr(0, first);
    held_.clear();
    return out;
  }
  // Hold back the longest tail that is a prefix of some stop string.
  size_t keep = 0;
  for (const std::string& stop : stops_) {
    for (size_t k = std::min(stop.size() - 1, held_.size()); k > keep; --k) {
      if (held_.compare(held_.size() - k, k, stop, 0, k) == 0) {
        keep = k;
        break;
      }
    }
  }
  std::string out = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return out;
}

std::string StopMatcher::flush() { return std::exchange(held_, {}); }

namespace {

struct request_state {
  request_state() = default;  // not an aggregate: CAF would build it from the actor pointer
  scheduler_actor scheduler;
  EventCallback on_event;
  std::shared_ptr<const Tokenizer> tokenizer;
  std::optional<IncrementalDetokenizer> detok;
  std::optional<StopMatcher> stops;
  std::shared_ptr<EngineMetrics> metrics;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  std::chrono::steady_clock::time_point last_token{};
  request_id id = 0;
  bool done = false;
  int32_t completion_tokens = 0;
  static inline const char* name = "request";
};

using self_ptr = request_actor::stateful_pointer<request_state>;

double seconds_between(std::chrono::steady_clock::time_point a,
                       std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

void emit_final(self_ptr self, StreamEvent e) {
  auto& st = self->state;
  if (st.done) return;
  st.done = true;
  if (st.metrics) {
    st.metrics->e2e_request_latency.observe(seconds_between(st.start, std::chrono::steady_clock::now()));
    st.metrics->count_finished(e.finish);
  }
  st.on_event(e);
  self->quit();
}

void on_token(self_ptr self, TokenEvent& t) {
  auto& st = self->state;
  if (st.done) return;
  StreamEvent e;
  e.id = st.id;
  if (t.token >= 0) {
    if (st.metrics) {
      const auto now = std::chrono::steady_clock::now();
      if (st.completion_tokens == 0)
        st.metrics->time_to_first_token.observe(seconds_between(st.start, now));
      else
        st.metrics->inter_token_latency.observe(seconds_between(st.last_token, now));
      st.last_token = now;
    }
    ++st.completion_tokens;
    e.token_ids.push_back(t.token);
    if (!t.top.empty() || t.logprob != 0.0f)
      e.logprobs.push_back(SampleResult{t.token, t.logprob, std::move(t.top)});
    if (st.detok) e.text = st.detok->push(t.token);
    if (st.stops) {
      e.text = st.stops->push(e.text);
      if (st.stops->stopped()) {
        // Our own stop: the scheduler's later events for this id are ignored.
        self->send(st.scheduler, cancel_atom_v, st.id);
        e.finish = FinishReason::stop;
        e.prompt_tokens = t.prompt_tokens;
        e.completion_tokens = st.completion_tokens;
        emit_final(self, std::move(e));
        return;
      }
    }
  }
  if (t.finish != FinishReason::none) {
    if (st.detok) {
      std::string rest = st.detok->flush();
      e.text += st.stops ? st.stops->push(rest) : rest;
    }
    if (st.stops && !st.stops->stopped()) e.text += st.stops->flush();
    e.finish = t.finish;
    e.prompt_tokens = t.prompt_tokens;
    e.cached_prompt_tokens = t.cached_prompt_tokens;
    e.completion_tokens = t.completion_tokens;
    e.message = std::move(t.message);
    if (e.finish == FinishReason::error) e.error_code = Errc::invalid_argument;
    emit_final(self, std::move(e));
    return;
  }
  if (!e.text.empty() || !e.token_ids.empty()) st.on_event(e);
}

request_actor::behavior_type request(self_ptr self, scheduler_actor scheduler, RequestSpec spec,
                                     EventCallback on_event) {
  auto& st = self->state;
  st.scheduler = std::move(scheduler);
  st.on_event = std::move(on_event);
  st.tokenizer = std::move(spec.tokenizer);
  st.metrics = std::move(spec.metrics);
  st.id = spec.request.id;
  if (st.tokenizer) st.detok.emplace(*st.tokenizer);
  if (!spec.stop.empty()) st.stops.emplace(std::move(spec.stop));
  self->monitor(st.scheduler);
  self->set_down_handler([self](const caf::down_msg&) {
    StreamEvent e;
    e.id = self->state.id;
    e.finish = FinishReason::error;
    e.error_code = Errc::io_error;
    e.message = "the engine stopped";
    emit_final(self, std::move(e));
  });
  self->request(st.scheduler, caf::infinite, submit_atom_v, std::move(spec.request),
                caf::actor_cast<token_sink_actor>(self))
      .then(
          [self](request_id id) { self->state.id = id; },
          [self](caf::error& err) {
            const Error error = from_caf_error(err);
            StreamEvent e;
            e.id = self->state.id;
            e.finish = FinishReason::error;
            e.error_code = error.code;
            e.message = error.message;
            emit_final(self, std::move(e));
          });
  return {
      [self](TokenEvent& t) { on_token(self, t); },
      [self](cancel_atom) {
        auto& st = self->state;
        if (st.done) return;
        // Sent after our submit (same sender), so the scheduler sees it second.
        self->send(st.scheduler, cancel_atom_v, st.id);
      },
  };
}

}  // namespace

request_actor spawn_request(caf::actor_system& sys, scheduler_actor scheduler, RequestSpec spec,
                            EventCallback on_event) {
  return sys.spawn(request, std::move(scheduler), std::move(spec), std::move(on_event));
}

}  // namespace conveyor
