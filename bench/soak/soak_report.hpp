// What the soak counts and prints: per phase and in total, how the streams
// ended (sent = completed + abandoned + lost), the errors by kind, and the
// engine's state once everything settled.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "bench/soak/soak_client.hpp"

namespace conveyor::soak {

struct Tally {
  int64_t sent = 0;
  int64_t completed = 0;
  int64_t completed_before_abandon = 0;  // of which: the planned abandon point was past the end
  int64_t abandoned = 0;
  int64_t abandoned_at_start = 0;        // of which: before any event
  int64_t abandoned_collateral = 0;      // of which: their WebSocket closed by another stream
  int64_t lost = 0;
  std::map<std::string, int64_t> errors;  // lost streams by kind
  std::map<std::string, int64_t> sent_by_transport;

  void add(const StreamPlan& plan, const StreamOutcome& outcome);
  void merge(const Tally& other);
};

// The engine and server once the clients are done and nothing runs.
struct SettledState {
  bool settled = false;          // reached all-zero before the settle timeout
  double settle_seconds = 0;     // how long it took
  int32_t running = 0, waiting = 0, swapped = 0;
  int32_t blocks_used = 0, host_blocks_used = 0, blocks_total = 0;
  // The same as /metrics says them (-1: not in the answer, or no answer).
  double metrics_running = -1, metrics_waiting = -1, metrics_kv_usage = -1;
};

struct PhaseReport {
  std::string name;
  std::string policies;          // what ran: "preemption swap", "policy swaps (37)"
  double seconds = 0;
  Tally tally;
  SettledState end;
  uint64_t preemptions_recompute = 0, preemptions_swap = 0;  // during the phase
  uint64_t generated_tokens = 0;
  int64_t rss_kib = 0;           // after the phase settled
  int64_t heap_in_use_kib = 0;   // malloc's bytes in use then (mallinfo2), all arenas
  int64_t heap_held_kib = 0;     // what malloc holds from the system then, in use or free
  int64_t threads = 0;           // this process's threads then
  std::vector<std::string> failures;  // must-be conditions that failed
};

void print_phase(const PhaseReport& phase);
void print_total(const std::vector<PhaseReport>& phases, const Tally& total, double seconds);

// Failures of the must-be conditions for this phase's tally and end state.
std::vector<std::string> check_phase(const Tally& tally, const SettledState& end);

const char* transport_name(Transport t);

}  // namespace conveyor::soak
