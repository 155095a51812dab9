#include "actors/executor_actor.hpp"

#include <chrono>
#include <deque>
#include <mutex>
#include <stdexcept>
#include <thread>

namespace conveyor {
namespace {

int64_t now_ns() { return std::chrono::steady_clock::now().time_since_epoch().count(); }

// What a runner's ready callback sends its poll through. It holds the
// executor strongly until the executor ends, so the executor is never
// destroyed as unreachable by the callback's thread dropping the last
// reference: that would destroy the runner on CUDA's callback thread, where
// the CUDA API may not be called (the runner's destructor synchronizes its
// stream, and so waited for itself). The executor ends on an exit message
// (the scheduler sends one when it restarts its workers or stops), on its
// own thread, which clears the relay and then releases the runner.
struct ReadyRelay {
  std::mutex mutex;
  executor_actor target;
};

struct executor_state {
  executor_state() = default;  // not an aggregate: CAF would build it from the actor pointer
  ~executor_state() {
    if (!relay) return;
    std::lock_guard lock(relay->mutex);
    relay->target = nullptr;
  }
  std::shared_ptr<ReadyRelay> relay;  // first: cleared before the runner goes
  std::shared_ptr<StepRunner> runner;
  std::shared_ptr<FaultInjector> faults;
  // A pipelined runner's launched, unfinished steps, oldest first (two at most).
  struct Launched {
    caf::typed_response_promise<StepResult> promise;
    int64_t started_ns = 0;
  };
  std::deque<Launched> launched;
  bool polling = false;  // a poll is in the mailbox
  // The runner sends a poll when each launched step's work is done
  // (StepRunner::set_ready_callback), so nothing polls in between.
  bool notified = false;
  static inline const char* name = "executor";
};

using self_ptr = executor_actor::stateful_pointer<executor_state>;

caf::error step_error(const std::exception& e) {
  return make_engine_error(Error{Errc::internal, std::string("executor: ") + e.what()});
}

void check_faults(executor_state& st) {
  if (st.faults && st.faults->hit(FaultPoint::executor))
    throw std::runtime_error(describe_fault(FaultPoint::executor, st.faults->count(FaultPoint::executor)));
}

// Every launched step fails: the scheduler restarts the workers and resets the runner.
void fail_launched(executor_state& st, const caf::error& err) {
  for (auto& l : st.launched) l.promise.deliver(err);
  st.launched.clear();
}

// The oldest launched step's result goes to the scheduler (waiting for it).
void finish_oldest(executor_state& st) {
  executor_state::Launched l = std::move(st.launched.front());
  st.launched.pop_front();
  try {
    StepResult result = st.runner->finish();
    result.started_ns = l.started_ns;
    result.finished_ns = now_ns();
    l.promise.deliver(std::move(result));
  } catch (const std::exception& e) {
    const caf::error err = step_error(e);
    l.promise.deliver(err);
    fail_launched(st, err);
  }
}

// Checks the oldest launched step without blocking, through the mailbox, so
// that a plan that arrives meanwhile is launched behind it first. A runner
// that notifies sends the poll itself when the step's work is done.
void poll_later(self_ptr self) {
  auto& st = self->state;
  if (st.notified || st.launched.empty() || st.polling) return;
  st.polling = true;
  self->send(self, poll_atom_v);
}

executor_actor::behavior_type executor(self_ptr self, std::shared_ptr<StepRunner> runner,
                                       std::shared_ptr<FaultInjector> faults) {
  self->state.runner = std::move(runner);
  self->state.faults = std::move(faults);
  // A notification may come for a step finish() already took, or after
  // this executor was replaced by a restart's: a poll that finds nothing
  // ready does nothing (the oldest step's own notification is still to come).
  if (self->state.runner->pipelined()) {
    auto relay = std::make_shared<ReadyRelay>();
    relay->target = caf::actor_cast<executor_actor>(self);
    self->state.notified = self->state.runner->set_ready_callback([relay] {
      std::lock_guard lock(relay->mutex);
      if (relay->target) caf::anon_send(relay->target, poll_atom_v);
    });
    if (self->state.notified) self->state.relay = std::move(relay);
  }
  return {
      [self](step_atom, StepPlan& plan) -> caf::result<StepResult> {
        auto& st = self->state;
        const int64_t start = now_ns();
        if (!st.runner->pipelined()) {
          try {
            check_faults(st);
            StepResult result = st.runner->run(plan);
            result.started_ns = start;
            result.finished_ns = now_ns();
            return result;
          } catch (const std::exception& e) {  // std::bad_alloc included
            return step_error(e);
          }
        }
        // Pipelined: this step's device work is queued behind the previous
        // step's before that step's samples come back; then the previous
        // step finishes. The last step finishes when polled ready.
        auto promise = self->make_response_promise<StepResult>();
        try {
          check_faults(st);
          st.runner->launch(plan);
        } catch (const std::exception& e) {
          const caf::error err = step_error(e);
          promise.deliver(err);
          fail_launched(st, err);
          return promise;
        }
        st.launched.push_back(executor_state::Launched{promise, start});
        while (st.launched.size() > 1) finish_oldest(st);
        poll_later(self);
        return promise;
      },
      [self](poll_atom) {
        auto& st = self->state;
        st.polling = false;
        if (st.launched.empty()) return;
        bool ready = false;
        try {
          ready = st.runner->ready();
        } catch (const std::exception& e) {
          fail_launched(st, step_error(e));
          return;
        }
        if (ready)
          finish_oldest(st);
        else if (!st.notified)
          std::this_thread::yield();  // polling: a runner that cannot notify
        poll_later(self);
      },
  };
}

}  // namespace

executor_actor spawn_executor(caf::actor_system& sys, std::shared_ptr<StepRunner> runner,
                              std::shared_ptr<FaultInjector> faults) {
  return sys.spawn<caf::detached>(executor, std::move(runner), std::move(faults));
}

}  // namespace conveyor
