// Embedding conveyor: load a model, start the engine, stream one completion
// through a callback, and cancel another right after submitting it (it ends
// `cancelled`, usually before its first token).
//
//   build/examples/embed [MODEL]      (default: the embedded tiny model)
//
// MODEL must carry a tokenizer, which encodes the prompt: with one that has
// none, such as dummy:llama-15m, this program crashes.
#include <condition_variable>
#include <cstdio>
#include <mutex>

#include "actors/engine.hpp"

int main(int argc, char** argv) {
  using namespace conveyor;
  auto model = load_model(argc > 1 ? argv[1] : "");
  if (!model) {
    std::fprintf(stderr, "%s\n", model.error().message.c_str());
    return 1;
  }
  caf::actor_system_config cfg;
  add_engine_types(cfg);
  caf::actor_system sys{cfg};
  auto engine = Engine::create(sys, EngineConfig{}, std::move(model).value());
  if (!engine) {
    std::fprintf(stderr, "%s\n", engine.error().message.c_str());
    return 1;
  }

  std::mutex mutex;
  std::condition_variable cv;
  int finished = 0;
  auto on_event = [&](const char* tag) {
    return [&, tag](const StreamEvent& e) {
      std::lock_guard lock(mutex);
      if (!e.text.empty()) std::printf("[%s] %s\n", tag, e.text.c_str());
      if (e.last()) {
        std::printf("[%s] finished: %s, %d prompt + %d completion tokens\n", tag,
                    to_string(e.finish), e.prompt_tokens, e.completion_tokens);
        ++finished;
        cv.notify_all();
      }
    };
  };

  RequestSpec story;
  story.request.prompt = (*engine)->model().tokenizer->encode("Once upon a time", true);
  story.request.sampling.max_tokens = 32;
  story.request.sampling.seed = 1;
  story.request.sampling.has_seed = true;
  (*engine)->submit(story, on_event("story"));

  RequestSpec long_one = story;
  long_one.request.sampling.max_tokens = 1000;
  RequestHandle handle = (*engine)->submit(long_one, on_event("cancelled"));
  handle.cancel();

  std::unique_lock lock(mutex);
  cv.wait(lock, [&] { return finished == 2; });
  return 0;
}
