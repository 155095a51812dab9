// A two-stage chain: the first request's output becomes the second request's
// prompt inside the pipeline, with no round trip through the client. The
// sink, a typed actor written here, sees both requests' text as one stream.
//
//   build-dir/examples/pipeline_chain [--model MODEL] [--tokens N]
//
// The FollowUp stage submits the first request, passes its text on, and when
// it ends normally submits the second: `prefix` followed by the first
// request's tokens (token ids, so nothing is lost to detokenizing and
// re-encoding). A first request cancelled or failed ends the chain there.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "base/cli_checks.hpp"
#include "examples/example_util.hpp"

using namespace conveyor;

namespace {

class FollowUp final : public StreamStage {
 public:
  FollowUp(std::vector<int32_t> prefix, int32_t max_tokens) : prefix_(std::move(prefix)), max_tokens_(max_tokens) {}

  void start(RequestSpec spec, StageContext& ctx) override {
    second_ = spec;  // the same sampling settings for the second request
    first_id_ = ctx.submit(std::move(spec));
  }

  void on_event(const StreamEvent& e, StageContext& ctx) override {
    if (e.id != first_id_) return ctx.emit(e);  // the second request: its events as they are
    output_.insert(output_.end(), e.token_ids.begin(), e.token_ids.end());
    const bool ok = e.finish == FinishReason::stop || e.finish == FinishReason::length;
    if (!ok) return ctx.emit(e);  // still running, or cancelled/failed: then the chain ends here
    StreamEvent passed = e;
    passed.finish = FinishReason::none;  // the stream goes on with the second request
    ctx.emit(std::move(passed));
    second_.request.prompt = prefix_;
    second_.request.prompt.insert(second_.request.prompt.end(), output_.begin(), output_.end());
    second_.request.sampling.max_tokens = max_tokens_;
    std::printf("[chain] first request %s after %d tokens; second prompt: %zu prefix + %zu output = %zu tokens\n",
                to_string(e.finish), e.completion_tokens, prefix_.size(), output_.size(),
                second_.request.prompt.size());
    ctx.submit(second_);
  }
  std::string name() const override { return "FollowUp"; }

 private:
  std::vector<int32_t> prefix_;
  int32_t max_tokens_;
  RequestSpec second_;
  request_id first_id_ = 0;
  std::vector<int32_t> output_;
};

// The sink: a typed actor of ours. It tells the two requests apart by id
// (the first id it sees is the first request's) and ends after the last event.
struct ChainTotals {
  int first_tokens = 0;
  int second_tokens = 0;
  StreamEvent last;
};

struct ChainSinkState {
  request_id first = 0;
};

stream_sink::behavior_type chain_sink(stream_sink::stateful_pointer<ChainSinkState> self, const ModelInfo* model,
                                      std::shared_ptr<ChainTotals> totals) {
  return {
      [=](const StreamEvent& e) {
        if (self->state.first == 0) self->state.first = e.id;
        const bool first = e.id == self->state.first;
        (first ? totals->first_tokens : totals->second_tokens) += int(e.token_ids.size());
        if (!e.token_ids.empty())
          std::printf("[%s] \"%s\"\n", first ? "first" : "second", examples::shown(e, *model).c_str());
        if (!e.last()) return;
        totals->last = e;
        std::printf("[%s] finished: %s after %d tokens, prompt %d tokens%s%s\n", first ? "first" : "second",
                    to_string(e.finish), e.completion_tokens, e.prompt_tokens, e.message.empty() ? "" : ": ",
                    e.message.c_str());
        self->quit();
      },
  };
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"conveyor example: one request's output is the next one's prompt"};
  std::string model_name;
  int tokens = 24;
  app.add_option("--model", model_name, "GGUF file, llama2.c checkpoint or dummy:NAME (default: the embedded tiny model)");
  app.add_option("--tokens", tokens, "tokens each request generates")->check(CLI::Range(1, 100));
  if (auto code = conveyor::cli::parse_command_line(app, argc, argv)) return *code;
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // whole lines, also into a pipe: several threads print

  caf::actor_system_config cfg;
  add_engine_types(cfg);
  caf::actor_system sys{cfg};
  std::unique_ptr<Engine> engine = examples::start_engine(sys, model_name);
  if (!engine) return 1;
  const ModelInfo& model = engine->model();

  RequestSpec spec;
  spec.request.prompt = examples::prompt_ids(model, "Write a line of a poem:");
  spec.request.sampling.max_tokens = tokens;
  spec.request.sampling.seed = 3;
  spec.request.sampling.has_seed = true;

  Pipeline chain(*engine);
  chain.then<FollowUp>(examples::prompt_ids(model, "Now say it again:"), int32_t(tokens));

  auto totals = std::make_shared<ChainTotals>();
  auto sink = sys.spawn(chain_sink, &model, totals);
  chain.run(spec, sink);
  caf::scoped_actor self{sys};
  self->wait_for(sink);
  std::printf("the sink got %d tokens of the first request and %d of the second\n", totals->first_tokens,
              totals->second_tokens);
  return totals->last.finish == FinishReason::error ? 1 : 0;
}
