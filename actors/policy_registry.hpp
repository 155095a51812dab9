// Policies by name: what `conveyor serve --admission NAME` / `--preemption
// NAME`, EngineConfig::admission_policy / preemption_policy and
// Engine::set_admission_policy(name) / set_preemption_policy(name) look up.
// The built-ins are registered from the start (conservative, watermark,
// profiled; recompute, swap, cost); a program built on the library adds its
// own before it reads its settings or creates an engine:
//
//   conveyor::register_admission_policy("tenant-share",
//       [](caf::actor_system& sys, const conveyor::EngineConfig& config) {
//         return sys.spawn(tenant_share, 0.5);   // an admission_actor
//       });
//
// A factory spawns a fresh actor each time it is called (each engine, each
// replacement gets its own), with the engine's config to read its limits
// from. It runs on the thread that creates the engine or asks for the
// policy, and must not block.
//
// Thread-safety: every function from any thread.
#pragma once

#include <functional>
#include <string>
#include <string_view>

#include "actors/policy_actors.hpp"
#include "actors/policy_names.hpp"
#include "engine/engine_config.hpp"

namespace conveyor {

using AdmissionFactory = std::function<admission_actor(caf::actor_system&, const EngineConfig&)>;
using PreemptionFactory = std::function<preemption_actor(caf::actor_system&, const EngineConfig&)>;

// Adds a policy under `name`. An error when the name is empty, has
// characters outside [A-Za-z0-9._-], is taken (the built-ins' included), or
// the factory is empty.
Status register_admission_policy(std::string name, AdmissionFactory factory);
Status register_preemption_policy(std::string name, PreemptionFactory factory);

// has_admission_policy(), admission_policy_names() and the preemption twins
// are in actors/policy_names.hpp.

// A new actor of the policy `name`; an unknown name is an error naming the
// choices, a factory that returns no actor an error naming the policy.
Expected<admission_actor> make_admission_actor(std::string_view name, caf::actor_system& sys,
                                               const EngineConfig& config);
Expected<preemption_actor> make_preemption_actor(std::string_view name, caf::actor_system& sys,
                                                 const EngineConfig& config);

// The policy `config` asks for: the one named by admission_policy
// (preemption_policy) when that is not empty, else the built-in mode
// (admission, preemption).
Expected<admission_actor> configured_admission_actor(caf::actor_system& sys, const EngineConfig& config);
Expected<preemption_actor> configured_preemption_actor(caf::actor_system& sys, const EngineConfig& config);

}  // namespace conveyor
