#include "actors/stream_actor.hpp"

#include <algorithm>
#include <chrono>
#include <optional>
#include <unordered_map>
#include <unordered_set>

#include <spdlog/spdlog.h>

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

using clock_type = std::chrono::steady_clock;

// One sample's text: its detokenizer, stop strings and count.
struct sample_state {
  std::optional<IncrementalDetokenizer> detok;
  std::optional<StopMatcher> stops;
  clock_type::time_point last_token{};  // measured only with metrics
  int32_t completion_tokens = 0;
  bool done = false;
};

// One request's client side.
struct RequestStream {
  EventCallback on_event;
  std::shared_ptr<const Tokenizer> tokenizer;
  std::vector<int32_t> shown_tokens;  // RequestSpec's
  std::vector<sample_state> samples;  // n of them
  std::shared_ptr<EngineMetrics> metrics;
  clock_type::time_point start = clock_type::now();
  int32_t open = 0;                   // samples that have not ended
  bool first_token_seen = false;
  bool failed = false;                // its callback threw, or its actor sink stopped: no more calls
  bool submitted = false;             // the scheduler has (or had) it: a cancel reaches it
  caf::actor_addr sink;               // Engine::submit(spec, actor)'s actor, watched
};

// A request's client side, before it is submitted.
RequestStream open_stream(StreamOpen& open) {
  RequestStream r;
  r.on_event = std::move(open.on_event);
  r.metrics = std::move(open.spec.metrics);
  r.tokenizer = std::move(open.spec.tokenizer);
  if (r.tokenizer) r.shown_tokens = std::move(open.spec.shown_tokens);
  // An n out of range is refused: one sample, one error event.
  const int32_t n = open.spec.request.n;
  r.samples.resize(n >= 1 && n <= kMaxSamples ? size_t(n) : 1);
  r.open = int32_t(r.samples.size());
  for (sample_state& sample : r.samples) {
    if (r.tokenizer) sample.detok.emplace(*r.tokenizer);
    if (!open.spec.stop.empty()) sample.stops.emplace(open.spec.stop);
  }
  return r;
}

// The last event of samples that end with an error.
StreamEvent error_event(Errc code, std::string message, bool refused) {
  StreamEvent e;
  e.finish = FinishReason::error;
  e.error_code = code;
  e.message = std::move(message);
  e.refused = refused;
  return e;
}

struct stream_state {
  stream_state() = default;  // not an aggregate: CAF would build it from the actor pointer
  scheduler_actor scheduler;
  std::unordered_map<request_id, RequestStream> requests;
  stream_actor itself;                 // released by quitting (the header says why)
  std::unordered_set<caf::actor_addr> sinks;  // the actor sinks watched
  std::optional<StreamEvent> stopped;  // the scheduler stopped: what every request gets
  bool engine_gone = false;            // ~Engine's drain came
  static inline const char* name = "stream";
};

using self_ptr = stream_actor::stateful_pointer<stream_state>;

double seconds_between(clock_type::time_point a, clock_type::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// Calls the request's callback. One that throws fails its request: it hears
// nothing more and, if the scheduler has it, is cancelled there.
void call(self_ptr self, request_id id, RequestStream& r, const StreamEvent& e) {
  if (r.failed) return;
  try {
    r.on_event(e);
    return;
  } catch (const std::exception& ex) {
    spdlog::warn("request {}: its event callback threw ({}); the request is cancelled", id, ex.what());
  } catch (...) {
    spdlog::warn("request {}: its event callback threw; the request is cancelled", id);
  }
  r.failed = true;
  if (r.submitted) self->send(self->state.scheduler, cancel_atom_v, id);
}

// The last event of one sample. True when it was the request's last.
bool emit_final(self_ptr self, request_id id, RequestStream& r, StreamEvent e) {
  if (e.index < 0 || size_t(e.index) >= r.samples.size() || r.samples[size_t(e.index)].done) return r.open == 0;
  r.samples[size_t(e.index)].done = true;
  --r.open;
  if (r.metrics) r.metrics->count_finished(e.finish);
  if (r.open == 0 && r.metrics) r.metrics->e2e_request_latency.observe(seconds_between(r.start, clock_type::now()));
  call(self, id, r, e);
  return r.open == 0;
}

// Ends every sample still open with `e` (the engine failed or stopped, or
// refused the request).
void fail_open_samples(self_ptr self, request_id id, RequestStream& r, const StreamEvent& e) {
  for (size_t i = 0; i < r.samples.size() && r.open > 0; ++i) {
    if (r.samples[i].done) continue;
    StreamEvent copy = e;
    copy.id = id;
    copy.index = int32_t(i);
    emit_final(self, id, r, std::move(copy));
  }
}

// One token event of request `id`, which arrived at `now` (its batch's
// time). True when the request has ended.
bool on_token(self_ptr self, request_id id, RequestStream& r, TokenEvent& t, clock_type::time_point now) {
  if (t.index < 0 || size_t(t.index) >= r.samples.size()) return false;
  sample_state& sample = r.samples[size_t(t.index)];
  TokenEventDetail* detail = t.detail.get();  // null on most events
  const TokenEventDetail& d = t.details();
  if (!sample.done) {
    StreamEvent e;
    e.id = id;
    e.index = t.index;
    if (detail) e.prompt_logprobs = std::move(detail->prompt_logprobs);
    if (t.token >= 0) {
      if (r.metrics) {
        if (!r.first_token_seen) r.metrics->time_to_first_token.observe(seconds_between(r.start, now));
        else if (sample.completion_tokens > 0)
          r.metrics->inter_token_latency.observe(seconds_between(sample.last_token, now));
        sample.last_token = now;
      }
      r.first_token_seen = true;
      ++sample.completion_tokens;
      e.token_ids.push_back(t.token);
      if (!d.top.empty() || t.logprob != 0.0f)
        e.logprobs.push_back(SampleResult{t.token, t.logprob, detail ? std::move(detail->top) : std::vector<TokenLogprob>{}});
      if (sample.detok) e.text = sample.detok->push(t.token);
      if (std::find(r.shown_tokens.begin(), r.shown_tokens.end(), t.token) != r.shown_tokens.end())
        e.text += sample.detok->flush() + r.tokenizer->piece(t.token);
      if (sample.stops) {
        e.text = sample.stops->push(e.text);
        if (sample.stops->stopped()) {
          // Our own stop: the scheduler's later events for this sample are ignored.
          if (r.samples.size() == 1) self->send(self->state.scheduler, cancel_atom_v, id);
          else self->send(self->state.scheduler, cancel_atom_v, id, t.index);
          e.finish = FinishReason::stop;
          e.prompt_tokens = d.prompt_tokens;
          e.completion_tokens = sample.completion_tokens;
          return emit_final(self, id, r, std::move(e));
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
      e.prompt_tokens = d.prompt_tokens;
      e.cached_prompt_tokens = d.cached_prompt_tokens;
      e.completion_tokens = d.completion_tokens;
      e.message = d.message;
      if (e.finish == FinishReason::error) e.error_code = t.error_code;
      if (emit_final(self, id, r, std::move(e))) return true;
    } else if (!e.text.empty() || !e.token_ids.empty()) {
      call(self, id, r, e);
    }
  }
  if (t.request_done && r.open > 0) {  // samples the scheduler ended together (an engine failure)
    StreamEvent e;
    e.finish = t.finish == FinishReason::none ? FinishReason::error : t.finish;
    e.message = d.message;
    e.error_code = t.error_code;
    fail_open_samples(self, id, r, e);
  }
  return r.open == 0;
}

// A request this actor cannot take (never submitted): its samples end with
// `e` at once.
void refuse(self_ptr self, StreamOpen& open, StreamEvent e) {
  const request_id id = open.spec.request.id;
  RequestStream r = open_stream(open);
  e.refused = true;
  fail_open_samples(self, id, r, e);
}

void refuse(self_ptr self, StreamOpen& open, const std::string& message) {
  refuse(self, open, error_event(Errc::invalid_argument, message, true));
}

stream_actor::behavior_type stream(self_ptr self, scheduler_actor scheduler) {
  auto& st = self->state;
  st.scheduler = std::move(scheduler);
  st.itself = caf::actor_cast<stream_actor>(self);
  self->monitor(st.scheduler);
  self->set_down_handler([self](const caf::down_msg& down) {
    auto& st = self->state;
    if (st.sinks.erase(down.source) != 0) {
      // An actor sink stopped: its requests still open are cancelled. They
      // end (and count in the metrics) as the scheduler's cancelled events
      // come, which no longer go to the sink; their ids stay taken until then.
      for (auto& [id, r] : st.requests) {
        if (r.sink != down.source || r.failed) continue;
        r.failed = true;
        if (r.submitted) self->send(st.scheduler, cancel_atom_v, id);
      }
      return;
    }
    if (down.source != st.scheduler.address()) return;
    // A scheduler that stopped on purpose (a lost device) names why in its
    // exit reason; requests still in its mailbox learn the same reason as
    // those it ended itself, and so do those submitted later.
    st.stopped = error_event(Errc::io_error,
                             is_engine_error(down.reason)
                                 ? "the engine failed: " + from_caf_error(down.reason).message
                                 : "the engine stopped",
                             false);
    auto requests = std::move(st.requests);
    st.requests.clear();
    for (auto& [id, r] : requests) fail_open_samples(self, id, r, *st.stopped);
    if (self->state.engine_gone) self->quit();
  });
  return {
      [self](open_atom, StreamOpen& open) {
        auto& st = self->state;
        const request_id id = open.spec.request.id;
        if (st.stopped) return refuse(self, open, *st.stopped);
        if (id == 0) return refuse(self, open, "a stream actor's request needs an id");
        if (!open.spec.stop.empty() && !open.spec.tokenizer)
          return refuse(self, open, "stop strings need a model with a tokenizer");
        if (st.requests.count(id)) return refuse(self, open, "duplicate request id");
        if (open.sink && st.sinks.insert(open.sink.address()).second) self->monitor(open.sink);
        RequestStream& r = st.requests[id] = open_stream(open);
        r.sink = open.sink.address();
        r.submitted = true;
        self->request(st.scheduler, caf::infinite, submit_atom_v, std::move(open.spec.request),
                      caf::actor_cast<token_sink_actor>(self))
            .then(
                [](request_id) {},
                [self, id](caf::error& err) {
                  // The scheduler stopped with our submit in its mailbox: its
                  // down message, which names why, ends the samples.
                  if (err == caf::sec::request_receiver_down) return;
                  auto it = self->state.requests.find(id);
                  if (it == self->state.requests.end()) return;
                  // Refused: the scheduler does not have it (its id may be
                  // another request's there), so a cancel must not follow.
                  it->second.submitted = false;
                  const Error error = from_caf_error(err);
                  fail_open_samples(self, id, it->second, error_event(error.code, error.message, true));
                  self->state.requests.erase(it);
                });
      },
      [self](TokenBatch& batch) {
        auto& requests = self->state.requests;
        const auto now = clock_type::now();  // once: the batch's tokens arrived together
        for (TokenEvent& t : batch.events) {
          auto it = requests.find(t.id);
          if (it == requests.end()) continue;
          if (on_token(self, it->first, it->second, t, now)) requests.erase(it);
        }
      },
      [self](cancel_atom, request_id id) {
        auto& st = self->state;
        auto it = st.requests.find(id);
        if (it == st.requests.end() || it->second.open == 0) return;
        // Sent after its submit (same sender), so the scheduler sees it second.
        self->send(st.scheduler, cancel_atom_v, id);
      },
      [self](drain_atom) {
        self->state.engine_gone = true;
        if (self->state.stopped) self->quit();
      },
  };
}

}  // namespace

// Detached: a thread of its own, so that detokenizing and the clients'
// callbacks run beside the scheduler instead of queueing with it on a CAF
// worker (a 2-core machine has one). With 256 sequences on the 2-core AMD EPYC
// (docs/benchmarks/history.md, 2026-12-04) the zero-cost iteration fell by
// about a tenth and the real model's time outside the forward pass by a
// quarter, at the price of a thread wake-up an iteration.
stream_actor spawn_stream(caf::actor_system& sys, scheduler_actor scheduler) {
  return sys.spawn<caf::detached>(stream, std::move(scheduler));
}

}  // namespace conveyor
