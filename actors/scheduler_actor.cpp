#include "actors/scheduler_actor.hpp"

#include <chrono>
#include <unordered_map>
#include <utility>

#include <spdlog/spdlog.h>

#include "actors/token_outbox.hpp"

namespace conveyor {
namespace {

using clock_type = std::chrono::steady_clock;

double seconds_since(clock_type::time_point start) {
  return std::chrono::duration<double>(clock_type::now() - start).count();
}

struct scheduler_state {
  scheduler_state() = default;  // not an aggregate: CAF would build it from the actor pointer
  std::unique_ptr<SchedulerCore> core;
  SchedulerActors actors;
  std::unordered_map<request_id, token_sink_actor> sinks;
  std::unordered_map<caf::actor_addr, int32_t> sink_refs;  // requests per sink (monitored while > 0)
  clock_type::time_point epoch = clock_type::now();
  clock_type::time_point last_step_done{};
  clock_type::time_point step_result_at{};  // when the last step result came in
  clock_type::time_point plan_sent_at{};    // when the last step plan went out
  bool building = false;       // an iteration is being built (replies pending)
  struct Arrived {
    StepResult result;
    int32_t tokens = 0;   // the plan's
    int64_t sent_ns = 0;  // when the plan went out
  };
  std::vector<Arrived> stashed;  // results that arrived while building, applied after
  int64_t last_finished_ns = 0;  // when the executor finished its previous step
  // Forward-pass time and tokens not yet reported to the preemption policy
  // (report_costs), and when the last report went.
  double unreported_seconds = 0.0;
  int64_t unreported_tokens = 0;
  clock_type::time_point costs_reported_at{};
  uint64_t steps = 0;            // results applied (forward passes)
  // The delayed wakes armed: the safety net's, and the one for the next
  // session expiry (its time, < 0 when none). Apart, so that a session's
  // long expiry never stands in for the safety net's millisecond.
  bool retry_pending = false;
  double expiry_wake_at = -1.0;
  bool woken_while_building = false;  // a wake found an iteration being built
  int32_t swaps_in_flight = 0;
  int32_t replies_owed = 0;    // requests out to workers and policies
  bool faulted = false;        // a worker failed: waiting for replies_owed to reach 0
  std::string fault;           // what failed
  // The actors to stop when the scheduler stops (it owns them): the workers
  // and policies of the moment (a replaced policy stops once nothing refers
  // to it). Shared with the functor run at exit.
  std::shared_ptr<std::vector<caf::actor_addr>> owned = std::make_shared<std::vector<caf::actor_addr>>();
  request_id next_id = 1;
  std::vector<TokenEvent> events;  // delivery buffer, reused
  TokenOutbox outbox;
  EngineStats stats;
  static inline const char* name = "scheduler";

  double now() const { return std::chrono::duration<double>(clock_type::now() - epoch).count(); }
};

using self_ptr = scheduler_actor::stateful_pointer<scheduler_state>;

// Adds the time a handler runs to a stats field.
class HandlerTimer {
 public:
  explicit HandlerTimer(double& sink) : sink_(sink), start_(clock_type::now()) {}
  ~HandlerTimer() { sink_ += seconds_since(start_); }

 private:
  double& sink_;
  clock_type::time_point start_;
};

void iterate(self_ptr self);

// A request's sink no longer hears from us; the sink is not watched once it
// serves none.
void release_sink(self_ptr self, std::unordered_map<request_id, token_sink_actor>::iterator it) {
  auto& st = self->state;
  auto ref = st.sink_refs.find(it->second.address());
  if (ref != st.sink_refs.end() && --ref->second == 0) {
    self->demonitor(ref->first);
    st.sink_refs.erase(ref);
  }
  st.sinks.erase(it);
}

// Sends the core's token events to their sinks (one batch per sink) and
// tells the admission policy how long finished requests ran.
void deliver_events(self_ptr self) {
  auto& st = self->state;
  HandlerTimer timer(st.stats.delivery_seconds);
  st.core->take_events(st.events);
  for (TokenEvent& e : st.events) {
    auto it = st.sinks.find(e.id);
    if (it == st.sinks.end()) continue;
    // As usage counts them: an end-of-sequence token that ended a sample is
    // generated too, though no event carries it.
    if (e.token >= 0) ++st.stats.generated_tokens;
    else st.stats.generated_tokens += uint64_t(e.details().stop_tokens);
    const bool last = e.request_done;
    st.outbox.add(it->second, std::move(e));
    if (last) release_sink(self, it);
  }
  st.outbox.flush(self);
  if (st.actors.metrics) {
    for (double q : st.core->take_queue_times()) st.actors.metrics->request_queue_time.observe(q);
  }
  for (const FinishedSequence& f : st.core->take_finished()) {
    if (f.reason == FinishReason::stop || f.reason == FinishReason::length)
      self->send(st.actors.admission, finished_atom_v, f.generated);
  }
}

void remember_owned(self_ptr self) {
  auto& a = self->state.actors;
  *self->state.owned = {a.block_manager.address(), a.executor.address(), a.swap.address(),
                        a.admission.address(), a.preemption.address()};
}

// No restart possible: every request ends with an error, and the scheduler stops.
void fail_all(self_ptr self, const std::string& why) {
  auto& st = self->state;
  for (auto& [id, sink] : st.sinks) {
    TokenEvent e;
    e.id = id;
    e.finish = FinishReason::error;
    e.error_code = Errc::internal;
    e.detail.get_or_make().message = "the engine failed: " + why;
    e.request_done = true;
    st.outbox.add(sink, std::move(e));
  }
  st.outbox.flush(self);
  st.sinks.clear();
  self->quit(make_engine_error(Error{Errc::internal, why}));
}

// Stops the failed workers, spawns fresh ones and lets the core recover.
void restart(self_ptr self) {
  auto& st = self->state;
  deliver_events(self);  // tokens confirmed before the fault still reach their clients
  if (!st.actors.respawn_workers) {
    fail_all(self, st.fault);
    return;
  }
  st.stashed.clear();  // results of steps the recovery forgets
  st.building = false;
  st.swaps_in_flight = 0;
  st.step_result_at = st.plan_sent_at = st.last_step_done = {};
  st.last_finished_ns = 0;
  const auto reason = caf::exit_reason::user_shutdown;
  self->send_exit(st.actors.block_manager, reason);
  self->send_exit(st.actors.executor, reason);
  self->send_exit(st.actors.swap, reason);
  st.actors.respawn_workers(st.actors);
  remember_owned(self);
  st.core->recover_from_fault(st.fault);
  st.faulted = false;
  if (st.actors.metrics) {
    st.actors.metrics->restarting = false;
    st.actors.metrics->restarted(st.fault);
  }
  deliver_events(self);
  iterate(self);
}

// A reply from a worker or policy came in. False while a fault is being
// recovered from: the reply is dropped, and the last one owed starts the restart.
bool reply_in(self_ptr self) {
  auto& st = self->state;
  --st.replies_owed;
  if (!st.faulted) return true;
  if (st.replies_owed == 0) restart(self);
  return false;
}

// An error reply: a worker failed (or died).
void on_fault(self_ptr self, const caf::error& err) {
  auto& st = self->state;
  if (!st.faulted) {
    st.faulted = true;
    st.fault = from_caf_error(err).message;
    if (st.actors.metrics) st.actors.metrics->restarting = true;
  }
  reply_in(self);
}

template <class Handle, class... Ts>
auto ask(self_ptr self, const Handle& dest, Ts&&... xs) {
  ++self->state.replies_owed;
  return self->request(dest, caf::infinite, std::forward<Ts>(xs)...);
}

// ---- policies ------------------------------------------------------------------
// A policy is asked with a time limit when it has a fallback; when it fails
// (a late answer, an error, its death) the built-in takes its place for good
// and is asked the same question (actors/policy_actors.hpp).

bool has_fallback(self_ptr self) {
  const PolicyFallback& f = self->state.actors.fallback;
  return f.admission && f.preemption;
}

caf::duration policy_timeout(self_ptr self) {
  if (!has_fallback(self)) return caf::infinite;
  return caf::duration{self->state.actors.fallback.timeout};
}

std::string why_failed(self_ptr self, const caf::error& err) {
  if (err == caf::sec::request_timeout) {
    const auto us = self->state.actors.fallback.timeout.count();
    return "no answer within " + (us % 1000 == 0 ? std::to_string(us / 1000) + " ms" : std::to_string(us) + " us");
  }
  if (err == caf::sec::request_receiver_down) return "it is down";
  return from_caf_error(err).message;
}

// Replaces `current` by its built-in when it is still the policy that failed
// (its death and an ask's error may both report one failure): logs why, stops it.
template <class Handle>
void replace_policy(self_ptr self, Handle& current, const caf::actor_addr& failed,
                    const std::function<Handle()>& builtin, const char* kind, const std::string& builtin_name,
                    const std::string& reason) {
  if (!builtin || !current || current.address() != failed) return;
  spdlog::warn("{} policy (actor {}) failed: {}; the built-in {} policy answers from now on", kind,
               failed.id(), reason, builtin_name);
  self->demonitor(failed);
  self->send_exit(current, caf::exit_reason::user_shutdown);
  current = builtin();
  self->monitor(current);
  remember_owned(self);
}

void replace_admission(self_ptr self, const caf::actor_addr& failed, const std::string& reason) {
  auto& st = self->state;
  replace_policy(self, st.actors.admission, failed, st.actors.fallback.admission, "admission",
                 st.actors.fallback.admission_name, reason);
}

void replace_preemption(self_ptr self, const caf::actor_addr& failed, const std::string& reason) {
  auto& st = self->state;
  replace_policy(self, st.actors.preemption, failed, st.actors.fallback.preemption, "preemption",
                 st.actors.fallback.preemption_name, reason);
}

// A policy plugged in: watched from now on; the one it replaces no longer is.
template <class Handle>
void plug_in(self_ptr self, Handle& current, Handle next) {
  if (current) self->demonitor(current.address());
  current = std::move(next);
  if (current) self->monitor(current);
  remember_owned(self);
}

// Starts building an iteration if the core allows one now.
void wake(self_ptr self) { iterate(self); }

// Kept sessions expire while nothing runs too: wake up then.
void arm_session_expiry(self_ptr self) {
  auto& st = self->state;
  auto expiry = st.core->next_session_expiry();
  if (!expiry || (st.expiry_wake_at >= 0.0 && st.expiry_wake_at <= *expiry)) return;
  st.expiry_wake_at = *expiry;
  const double wait = std::max(0.0, *expiry - st.now()) + 0.001;
  self->delayed_send(self, std::chrono::microseconds(int64_t(wait * 1e6)), wake_atom_v);
}

void send_swaps(self_ptr self) {
  auto& st = self->state;
  for (SwapOrder& order : st.core->take_swap_orders()) {
    ++st.swaps_in_flight;
    const auto blocks = int32_t(order.blocks.size());
    ask(self, st.actors.swap, swap_atom_v, std::move(order))
        .then(
            [self, blocks](const SwapDone& done) {
              if (!reply_in(self)) return;
              auto& st = self->state;
              --st.swaps_in_flight;
              if (blocks > 0) self->send(st.actors.preemption, costs_atom_v, 0.0, done.seconds / blocks);
              st.core->on_swap_done(done);
              deliver_events(self);
              wake(self);
            },
            [self](caf::error& err) { on_fault(self, err); });
  }
}

void on_result(self_ptr self, const StepResult& result, int32_t tokens, int64_t sent_ns);

// Tells the preemption policy what recomputing a token costs: the steps'
// forward time over their tokens since the last report. At most every
// kCostReportInterval (a message an iteration cost the scheduler's thread
// 3 us of a 55 us iteration with a zero-cost executor, engine_bench
// --zero-cost), and before each preemption question.
constexpr auto kCostReportInterval = std::chrono::milliseconds(10);

void report_costs(self_ptr self) {
  auto& st = self->state;
  if (st.unreported_tokens > 0)
    self->send(st.actors.preemption, costs_atom_v, st.unreported_seconds / double(st.unreported_tokens), 0.0);
  st.unreported_seconds = 0.0;
  st.unreported_tokens = 0;
  st.costs_reported_at = clock_type::now();
}

// Applies the results that came in while an iteration was being built (the
// core's phases must not interleave with a result).
void apply_stashed(self_ptr self) {
  auto& st = self->state;
  while (!st.building && !st.stashed.empty()) {
    auto arrived = std::move(st.stashed.front());
    st.stashed.erase(st.stashed.begin());
    on_result(self, arrived.result, arrived.tokens, arrived.sent_ns);
  }
}

void run_step(self_ptr self) {
  auto& st = self->state;
  StepPlan plan = st.core->build_step();
  st.building = false;
  if (plan.batch.num_seqs() == 0) {
    deliver_events(self);
    if (st.core->outstanding_steps() == 0) {
      // Nothing can run now. Swap completions, submissions and cancellations
      // wake us; as a safety net, look again shortly while work remains.
      if (st.core->has_runnable_work() && st.swaps_in_flight == 0 && !st.retry_pending) {
        st.retry_pending = true;
        self->delayed_send(self, std::chrono::milliseconds(1), wake_atom_v);
      }
      arm_session_expiry(self);
    }
    // A submission (or anything else) that woke us while this iteration was
    // built came after its admission: with no step to bring us back, it is
    // looked at now, or it would wait for some unrelated wake.
    const bool woken = std::exchange(st.woken_while_building, false);
    apply_stashed(self);
    if (woken) iterate(self);
    return;
  }
  const int32_t tokens = plan.batch.num_tokens();
  auto pending = ask(self, st.actors.executor, step_atom_v, std::move(plan));
  st.plan_sent_at = clock_type::now();
  if (st.step_result_at != clock_type::time_point{}) {
    st.stats.critical_seconds += std::chrono::duration<double>(st.plan_sent_at - st.step_result_at).count();
    st.step_result_at = {};
  }
  const int64_t sent_ns = st.plan_sent_at.time_since_epoch().count();
  std::move(pending).then(
      [self, tokens, sent_ns](StepResult& result) {
        if (!reply_in(self)) return;
        auto& st = self->state;
        if (st.building) {
          st.stashed.push_back(scheduler_state::Arrived{std::move(result), tokens, sent_ns});
          return;
        }
        on_result(self, result, tokens, sent_ns);
      },
      [self](caf::error& err) { on_fault(self, err); });
  // The executor has its plan: stream the previous iteration's tokens while
  // it computes, off the iteration's critical path.
  deliver_events(self);
  apply_stashed(self);
  iterate(self);  // plan the next step while this one runs (when the core allows)
}

void on_result(self_ptr self, const StepResult& result, int32_t tokens, int64_t sent_ns) {
  auto& st = self->state;
  HandlerTimer timer(st.stats.scheduler_seconds);
  const auto now = clock_type::now();
  st.step_result_at = now;
  if (result.started_ns != 0) {
    const auto ns = [](int64_t n) { return clock_type::time_point(clock_type::duration(n)); };
    // The executor waited for this plan from the later of its sending and
    // the end of the previous step (a plan built ahead waits in its mailbox).
    const int64_t ready_ns = std::max(sent_ns, st.last_finished_ns);
    st.stats.plan_hop_seconds += std::max(0.0, std::chrono::duration<double>(ns(result.started_ns) - ns(ready_ns)).count());
    if (st.last_finished_ns != 0) {
      // Negative when a pipelined runner launched this step before the last one finished.
      const double idle = std::max(0.0, double(result.started_ns - st.last_finished_ns) * 1e-9);
      st.stats.executor_idle_seconds += idle;
      if (st.actors.metrics) st.actors.metrics->executor_idle.observe(idle);
    }
    st.last_finished_ns = result.finished_ns;
    st.stats.result_hop_seconds += std::chrono::duration<double>(now - ns(result.finished_ns)).count();
  }
  if (st.last_step_done != clock_type::time_point{})
    st.stats.iteration_seconds += std::chrono::duration<double>(now - st.last_step_done).count();
  else
    st.stats.iteration_seconds += result.forward_seconds;
  st.last_step_done = now;
  st.stats.forward_seconds += result.forward_seconds;
  st.stats.computed_tokens += uint64_t(tokens);
  ++st.steps;
  if (st.actors.metrics) st.actors.metrics->iteration_tokens.observe(tokens);
  if (tokens > 0) {
    st.unreported_seconds += result.forward_seconds;
    st.unreported_tokens += tokens;
    if (now - st.costs_reported_at >= kCostReportInterval) report_costs(self);
  }
  st.core->apply_step(result, st.now());
  iterate(self);  // this step's tokens go out once the next step is dispatched
  if (!st.building) deliver_events(self);  // nothing was dispatched: send them now
}

void allocate(self_ptr self, AllocationBatch batch);

// Asks the preemption policy (a copy of the query is kept to ask again).
void ask_preemption(self_ptr self, PreemptionQuery query) {
  report_costs(self);
  auto& st = self->state;
  const caf::actor_addr asked = st.actors.preemption.address();
  ++st.replies_owed;
  self->request(st.actors.preemption, policy_timeout(self), preempt_atom_v, query)
      .then(
          [self, asked, query](const PreemptionDecision& decision) mutable {
            if (!reply_in(self)) return;
            if (self->state.core->stalls(decision) && has_fallback(self) &&
                self->state.actors.preemption.address() == asked) {
              // Every running sequence short and none preempted: nothing would
              // ever run again. A failure like any other: the built-in decides.
              replace_preemption(self, asked,
                                 "it preempted no sequence while every running one was short of KV blocks");
              return ask_preemption(self, std::move(query));
            }
            allocate(self, self->state.core->apply_preemption(decision));
          },
          [self, asked, query](caf::error& err) mutable {
            if (!has_fallback(self)) return on_fault(self, err);
            if (!reply_in(self)) return;
            replace_preemption(self, asked, why_failed(self, err));
            ask_preemption(self, std::move(query));
          });
}

void allocate(self_ptr self, AllocationBatch batch) {
  auto& st = self->state;
  const auto sent = clock_type::now();
  ask(self, st.actors.block_manager, alloc_atom_v, std::move(batch))
      .then(
          [self, sent](const AllocationResult& result) {
            if (!reply_in(self)) return;
            auto& st = self->state;
            st.stats.block_manager_seconds += seconds_since(sent);
            HandlerTimer timer(st.stats.scheduler_seconds);
            auto query = st.core->apply_allocation(result);
            send_swaps(self);
            if (!query) {
              run_step(self);
              return;
            }
            ask_preemption(self, std::move(*query));
          },
          [self](caf::error& err) { on_fault(self, err); });
}

void ask_admission(self_ptr self, AdmissionQuery query);

void iterate(self_ptr self) {
  auto& st = self->state;
  if (st.building) st.woken_while_building = true;
  if (st.building || st.faulted || !st.core->can_build()) return;
  st.woken_while_building = false;  // this iteration sees what woke us
  if (st.core->idle()) {
    st.last_step_done = {};
    st.last_finished_ns = 0;
    deliver_events(self);
    arm_session_expiry(self);
    return;
  }
  st.building = true;
  auto query = st.core->begin_iteration(st.now());
  if (!query) {
    allocate(self, st.core->build_allocation());
    return;
  }
  ask_admission(self, std::move(*query));
}

// Asks the admission policy (a copy of the query is kept to ask again).
void ask_admission(self_ptr self, AdmissionQuery query) {
  auto& st = self->state;
  const caf::actor_addr asked = st.actors.admission.address();
  ++st.replies_owed;
  self->request(st.actors.admission, policy_timeout(self), admit_atom_v, query)
      .then(
          [self](const AdmissionDecision& decision) {
            if (!reply_in(self)) return;
            HandlerTimer timer(self->state.stats.scheduler_seconds);
            self->state.core->apply_admission(decision);
            allocate(self, self->state.core->build_allocation());
          },
          [self, asked, query](caf::error& err) mutable {
            if (!has_fallback(self)) return on_fault(self, err);
            if (!reply_in(self)) return;
            replace_admission(self, asked, why_failed(self, err));
            ask_admission(self, std::move(query));
          });
}

scheduler_actor::behavior_type scheduler(self_ptr self, SchedulerConfig config,
                                         SchedulerActors actors) {
  auto& st = self->state;
  st.core = std::make_unique<SchedulerCore>(std::move(config));
  st.actors = std::move(actors);
  remember_owned(self);
  if (st.actors.admission) self->monitor(st.actors.admission);
  if (st.actors.preemption) self->monitor(st.actors.preemption);
  self->attach_functor([owned = st.owned](const caf::error&) {
    for (const caf::actor_addr& a : *owned) caf::anon_send_exit(a, caf::exit_reason::user_shutdown);
  });
  self->set_down_handler([self](const caf::down_msg& down) {
    auto& st = self->state;
    // A policy that died is replaced now, before the next question.
    const std::string reason = down.reason ? "it stopped (" + to_string(down.reason) + ")" : "it stopped";
    if (down.source == st.actors.admission.address()) return replace_admission(self, down.source, reason);
    if (down.source == st.actors.preemption.address()) return replace_preemption(self, down.source, reason);
    // A sink that died: its requests are cancelled. (A router's, on a node:
    // the router counts them and places them again; a node's own metrics
    // count only its HTTP clients' requests, so the log says what happened.)
    if (!st.sink_refs.erase(down.source)) return;
    size_t cancelled = 0;
    for (auto it = st.sinks.begin(); it != st.sinks.end();) {
      if (it->second.address() != down.source) {
        ++it;
        continue;
      }
      st.core->cancel(it->first);
      it = st.sinks.erase(it);
      ++cancelled;
    }
    if (down.source.node() != self->node())
      spdlog::info("{} request(s) cancelled: their sink on node {} went away ({})", cancelled,
                   to_string(down.source.node()), to_string(down.reason));
    wake(self);
  });
  return {
      [self](submit_atom, GenerateRequest& request,
             token_sink_actor& sink) -> caf::result<request_id> {
        auto& st = self->state;
        if (request.id == 0) request.id = st.next_id++;
        const request_id id = request.id;
        const auto prompt_tokens = request.prompt.size();
        if (Status s = st.core->submit(std::move(request), st.now()); !s)
          return make_engine_error(s.error());
        st.stats.prompt_tokens += prompt_tokens;
        if (st.sink_refs[sink.address()]++ == 0) self->monitor(sink);
        st.sinks.emplace(id, std::move(sink));
        wake(self);
        return id;
      },
      [self](cancel_atom, request_id id) {
        self->state.core->cancel(id);
        wake(self);
      },
      [self](cancel_atom, request_id id, int32_t index) {
        self->state.core->cancel_sample(id, index);
        wake(self);
      },
      [self](policy_atom, admission_actor& a) { plug_in(self, self->state.actors.admission, std::move(a)); },
      [self](policy_atom, preemption_actor& p) { plug_in(self, self->state.actors.preemption, std::move(p)); },
      [self](wake_atom) {
        // The two delayed wakes are one message: this is the expiry's if
        // its time has come, else the safety net's.
        auto& st = self->state;
        if (st.expiry_wake_at >= 0.0 && st.now() >= st.expiry_wake_at)
          st.expiry_wake_at = -1.0;
        else
          st.retry_pending = false;
        st.core->expire_sessions(st.now());
        wake(self);
      },
      [self](session_atom, const std::string& name) {
        self->state.core->release_session(name);
        wake(self);
      },
      [self](stats_atom) -> caf::result<EngineStats> {
        auto& st = self->state;
        auto rp = self->make_response_promise<EngineStats>();
        EngineStats stats = st.stats;
        stats.num_waiting = int32_t(st.core->num_waiting());
        stats.num_running = int32_t(st.core->num_running());
        stats.num_swapped = int32_t(st.core->num_swapped());
        stats.iterations = st.steps;
        stats.preemptions_recompute = st.core->preemptions(PreemptionMode::recompute);
        stats.preemptions_swap = st.core->preemptions(PreemptionMode::swap);
        stats.prefix_waits = st.core->prefix_waits();
        stats.spec_drafts = st.core->speculation().drafts;
        stats.spec_draft_tokens = st.core->speculation().draft_tokens;
        stats.spec_accepted_tokens = st.core->speculation().accepted_tokens;
        stats.sessions_held = st.core->sessions_held();
        stats.session_blocks = st.core->session_blocks();
        stats.kv_live_token_ratio = st.core->kv_live_token_ratio();
        self->request(st.actors.block_manager, caf::infinite, stats_atom_v)
            .then(
                [rp, stats](const BlockStats& blocks) mutable {
                  stats.blocks = blocks;
                  rp.deliver(stats);
                },
                [rp](caf::error& err) mutable { rp.deliver(err); });
        return rp;
      },
  };
}

}  // namespace

scheduler_actor spawn_scheduler(caf::actor_system& sys, SchedulerConfig config,
                                SchedulerActors actors) {
  return sys.spawn(scheduler, std::move(config), std::move(actors));
}

}  // namespace conveyor
