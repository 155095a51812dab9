// An agent's pattern: fire many requests at once (tool calls, candidate
// answers), take the first that finishes, cancel the rest.
//
//   build/examples/agent_fanout [MODEL] [N]
#include <atomic>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <string>

#include "actors/engine.hpp"

int main(int argc, char** argv) {
  using namespace conveyor;
  auto model = load_model(argc > 1 ? argv[1] : "");
  const int n = argc > 2 ? std::stoi(argv[2]) : 32;
  if (!model) {
    std::fprintf(stderr, "%s\n", model.error().message.c_str());
    return 1;
  }
  caf::actor_system_config cfg;
  add_engine_types(cfg);
  caf::actor_system sys{cfg};
  auto engine = Engine::create(sys, EngineConfig{}, std::move(model).value());
  if (!engine) return 1;

  std::mutex mutex;
  std::condition_variable cv;
  int ended = 0;
  int winner = -1;
  std::vector<RequestHandle> handles;
  for (int i = 0; i < n; ++i) {
    RequestSpec spec;
    spec.request.prompt = (*engine)->model().tokenizer->encode("Candidate answer:", true);
    spec.request.sampling.max_tokens = 16 + 8 * (i % 8);
    spec.request.sampling.seed = uint64_t(i);
    spec.request.sampling.has_seed = true;
    handles.push_back((*engine)->submit(std::move(spec), [&, i](const StreamEvent& e) {
      if (!e.last()) return;
      std::lock_guard lock(mutex);
      if (winner < 0 && e.finish != FinishReason::cancelled) winner = i;
      ++ended;
      cv.notify_all();
    }));
  }
  {
    std::unique_lock lock(mutex);
    cv.wait(lock, [&] { return winner >= 0; });
  }
  for (auto& h : handles) h.cancel();  // the rest are no longer needed
  std::unique_lock lock(mutex);
  cv.wait(lock, [&] { return ended == n; });
  std::printf("%d requests, first to finish: #%d; the others were cancelled or done\n", n, winner);
  return 0;
}
