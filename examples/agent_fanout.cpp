// An agent's pattern: fire many requests at once (tool calls, candidate
// answers), take the first that finishes, cancel the rest.
//
//   build-dir/examples/agent_fanout [--model MODEL] [--n N]
//
// Request i may generate 16 + 8 * (i % 8) tokens, so the short ones finish
// first; the others are cancelled then and end `cancelled` (a few may have
// finished on their own before the cancel reached them).
#include <CLI/CLI.hpp>
#include <condition_variable>
#include <cstdio>
#include <mutex>
#include <string>

#include "base/cli_checks.hpp"
#include "examples/example_util.hpp"

int main(int argc, char** argv) {
  using namespace conveyor;
  CLI::App app{"conveyor example: many requests, the first to finish wins"};
  std::string model_name;
  int n = 32;
  app.add_option("--model", model_name, "GGUF file, llama2.c checkpoint or dummy:NAME (default: the embedded tiny model)");
  app.add_option("--n", n, "requests to fire at once")->check(CLI::Range(1, 1024));
  if (auto code = conveyor::cli::parse_command_line(app, argc, argv)) return *code;
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // whole lines, also into a pipe: several threads print

  caf::actor_system_config cfg;
  add_engine_types(cfg);
  caf::actor_system sys{cfg};
  std::unique_ptr<Engine> engine = examples::start_engine(sys, model_name);
  if (!engine) return 1;
  const std::vector<int32_t> prompt = examples::prompt_ids(engine->model(), "Candidate answer:");

  std::mutex mutex;  // guards all below; the callbacks run on the requests' threads
  std::condition_variable cv;
  int ended = 0, completed = 0, cancelled = 0;
  int winner = -1;
  std::vector<RequestHandle> handles;
  std::unique_lock lock(mutex);  // no callback gets in before every request is submitted
  for (int i = 0; i < n; ++i) {
    RequestSpec spec;
    spec.request.prompt = prompt;
    spec.request.sampling.max_tokens = 16 + 8 * (i % 8);
    spec.request.sampling.seed = uint64_t(i);
    spec.request.sampling.has_seed = true;
    spec.request.sampling.ignore_eos = true;  // lengths as set, so the shortest wins
    handles.push_back(engine->submit(std::move(spec), [&, i](const StreamEvent& e) {
      if (!e.last()) return;
      std::lock_guard guard(mutex);
      if (winner < 0 && e.finish != FinishReason::cancelled) {
        winner = i;
        // The rest are no longer needed: cancel them now, from the winner's
        // callback (a request that has already ended ignores it).
        for (const RequestHandle& h : handles) h.cancel();
      }
      if (e.finish == FinishReason::cancelled) ++cancelled;
      else if (e.finish == FinishReason::stop || e.finish == FinishReason::length) ++completed;
      ++ended;
      cv.notify_all();
    }));
  }
  cv.wait(lock, [&] { return ended == n; });
  std::printf("%d requests, first to finish: #%d; %d completed, %d cancelled, %d failed\n", n, winner, completed,
              cancelled, n - completed - cancelled);
  return winner >= 0 ? 0 : 1;
}
