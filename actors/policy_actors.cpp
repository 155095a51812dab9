#include "actors/policy_actors.hpp"

namespace conveyor {
namespace {

struct admission_state {
  admission_state() = default;  // not an aggregate: CAF would build it from the actor pointer
  std::shared_ptr<AdmissionPolicy> policy;
};

admission_actor::behavior_type admission(admission_actor::stateful_pointer<admission_state> self,
                                         std::shared_ptr<AdmissionPolicy> policy) {
  self->state.policy = std::move(policy);
  return {
      [self](admit_atom, const AdmissionQuery& q) { return (*self->state.policy)(q); },
      [self](finished_atom, int32_t output_tokens) {
        self->state.policy->record_finished(output_tokens);
      },
  };
}

struct preemption_state {
  preemption_state() = default;  // not an aggregate: CAF would build it from the actor pointer
  PreemptionPolicy policy;
};

preemption_actor::behavior_type preemption(
    preemption_actor::stateful_pointer<preemption_state> self, PreemptionPolicy policy) {
  self->state.policy = std::move(policy);
  return {
      [self](preempt_atom, const PreemptionQuery& q) { return self->state.policy(q); },
      [self](costs_atom, double seconds_per_token, double seconds_per_block) {
        if (seconds_per_token > 0) self->state.policy.observe_recompute(1, seconds_per_token);
        if (seconds_per_block > 0) self->state.policy.observe_copy(1, seconds_per_block);
      },
  };
}

}  // namespace

admission_actor spawn_admission_policy(caf::actor_system& sys,
                                       std::unique_ptr<AdmissionPolicy> policy) {
  return sys.spawn(admission, std::shared_ptr<AdmissionPolicy>(std::move(policy)));
}

preemption_actor spawn_preemption_policy(caf::actor_system& sys, PreemptionPolicy policy) {
  return sys.spawn(preemption, std::move(policy));
}

}  // namespace conveyor
