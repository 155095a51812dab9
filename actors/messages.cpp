#include "actors/messages.hpp"

#include <algorithm>
#include <cstdlib>
#include <string_view>
#include <thread>

namespace conveyor {
namespace {
constexpr caf::atom_value kCategory = caf::atom("conveyor");
}

caf::error make_engine_error(const Error& error) {
  return caf::error(static_cast<uint8_t>(error.code) + 1, kCategory,
                    caf::make_message(error.message));
}

bool is_engine_error(const caf::error& error) { return error.category() == kCategory && error.code() > 0; }

Error from_caf_error(const caf::error& error) {
  if (is_engine_error(error)) {
    std::string message;
    if (error.context().match_elements<std::string>()) message = error.context().get_as<std::string>(0);
    return Error{static_cast<Errc>(error.code() - 1), std::move(message)};
  }
  return Error{Errc::io_error, "the engine is unavailable: " + caf::to_string(error)};
}

void add_engine_types(caf::actor_system_config& cfg) {
  cfg.add_message_types<caf::id_block::conveyor_engine>();
  // Workers that wait on a condition variable rather than poll: polling
  // workers take cycles from the forward pass's threads on a machine with few
  // cores (engine_bench --closed-loop: +12% at concurrency 1, +17% at 32 on 2
  // cores). A caller may set another policy after this call.
  // CONVEYOR_CAF_SCHEDULER=stealing picks CAF's default back.
  const char* policy = std::getenv("CONVEYOR_CAF_SCHEDULER");
  const bool stealing = policy != nullptr && std::string_view(policy) == "stealing";
  cfg.set("scheduler.policy", stealing ? caf::atom("stealing") : caf::atom("sharing"));
  // One worker per core the forward pass's threads can spare (at least one,
  // at most four). The actors' work is light and, with the scheduler planning
  // ahead, off the critical path; a second worker on 2 cores only takes the
  // executor thread's core at step boundaries (engine_bench --overhead, 256
  // sequences: executor idle mean 40-42 us and p90 50-58 us with one worker,
  // mean 69-107 us and p90 up to 365 us with two; throughput and the server's
  // figures unchanged).
  const int cores = int(std::max(1u, std::thread::hardware_concurrency()));
  cfg.set("scheduler.max-threads", std::clamp(cores - 1, 1, 4));
  cfg.add_error_category(kCategory, [](uint8_t code, caf::atom_value, const caf::message& context) {
    std::string out = "conveyor error " + std::to_string(int(code));
    if (context.match_elements<std::string>()) out += ": " + context.get_as<std::string>(0);
    return out;
  });
}

}  // namespace conveyor
