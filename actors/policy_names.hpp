// The names of the policies registered (actors/policy_registry.hpp), for
// code that reads settings and needs no actor (the server's settings table).
//
// Thread-safety: every function from any thread.
#pragma once

#include <string>
#include <string_view>
#include <vector>

namespace conveyor {

bool has_admission_policy(std::string_view name);
bool has_preemption_policy(std::string_view name);
// The names registered, built-ins first, then in the order added.
std::vector<std::string> admission_policy_names();
std::vector<std::string> preemption_policy_names();

}  // namespace conveyor
