// Pipelines: stages of the user's that sit in the token flow between the
// engine and a sink, each in a typed actor of its own.
//
//   Pipeline pipeline(*engine);
//   pipeline.then<Redact>("password").then<StopAt>("The end");
//   PipelineHandle h = pipeline.run(spec, sink);   // sink: a stream_sink actor
//   h.cancel();                                     // optional
//
// A stage is a plain class (StreamStage) with no actor code, so a test can
// call it directly. run() puts each stage in a `stream_stage` actor that
// receives the events of the stage before it (or, for the first, of the
// requests it submits) and sends what the stage emits to the next stage, the
// last one to `sink`. The actor keeps these rules, so a stage need not:
//
//  - One stream out. What a stage emits is one stream that ends with exactly
//    one last event (finish != none); what it emits after that is dropped.
//  - Ending early. When a stage emits its last event, the requests it
//    submitted that still run are cancelled and its actor ends; the stage
//    before it sees it go (a monitor) and ends too, cancelling its own.
//  - Cancel. PipelineHandle::cancel reaches every stage; each cancels its
//    running requests (and any it submits later), whose `cancelled` last
//    events then flow through the stages like any other event, so the sink
//    still gets one last event. A sink that ends cancels the pipeline too.
//  - No silent end. A stage whose inputs (the stage before it, its own
//    requests) have all ended without its emitting a last event gets one
//    emitted for it: finish `error`, naming the stage. So does a stage whose
//    start() or on_event() throws (with the exception's message), and its
//    requests are cancelled.
//
// Threads: a stage's methods run on its actor, one call at a time; a stage
// needs no locks. The Engine must outlive every pipeline run on it. A
// Pipeline holds stage factories, not stages: each run() builds fresh ones,
// so one Pipeline may run many times, also concurrently.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "actors/engine.hpp"

namespace conveyor {

// Anything that takes stream events as messages: a sink of the user's, or a
// stage. A sink is an ordinary typed actor:
//   stream_sink::behavior_type printer(stream_sink::pointer self) {
//     return {[self](const StreamEvent& e) { ...; if (e.last()) self->quit(); }};
//   }
using stream_sink = caf::typed_actor<caf::reacts_to<StreamEvent>>;

// A pipeline stage's actor: a sink that can be cancelled, as a request can.
using stream_stage = stream_sink::extend<caf::reacts_to<cancel_atom>>;

// Submits `spec` with its events delivered, in order, as messages to `sink`
// (Engine::submit(spec, actor): a sink that stops cancels the request).
RequestHandle submit_to(Engine& engine, RequestSpec spec, stream_sink sink);

// What a stage can do, given to each of its calls.
class StageContext {
 public:
  virtual ~StageContext() = default;
  // Sends `event` on to the next stage (or the sink). A last event ends this
  // stage's output (see the rules above).
  virtual void emit(StreamEvent event) = 0;
  // Submits a request whose events come to this stage's on_event; its id
  // (the StreamEvents' `id`). After the stage's output has ended it submits
  // nothing and returns 0; after a cancel the request is cancelled at once.
  virtual request_id submit(RequestSpec spec) = 0;
  // Cancels a request this stage submitted; its last event (`cancelled`,
  // unless it had ended already) still comes to on_event. Others: ignored.
  virtual void cancel(request_id id) = 0;
  // The engine's model: its tokenizer (possibly null), vocabulary size, ends.
  virtual const ModelInfo& model() const = 0;
};

class StreamStage {
 public:
  virtual ~StreamStage() = default;
  // Called once, on the first stage only, with the request given to run().
  // The default submits it as it is; a fan-out stage submits several.
  virtual void start(RequestSpec spec, StageContext& ctx) { ctx.submit(std::move(spec)); }
  // Every event that reaches this stage: the stage before it's output and
  // the events of the requests this stage submitted (tell them apart by
  // `id`), each source in order.
  virtual void on_event(const StreamEvent& event, StageContext& ctx) = 0;
  // For the error event emitted for a stage that ended without one.
  virtual std::string name() const { return "stage"; }
};

using StageFactory = std::function<std::unique_ptr<StreamStage>()>;

// One run of a pipeline: its stage actors, first to last.
class PipelineHandle {
 public:
  PipelineHandle() = default;
  explicit PipelineHandle(std::vector<stream_stage> stages) : stages_(std::move(stages)) {}
  // Cancels the run: the sink's last event says `cancelled` (unless the run
  // had already ended, or a stage ends it otherwise).
  void cancel() const;
  const std::vector<stream_stage>& stages() const { return stages_; }

 private:
  std::vector<stream_stage> stages_;
};

class Pipeline {
 public:
  explicit Pipeline(Engine& engine) : engine_(&engine) {}

  // Appends a stage; run() calls `make` for a fresh one each time.
  Pipeline& then(StageFactory make);
  // Appends a stage built as Stage(args...) (the arguments are copied).
  template <class Stage, class... Args>
  Pipeline& then(Args... args) {
    return then([args...]() -> std::unique_ptr<StreamStage> { return std::make_unique<Stage>(args...); });
  }

  // Spawns the stages, last first, wires each to the next and the last to
  // `sink`, and starts the first with `spec`. With no stages, `spec`'s
  // events go to `sink` through a stage that passes everything on. A null
  // `sink` runs nothing (an empty handle): nobody would hear the events.
  PipelineHandle run(RequestSpec spec, stream_sink sink) const;

 private:
  Engine* engine_;
  std::vector<StageFactory> stages_;
};

}  // namespace conveyor
