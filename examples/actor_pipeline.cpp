// Composing actors around the engine: a "summarizer" actor of our own
// receives StreamEvents as messages, counts tokens per request, and when the
// first request finishes it submits a follow-up whose prompt is the first
// request's output: a two-stage pipeline with no threads or callbacks of ours.
//
//   build/examples/actor_pipeline [MODEL]
#include <cstdio>

#include "actors/engine.hpp"

using namespace conveyor;

struct pipeline_state {
  pipeline_state() = default;
  Engine* engine = nullptr;
  std::vector<int32_t> first_output;
  int stage = 0;
};

caf::behavior pipeline(caf::stateful_actor<pipeline_state>* self, Engine* engine) {
  self->state.engine = engine;
  return {
      [self](const StreamEvent& e) {
        auto& st = self->state;
        if (st.stage == 0) st.first_output.insert(st.first_output.end(), e.token_ids.begin(), e.token_ids.end());
        std::printf("stage %d: %s", st.stage, e.text.c_str());
        if (!e.last()) return;
        std::printf("\nstage %d finished (%s)\n", st.stage, to_string(e.finish));
        if (++st.stage == 2) {
          self->quit();
          return;
        }
        RequestSpec next;
        next.request.prompt = {st.engine->model().tokenizer->bos_id()};
        next.request.prompt.insert(next.request.prompt.end(), st.first_output.begin(), st.first_output.end());
        next.request.sampling.max_tokens = 16;
        st.engine->submit(std::move(next), caf::actor{self});
      },
  };
}

int main(int argc, char** argv) {
  auto model = load_model(argc > 1 ? argv[1] : "");
  if (!model) {
    std::fprintf(stderr, "%s\n", model.error().message.c_str());
    return 1;
  }
  caf::actor_system_config cfg;
  add_engine_types(cfg);
  caf::actor_system sys{cfg};
  auto engine = Engine::create(sys, EngineConfig{}, std::move(model).value());
  if (!engine) return 1;
  auto stage = sys.spawn(pipeline, engine->get());
  RequestSpec first;
  first.request.prompt = (*engine)->model().tokenizer->encode("The cat", true);
  first.request.sampling.max_tokens = 16;
  (*engine)->submit(std::move(first), stage);
  caf::scoped_actor self{sys};
  self->wait_for(stage);
  return 0;
}
