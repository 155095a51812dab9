// The admission and preemption policy protocols, and the built-in policy
// actors. A policy is any actor with one of these typed interfaces (declared
// in actors/messages.hpp, the engine's message catalogue); a program writes
// its own with this header, actors/engine.hpp and the policy structs of
// policies/admission.hpp and policies/preemption.hpp, and plugs it in with
// Engine::set_admission_policy(handle) or by name through
// actors/policy_registry.hpp. examples/tenant_share.cpp is one.
//
// ---- admission_actor -------------------------------------------------------
//
//   (admit_atom, AdmissionQuery) -> AdmissionDecision
//     Asked at the start of an iteration that has waiting requests and room
//     for more (at most one question at a time; no iteration is built while
//     it is out, running sequences wait for the answer). The query holds the
//     waiting candidates in queue order, the free and total blocks, the
//     running count and its limit, the blocks owed to running requests, and
//     (AdmissionQuery::tenants) what each candidate's tenant holds now.
//     The decision lists candidates to start now, in order (footprints:
//     blocks it charged each, for statistics; may be left empty) and
//     candidates to refuse with a reason (they end with an error event).
//     Ids that are not candidates, and candidates named twice, are ignored;
//     a candidate neither admitted nor rejected stays waiting and is asked
//     about again. Admitting more than fits is allowed but costly: what
//     does not fit is preempted (preemption_actor) or waits.
//   (finished_atom, int32_t output_tokens)
//     One-way: a request ended normally after that many generated tokens.
//
// ---- preemption_actor ------------------------------------------------------
//
//   (preempt_atom, PreemptionQuery) -> PreemptionDecision
//     Asked when running sequences are short of KV blocks: the shortfall in
//     blocks, the fewest victims wanted (min_victims), the host swap space
//     left and the running candidates. The decision lists victims in the
//     order to preempt them, each with mode recompute or swap (swap only
//     within free_host_blocks; anything else is treated as recompute).
//     Unknown ids are ignored. Too few victims is allowed: the sequences
//     still short sit the iteration out and are asked about again. But no
//     victim at all while every running sequence is short (nothing of the
//     iteration could run, so nothing ever would) is a failure, as below.
//   (costs_atom, double seconds_per_recomputed_token, double seconds_per_copied_block)
//     One-way measurements (0 where not measured), for cost models: a swap's
//     copy time per block as each swap ends; the forward pass's time per
//     token averaged over the steps since the last report, at most every 10
//     ms and before each preemption question.
//
// ---- what the engine does when a policy fails it ---------------------------
//
// Every question has a time limit, EngineConfig::policy_timeout_seconds
// (default 0.1 s; a built-in answers in tens of microseconds: see
// docs/engine.md). When a policy does not answer in time, answers with an
// error, or dies (the scheduler monitors it, so a dead policy is replaced
// before the next question), the scheduler logs one warning naming the
// policy and the reason, replaces it with the built-in of the configured
// mode (EngineConfig::admission, EngineConfig::preemption), and asks that
// the same question. Nothing accepted is lost; a late answer is dropped.
// The policy given up on is sent an exit: a policy handed to the engine
// belongs to it, and stops when the engine stops or gives up on it.
//
// The scheduler asks a policy one question at a time. A policy is an actor
// of its own: it may keep state, and should answer without blocking (an
// answer later than the limit is as good as none).
#pragma once

#include <memory>

#include "actors/messages.hpp"
#include "policies/admission.hpp"
#include "policies/preemption.hpp"

namespace conveyor {

// The built-in policies (policies/) in actors.
admission_actor spawn_admission_policy(caf::actor_system& sys,
                                       std::unique_ptr<AdmissionPolicy> policy);
preemption_actor spawn_preemption_policy(caf::actor_system& sys, PreemptionPolicy policy);

}  // namespace conveyor
