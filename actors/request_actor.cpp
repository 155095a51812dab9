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

// One sample's text: its detokenizer, stop strings and count.
struct sample_state {
  std::optional<IncrementalDetokenizer> detok;
  std::optional<StopMatcher> stops;
  std::chrono::steady_clock::time_point last_token{};
  int32_t completion_tokens = 0;
  bool done = false;
};

struct request_state {
  request_state() = default;  // not an aggregate: CAF would build it from the actor pointer
  scheduler_actor scheduler;
  EventCallback on_event;
  std::vector<sample_state> samples;  // n of them
  std::shared_ptr<EngineMetrics> metrics;
  std::chrono::steady_clock::time_point start = std::chrono::steady_clock::now();
  request_id id = 0;
  int32_t open = 0;                   // samples that have not ended
  bool first_token_seen = false;
  static inline const char* name = "request";
};

using self_ptr = request_actor::stateful_pointer<request_state>;

double seconds_between(std::chrono::steady_clock::time_point a,
                       std::chrono::steady_clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// The last event of one sample; after the last sample's, the actor ends.
void emit_final(self_ptr self, StreamEvent e) {
  auto& st = self->state;
  if (e.index < 0 || size_t(e.index) >= st.samples.size() || st.samples[size_t(e.index)].done) return;
  st.samples[size_t(e.index)].done = true;
  --st.open;
  if (st.metrics) st.metrics->count_finished(e.finish);
  if (st.open == 0 && st.metrics)
    st.metrics->e2e_request_latency.observe(seconds_between(st.start, std::chrono::steady_clock::now()));
  st.on_event(e);
  if (st.open == 0) {
    // The monitor is an entry in the scheduler's list that holds on to this
    // actor's memory (about 1.3 KiB) until the scheduler ends: take it back.
    self->demonitor(st.scheduler.address());
    self->quit();
  }
}

// Ends every sample still open with `e` (the engine failed or stopped).
void fail_open_samples(self_ptr self, const StreamEvent& e) {
  auto& st = self->state;
  for (size_t i = 0; i < st.samples.size() && st.open > 0; ++i) {
    if (st.samples[i].done) continue;
    StreamEvent copy = e;
    copy.index = int32_t(i);
    emit_final(self, std::move(copy));
  }
}

void on_token(self_ptr self, TokenEvent& t) {
  auto& st = self->state;
  if (t.index < 0 || size_t(t.index) >= st.samples.size()) return;
  sample_state& sample = st.samples[size_t(t.index)];
  if (!sample.done) {
    StreamEvent e;
    e.id = st.id;
    e.index = t.index;
    e.prompt_logprobs = std::move(t.prompt_logprobs);
    if (t.token >= 0) {
      const auto now = std::chrono::steady_clock::now();
      if (st.metrics) {
        if (!st.first_token_seen) st.metrics->time_to_first_token.observe(seconds_between(st.start, now));
        else if (sample.completion_tokens > 0)
          st.metrics->inter_token_latency.observe(seconds_between(sample.last_token, now));
      }
      st.first_token_seen = true;
      sample.last_token = now;
      ++sample.completion_tokens;
      e.token_ids.push_back(t.token);
      if (!t.top.empty() || t.logprob != 0.0f)
        e.logprobs.push_back(SampleResult{t.token, t.logprob, std::move(t.top)});
      if (sample.detok) e.text = sample.detok->push(t.token);
      if (sample.stops) {
        e.text = sample.stops->push(e.text);
        if (sample.stops->stopped()) {
          // Our own stop: the scheduler's later events for this sample are ignored.
          if (st.samples.size() == 1) self->send(st.scheduler, cancel_atom_v, st.id);
          else self->send(st.scheduler, cancel_atom_v, st.id, t.index);
          e.finish = FinishReason::stop;
          e.prompt_tokens = t.prompt_tokens;
          e.completion_tokens = sample.completion_tokens;
          emit_final(self, std::move(e));
          return;
        }
      }
    }
    if (t.finish != FinishReason::none) {
      if (sample.detok) {
        std::string rest = sample.detok->flush();
        e.text += sample.stops ? sample.stops->push(rest) : rest;
      }
      if (sample.stops && !sample.stops->stopped()) e.text += sample.stops->flush();
      e.finish = t.finish;
      e.prompt_tokens = t.prompt_tokens;
      e.cached_prompt_tokens = t.cached_prompt_tokens;
      e.completion_tokens = t.completion_tokens;
      e.message = t.message;
      if (e.finish == FinishReason::error) e.error_code = t.error_code;
      emit_final(self, std::move(e));
    } else if (!e.text.empty() || !e.token_ids.empty()) {
      st.on_event(e);
    }
  }
  if (t.request_done && st.open > 0) {  // samples the scheduler ended together (an engine failure)
    StreamEvent e;
    e.id = st.id;
    e.finish = t.finish == FinishReason::none ? FinishReason::error : t.finish;
    e.message = t.message;
    e.error_code = t.error_code;
    fail_open_samples(self, e);
  }
}

request_actor::behavior_type request(self_ptr self, scheduler_actor scheduler, RequestSpec spec,
                                     EventCallback on_event) {
  auto& st = self->state;
  st.scheduler = std::move(scheduler);
  st.on_event = std::move(on_event);
  st.metrics = std::move(spec.metrics);
  st.id = spec.request.id;
  st.samples.resize(size_t(std::clamp(spec.request.n, 1, kMaxSamples)));
  st.open = int32_t(st.samples.size());
  for (sample_state& sample : st.samples) {
    if (spec.tokenizer) sample.detok.emplace(*spec.tokenizer);
    if (!spec.stop.empty()) sample.stops.emplace(spec.stop);
  }
  self->monitor(st.scheduler);
  self->set_down_handler([self](const caf::down_msg& down) {
    // A scheduler that stopped on purpose (a lost device) names why in its
    // exit reason; a request still in its mailbox then learns the same reason
    // as those it ended itself.
    StreamEvent e;
    e.id = self->state.id;
    e.finish = FinishReason::error;
    e.error_code = Errc::io_error;
    e.message = "the engine stopped";
    if (is_engine_error(down.reason)) e.message = "the engine failed: " + from_caf_error(down.reason).message;
    fail_open_samples(self, e);
  });
  self->request(st.scheduler, caf::infinite, submit_atom_v, std::move(spec.request),
                caf::actor_cast<token_sink_actor>(self))
      .then(
          [self](request_id id) { self->state.id = id; },
          [self](caf::error& err) {
            // The scheduler stopped with our submit in its mailbox: its
            // down message, which names why, ends the samples.
            if (err == caf::sec::request_receiver_down) return;
            const Error error = from_caf_error(err);
            StreamEvent e;
            e.id = self->state.id;
            e.finish = FinishReason::error;
            e.error_code = error.code;
            e.message = error.message;
            e.refused = true;
            fail_open_samples(self, e);
          });
  return {
      [self](TokenEvent& t) { on_token(self, t); },
      [self](cancel_atom) {
        auto& st = self->state;
        if (st.open == 0) return;
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
