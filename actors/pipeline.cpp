#include "actors/pipeline.hpp"

#include <algorithm>
#include <map>
#include <optional>

namespace conveyor {

RequestHandle submit_to(Engine& engine, RequestSpec spec, stream_sink sink) {
  return engine.submit(std::move(spec), caf::actor_cast<caf::actor>(std::move(sink)));
}

void PipelineHandle::cancel() const {
  for (const stream_stage& s : stages_) caf::anon_send(s, cancel_atom_v);
}

Pipeline& Pipeline::then(StageFactory make) {
  stages_.push_back(std::move(make));
  return *this;
}

namespace {

class PassThrough final : public StreamStage {
 public:
  void on_event(const StreamEvent& event, StageContext& ctx) override { ctx.emit(event); }
  std::string name() const override { return "pass-through"; }
};

struct OpenRequest {
  RequestHandle handle;
  int32_t open_samples = 1;  // a request with n samples ends after n last events
};

struct stage_state {
  stage_state() = default;  // not an aggregate: CAF would build it from the actor pointer
  std::shared_ptr<StreamStage> stage;
  Engine* engine = nullptr;
  stream_sink next;
  std::map<request_id, OpenRequest> requests;  // submitted by this stage, still running
  bool upstream_open = false;  // a stage before this one has not sent its last event yet
  bool cancelled = false;
  bool ended = false;          // this stage's output has ended (the actor is quitting)
  static inline const char* name = "pipeline_stage";
};

using stage_ptr = stream_stage::stateful_pointer<stage_state>;

// Ends the stage: nothing it submitted is needed any more.
void end_stage(stage_ptr self) {
  auto& st = self->state;
  st.ended = true;
  for (auto& [id, r] : st.requests) r.handle.cancel();
  st.requests.clear();
  // The monitor is an entry in the next stage's list (a user's sink may live
  // long) that holds on to this actor's memory: take it back.
  self->demonitor(st.next.address());
  self->quit();
}

class Context final : public StageContext {
 public:
  explicit Context(stage_ptr self) : self_(self) {}

  void emit(StreamEvent event) override {
    auto& st = self_->state;
    if (st.ended) return;
    const bool last = event.last();
    self_->send(st.next, std::move(event));
    if (last) end_stage(self_);
  }

  request_id submit(RequestSpec spec) override {
    auto& st = self_->state;
    if (st.ended) return 0;
    const int32_t samples = std::clamp(spec.request.n, 1, kMaxSamples);
    stream_sink me = caf::actor_cast<stream_stage>(self_);
    RequestHandle handle = submit_to(*st.engine, std::move(spec), std::move(me));
    if (st.cancelled) handle.cancel();
    st.requests[handle.id()] = OpenRequest{handle, samples};
    return handle.id();
  }

  void cancel(request_id id) override {
    auto& st = self_->state;
    if (auto it = st.requests.find(id); it != st.requests.end()) it->second.handle.cancel();
  }

  const ModelInfo& model() const override { return self_->state.engine->model(); }

 private:
  stage_ptr self_;
};

// Every input has ended and the stage said nothing final: say it for it.
void check_inputs(stage_ptr self) {
  auto& st = self->state;
  if (st.ended || !st.requests.empty() || st.upstream_open) return;
  StreamEvent e;
  if (st.cancelled) {
    e.finish = FinishReason::cancelled;
  } else {
    e.finish = FinishReason::error;
    e.error_code = Errc::invalid_argument;
    e.message = "pipeline stage '" + (st.stage ? st.stage->name() : std::string("(null)")) +
                "' ended without a last event";
  }
  Context(self).emit(std::move(e));
}

// The stage's own code threw: its stream ends with an error naming it (the
// requests it submitted are cancelled as the stage ends).
void fail_stage(stage_ptr self, const std::string& what) {
  auto& st = self->state;
  if (st.ended) return;
  StreamEvent e;
  e.finish = FinishReason::error;
  e.error_code = Errc::internal;
  e.message = "pipeline stage '" + st.stage->name() + "' failed: " + what;
  Context(self).emit(std::move(e));
}

// Runs one of the stage's methods; an exception fails the stage.
template <class F>
void guarded(stage_ptr self, F&& call) {
  try {
    call();
  } catch (const std::exception& e) {
    fail_stage(self, e.what());
  } catch (...) {
    fail_stage(self, "an exception that is not a std::exception");
  }
}

stream_stage::behavior_type stage_actor(stage_ptr self, std::shared_ptr<StreamStage> stage, Engine* engine,
                                        stream_sink next, std::optional<RequestSpec> start) {
  auto& st = self->state;
  st.stage = std::move(stage);
  st.engine = engine;
  st.next = std::move(next);
  st.upstream_open = !start.has_value();
  self->monitor(st.next);
  self->set_down_handler([self](const caf::down_msg& down) {
    if (down.source == self->state.next.address() && !self->state.ended) end_stage(self);
  });
  if (!st.stage) {
    st.upstream_open = false;  // nothing can run it: end at once
  } else if (start) {
    guarded(self, [&] {
      Context ctx(self);
      st.stage->start(std::move(*start), ctx);
    });
  }
  check_inputs(self);
  return {
      [self](const StreamEvent& e) {
        auto& st = self->state;
        if (st.ended) return;
        if (auto it = st.requests.find(e.id); it != st.requests.end()) {
          if (e.last() && --it->second.open_samples == 0) st.requests.erase(it);
        } else if (e.last()) {
          st.upstream_open = false;  // the stage before this one has ended its output
        }
        guarded(self, [&] {
          Context ctx(self);
          st.stage->on_event(e, ctx);
        });
        check_inputs(self);
      },
      [self](cancel_atom) {
        auto& st = self->state;
        st.cancelled = true;
        for (auto& [id, r] : st.requests) r.handle.cancel();
      },
  };
}

}  // namespace

PipelineHandle Pipeline::run(RequestSpec spec, stream_sink sink) const {
  if (!sink) return PipelineHandle{};
  std::vector<StageFactory> makers = stages_;
  if (makers.empty()) makers.push_back([] { return std::make_unique<PassThrough>(); });
  caf::actor_system& sys = engine_->system();
  std::vector<stream_stage> actors(makers.size());
  stream_sink next = std::move(sink);
  for (size_t i = makers.size(); i-- > 0;) {
    std::shared_ptr<StreamStage> stage = makers[i]();
    std::optional<RequestSpec> start;
    if (i == 0) start = std::move(spec);
    actors[i] = sys.spawn(stage_actor, std::move(stage), engine_, next, std::move(start));
    next = actors[i];
  }
  return PipelineHandle(std::move(actors));
}

}  // namespace conveyor
