// Basics: the engine inside your own program. Start it, stream one request's
// text through a callback, cancel a second request half-way through (after
// it has produced some tokens), then read the engine's statistics.
//
//   build-dir/examples/basics [--model MODEL]   (default: the embedded tiny model)
//
// Callbacks run on the engine's actor threads, one request's events in
// order; main() waits on a condition variable. See examples/README.md for
// the output.
#include <CLI/CLI.hpp>
#include <condition_variable>
#include <cstdio>
#include <mutex>

#include "base/cli_checks.hpp"
#include "examples/example_util.hpp"

using namespace conveyor;
using conveyor::examples::shown;

namespace {

// What main() waits on: token counts and ends, shared with the callbacks.
struct Progress {
  std::mutex mutex;
  std::condition_variable changed;
  int long_tokens = 0;
  int finished = 0;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"conveyor example: stream, cancel, stats"};
  std::string model_name;
  int cancel_after = 8;
  app.add_option("--model", model_name, "GGUF file, llama2.c checkpoint or dummy:NAME (default: the embedded tiny model)");
  app.add_option("--cancel-after", cancel_after, "tokens the second request produces before it is cancelled")
      ->check(CLI::Range(1, 300));
  if (auto code = conveyor::cli::parse_command_line(app, argc, argv)) return *code;
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // whole lines, also into a pipe: several threads print

  // 1. An actor system set up for the engine's messages, and the engine.
  caf::actor_system_config cfg;
  add_engine_types(cfg);
  caf::actor_system sys{cfg};
  std::unique_ptr<Engine> engine = examples::start_engine(sys, model_name);
  if (!engine) return 1;
  const ModelInfo& model = engine->model();

  RequestSpec story;
  story.request.prompt = examples::prompt_ids(model, "Once upon a time");
  story.request.sampling.max_tokens = 24;
  story.request.sampling.seed = 1;
  story.request.sampling.has_seed = true;
  std::printf("prompt: %zu tokens\n", story.request.prompt.size());

  Progress progress;  // its mutex also keeps the two callbacks' lines apart

  // 2. Stream: each event carries the text produced since the last one (whole
  //    UTF-8 characters); the last event has finish != none and the counts.
  int story_events = 0;
  engine->submit(story, [&](const StreamEvent& e) {
    std::lock_guard lock(progress.mutex);
    if (!e.text.empty() || !e.token_ids.empty()) {
      ++story_events;
      std::printf("[story] \"%s\"\n", shown(e, model).c_str());
    }
    if (e.last()) {
      std::printf("[story] finished: %s after %d tokens, %d events with output\n", to_string(e.finish),
                  e.completion_tokens, story_events);
      ++progress.finished;
      progress.changed.notify_all();
    }
  });

  // 3. Cancel half-way: a long request (it cannot end on its own before 400
  //    tokens) is cancelled once it has produced `cancel_after` tokens, from
  //    inside its own callback, so however fast the model is the cancel goes
  //    out at that token. The engine plans a step ahead, so a token or two
  //    more may still come; then the last event says `cancelled`.
  RequestSpec long_one = story;
  long_one.request.sampling.max_tokens = 400;
  long_one.request.sampling.ignore_eos = true;
  RequestHandle long_handle;  // read by the callback: set under the mutex
  bool cancel_sent = false;
  {
    std::lock_guard plock(progress.mutex);
    long_handle = engine->submit(long_one, [&](const StreamEvent& e) {
      std::lock_guard lock(progress.mutex);
      progress.long_tokens += int(e.token_ids.size());
      if (!cancel_sent && progress.long_tokens >= cancel_after) {
        long_handle.cancel();
        cancel_sent = true;
        std::printf("[long] cancel sent after %d tokens\n", progress.long_tokens);
      }
      if (e.last()) {
        std::printf("[long] finished: %s after %d of at most %d tokens\n", to_string(e.finish), e.completion_tokens,
                    long_one.request.sampling.max_tokens);
        ++progress.finished;
        progress.changed.notify_all();
      }
    });
  }
  {
    std::unique_lock plock(progress.mutex);
    progress.changed.wait(plock, [&] { return progress.finished == 2; });
  }

  // 4. Statistics: a blocking call (fine on main(); never call it on an actor thread).
  auto stats = engine->stats();
  if (!stats) {
    std::fprintf(stderr, "stats: %s\n", stats.error().message.c_str());
    return 1;
  }
  std::printf("stats: iterations=%llu prompt_tokens=%llu generated_tokens=%llu running=%d waiting=%d "
              "kv_blocks_used=%d/%d prefix_cache_hit_tokens=%llu\n",
              (unsigned long long)stats->iterations, (unsigned long long)stats->prompt_tokens,
              (unsigned long long)stats->generated_tokens, stats->num_running, stats->num_waiting,
              stats->blocks.used, stats->blocks.total, (unsigned long long)stats->blocks.prefix_hit_tokens);
  return 0;
}
