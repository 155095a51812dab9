#include "http/engine_port.hpp"

#include <map>
#include <mutex>

#include "actors/engine.hpp"
#include "http/work_queue.hpp"

namespace conveyor::http {
namespace {

using StatsCallback = std::function<void(Expected<EngineStats>)>;

// Callbacks waiting for a stats answer, by ticket (shared with the helper actor).
struct StatsTickets {
  std::mutex mutex;
  uint64_t next = 1;
  std::map<uint64_t, StatsCallback> waiting;

  StatsCallback take(uint64_t ticket) {
    std::lock_guard lock(mutex);
    auto it = waiting.find(ticket);
    if (it == waiting.end()) return {};
    StatsCallback cb = std::move(it->second);
    waiting.erase(it);
    return cb;
  }
};

// Forwards (stats, ticket) to the scheduler and answers the ticket's callback.
caf::behavior stats_helper(caf::event_based_actor* self, scheduler_actor scheduler,
                           std::shared_ptr<StatsTickets> tickets) {
  return {
      [=](stats_atom, uint64_t ticket) {
        self->request(scheduler, std::chrono::seconds(10), stats_atom_v)
            .then(
                [=](const EngineStats& stats) {
                  if (auto cb = tickets->take(ticket)) cb(stats);
                },
                [=](caf::error& err) {
                  if (auto cb = tickets->take(ticket)) cb(from_caf_error(err));
                });
      },
  };
}

}  // namespace

struct EnginePort::Impl {
  explicit Impl(Engine& e) : engine(e) {}
  Engine& engine;
  std::shared_ptr<StatsTickets> tickets = std::make_shared<StatsTickets>();
  caf::actor helper;
  std::function<std::string()> extra_metrics;
  std::function<bool()> ready;
  std::shared_ptr<Embedder> embedder;      // null: the backend has none
  std::unique_ptr<WorkQueue> embeddings;  // its thread (after it: gone first)
};

EnginePort::EnginePort(Engine& engine) : impl_(std::make_unique<Impl>(engine)) {
  impl_->helper = engine.system().spawn(stats_helper, engine.scheduler(), impl_->tickets);
  impl_->embedder = engine.embedder();
  if (impl_->embedder) impl_->embeddings = std::make_unique<WorkQueue>(1);
}

EnginePort::~EnginePort() {
  caf::anon_send_exit(impl_->helper, caf::exit_reason::user_shutdown);
}

CancelFn EnginePort::submit(GenerateRequest request, std::vector<std::string> stop,
                            std::vector<int32_t> shown_tokens, EventSink sink) {
  RequestSpec spec;
  spec.request = std::move(request);
  spec.stop = std::move(stop);
  spec.shown_tokens = std::move(shown_tokens);
  RequestHandle handle = impl_->engine.submit(std::move(spec), std::move(sink));
  return [handle] { handle.cancel(); };
}

void EnginePort::release_session(const std::string& name) { impl_->engine.release_session(name); }

void EnginePort::stats_async(StatsCallback done) {
  uint64_t ticket = 0;
  {
    std::lock_guard lock(impl_->tickets->mutex);
    ticket = impl_->tickets->next++;
    impl_->tickets->waiting.emplace(ticket, std::move(done));
  }
  caf::anon_send(impl_->helper, stats_atom_v, ticket);
}

bool EnginePort::can_embed() const { return impl_->embeddings != nullptr; }

CancelFn EnginePort::embed_async(std::vector<std::vector<int32_t>> inputs, Pooling pooling,
                                 std::function<void(Expected<std::vector<std::vector<float>>>)> done) {
  return impl_->embeddings->submit(
      [embedder = impl_->embedder, inputs = std::move(inputs), pooling, done = std::move(done)] {
        done(embedder->embed(inputs, pooling));
      });
}

const EngineMetrics& EnginePort::metrics() const { return impl_->engine.metrics(); }
void EnginePort::set_extra_metrics(std::function<std::string()> render) { impl_->extra_metrics = std::move(render); }
std::string EnginePort::extra_metrics() const { return impl_->extra_metrics ? impl_->extra_metrics() : std::string(); }
void EnginePort::set_ready(std::function<bool()> ready) { impl_->ready = std::move(ready); }
bool EnginePort::ready() const { return !impl_->ready || impl_->ready(); }
const ModelConfig& EnginePort::model_config() const { return impl_->engine.model().config; }
std::shared_ptr<const Tokenizer> EnginePort::tokenizer() const { return impl_->engine.model().tokenizer; }
std::shared_ptr<GrammarBinder> EnginePort::grammar_binder() const { return impl_->engine.grammar_binder(); }
const EngineConfig& EnginePort::engine_config() const { return impl_->engine.config(); }
int32_t EnginePort::num_blocks() const { return impl_->engine.num_blocks(); }

}  // namespace conveyor::http
