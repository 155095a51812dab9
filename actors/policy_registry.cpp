#include "actors/policy_registry.hpp"

#include <exception>
#include <mutex>
#include <utility>

namespace conveyor {
namespace {

// Names and factories in the order registered, behind a mutex. Factories are
// copied out before they are called, so a factory may itself use the registry.
template <class Factory>
class Registry {
 public:
  explicit Registry(const char* kind) : kind_(kind) {}

  Status add(std::string name, Factory factory) {
    if (name.empty()) return make_error(Errc::invalid_argument, std::string(kind_) + " policy: the name is empty");
    for (char c : name) {
      const bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' ||
                      c == '_' || c == '-';
      if (!ok)
        return make_error(Errc::invalid_argument, std::string(kind_) + " policy '" + name +
                                                      "': a name is letters, digits, '.', '_' and '-'");
    }
    if (!factory)
      return make_error(Errc::invalid_argument, std::string(kind_) + " policy '" + name + "': no factory");
    std::lock_guard lock(mutex_);
    for (const auto& entry : entries_)
      if (entry.first == name)
        return make_error(Errc::invalid_argument, std::string(kind_) + " policy '" + name + "' is already registered");
    entries_.emplace_back(std::move(name), std::move(factory));
    return Status::ok();
  }

  Factory find(std::string_view name) const {
    std::lock_guard lock(mutex_);
    for (const auto& entry : entries_)
      if (entry.first == name) return entry.second;
    return {};
  }

  std::vector<std::string> names() const {
    std::lock_guard lock(mutex_);
    std::vector<std::string> out;
    for (const auto& entry : entries_) out.push_back(entry.first);
    return out;
  }

  template <class Handle>
  Expected<Handle> make(std::string_view name, caf::actor_system& sys, const EngineConfig& config) const {
    Factory factory = find(name);
    if (!factory) {
      std::string choices;
      for (const std::string& n : names()) choices += (choices.empty() ? "" : ", ") + n;
      return make_error(Errc::invalid_argument, "unknown " + std::string(kind_) + " policy '" + std::string(name) +
                                                    "' (expected one of " + choices + ")");
    }
    Handle handle;
    try {  // a program's factory: no exception crosses into the engine
      handle = factory(sys, config);
    } catch (const std::exception& e) {
      return make_error(Errc::internal, std::string(kind_) + " policy '" + std::string(name) + "': " + e.what());
    }
    if (!handle)
      return make_error(Errc::internal, std::string(kind_) + " policy '" + std::string(name) + "' made no actor");
    return handle;
  }

 private:
  const char* kind_;
  mutable std::mutex mutex_;
  std::vector<std::pair<std::string, Factory>> entries_;
};

Registry<AdmissionFactory>& admission_registry() {
  static Registry<AdmissionFactory>* registry = [] {
    auto* r = new Registry<AdmissionFactory>("admission");  // never destroyed: usable at exit
    for (AdmissionMode mode : {AdmissionMode::conservative, AdmissionMode::watermark, AdmissionMode::profiled})
      (void)r->add(to_string(mode), [mode](caf::actor_system& sys, const EngineConfig& config) {
        return spawn_admission_policy(sys, make_admission_policy(mode, config.admission_config));
      });
    return r;
  }();
  return *registry;
}

Registry<PreemptionFactory>& preemption_registry() {
  static Registry<PreemptionFactory>* registry = [] {
    auto* r = new Registry<PreemptionFactory>("preemption");
    for (PreemptionMode mode : {PreemptionMode::recompute, PreemptionMode::swap, PreemptionMode::cost})
      (void)r->add(to_string(mode), [mode](caf::actor_system& sys, const EngineConfig&) {
        return spawn_preemption_policy(sys, PreemptionPolicy(mode));
      });
    return r;
  }();
  return *registry;
}

}  // namespace

Status register_admission_policy(std::string name, AdmissionFactory factory) {
  return admission_registry().add(std::move(name), std::move(factory));
}

Status register_preemption_policy(std::string name, PreemptionFactory factory) {
  return preemption_registry().add(std::move(name), std::move(factory));
}

bool has_admission_policy(std::string_view name) { return bool(admission_registry().find(name)); }
bool has_preemption_policy(std::string_view name) { return bool(preemption_registry().find(name)); }
std::vector<std::string> admission_policy_names() { return admission_registry().names(); }
std::vector<std::string> preemption_policy_names() { return preemption_registry().names(); }

Expected<admission_actor> make_admission_actor(std::string_view name, caf::actor_system& sys,
                                               const EngineConfig& config) {
  return admission_registry().make<admission_actor>(name, sys, config);
}

Expected<preemption_actor> make_preemption_actor(std::string_view name, caf::actor_system& sys,
                                                 const EngineConfig& config) {
  return preemption_registry().make<preemption_actor>(name, sys, config);
}

Expected<admission_actor> configured_admission_actor(caf::actor_system& sys, const EngineConfig& config) {
  return make_admission_actor(config.admission_policy.empty() ? to_string(config.admission) : config.admission_policy,
                              sys, config);
}

Expected<preemption_actor> configured_preemption_actor(caf::actor_system& sys, const EngineConfig& config) {
  return make_preemption_actor(
      config.preemption_policy.empty() ? to_string(config.preemption) : config.preemption_policy, sys, config);
}

}  // namespace conveyor
