// Thin actors around the policy rules of policies/. The scheduler asks them
// once per iteration at most; replacing one is a (policy, handle) message to
// the scheduler, which takes effect at the next question it asks.
//
// admission:  (admit, AdmissionQuery) -> AdmissionDecision; (finished, output_len)
// preemption: (preempt, PreemptionQuery) -> PreemptionDecision;
//             (costs, seconds per recomputed token, seconds per copied block)
#pragma once

#include <memory>

#include "actors/messages.hpp"
#include "policies/admission.hpp"
#include "policies/preemption.hpp"

namespace conveyor {

admission_actor spawn_admission_policy(caf::actor_system& sys,
                                       std::unique_ptr<AdmissionPolicy> policy);
preemption_actor spawn_preemption_policy(caf::actor_system& sys, PreemptionPolicy policy);

}  // namespace conveyor
