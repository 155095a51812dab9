// Fan-out and fan-in in one stage: one prompt goes to several samplers (the
// same request with different seeds, log-probabilities on), and only the
// best continuation, by cumulative log-probability, reaches the sink. Losers
// are cancelled as soon as they are out of the running, so the engine stops
// spending steps on them.
//
//   build-dir/examples/pipeline_best_of [--model MODEL] [--candidates K] [--checkpoint T]
//
// Two rules cancel losers:
//  - exact: each token adds log p <= 0, so a running candidate whose sum is
//    already below a finished candidate's total can never overtake it;
//  - halving (a heuristic, as beam search prunes): each time every running
//    candidate has T more tokens, the lower half by sum at that length is
//    cancelled.
// The winner is the finished candidate with the highest total. Its events
// are held until no other candidate can win; once it is the only one left
// they go on as they come.
//
// The log-probabilities are the model's own, before temperature (see
// model/sampling/sampler.hpp), of the tokens each candidate produced: the
// engine does not report the end token's, so a candidate that stops is
// scored without it. The embedded default model, with random
// weights, repeats the prompt's last character at temperature 1, so every
// candidate would say the same; this example samples at 3 by default.
#include <CLI/CLI.hpp>
#include <algorithm>
#include <cstdio>

#include "base/cli_checks.hpp"
#include "examples/example_util.hpp"

using namespace conveyor;

namespace {

class BestOf final : public StreamStage {
 public:
  BestOf(int candidates, int checkpoint) : count_(candidates), checkpoint_(checkpoint), next_check_(checkpoint) {}

  // Fan-out: the request once per candidate, seeds seed, seed + 1, ...
  void start(RequestSpec spec, StageContext& ctx) override {
    spec.request.sampling.logprobs = 0;  // the sampled token's log-probability, no alternatives
    const uint64_t seed = spec.request.sampling.has_seed ? spec.request.sampling.seed : 1;
    spec.request.sampling.has_seed = true;
    for (int i = 0; i < count_; ++i) {
      RequestSpec copy = spec;
      copy.request.sampling.seed = seed + uint64_t(i);
      Candidate& c = candidates_.emplace_back();
      c.index = i;
      c.id = ctx.submit(std::move(copy));
    }
  }

  // Fan-in.
  void on_event(const StreamEvent& e, StageContext& ctx) override {
    Candidate* c = find(e.id);
    if (c == nullptr) return;
    if (c->cancelled) return;  // a loser's last events
    for (size_t j = 0; j < e.token_ids.size(); ++j)
      c->sums.push_back(c->sum() + (j < e.logprobs.size() ? double(e.logprobs[j].logprob) : 0.0));
    if (e.last()) c->finish = e.finish;
    if (streaming_) {  // only the winner is left
      if (e.last()) summary();
      return ctx.emit(e);
    }
    c->held.push_back(e);
    cancel_losers(ctx);
    decide(ctx);
  }
  std::string name() const override { return "BestOf"; }

 private:
  struct Candidate {
    request_id id = 0;
    int index = 0;
    std::vector<double> sums;        // cumulative log-probability after each token
    std::vector<StreamEvent> held;   // not sent on yet
    FinishReason finish = FinishReason::none;
    bool cancelled = false;          // by this stage
    double sum() const { return sums.empty() ? 0.0 : sums.back(); }
    bool running() const { return finish == FinishReason::none && !cancelled; }
    bool completed() const { return finish == FinishReason::stop || finish == FinishReason::length; }
  };

  Candidate* find(request_id id) {
    for (Candidate& c : candidates_)
      if (c.id == id) return &c;
    return nullptr;
  }

  void cancel(Candidate& c, StageContext& ctx) {
    c.cancelled = true;
    c.held.clear();
    ctx.cancel(c.id);
  }

  const Candidate* best_completed() const {
    const Candidate* best = nullptr;
    for (const Candidate& c : candidates_)
      if (c.completed() && (best == nullptr || c.sum() > best->sum())) best = &c;
    return best;
  }

  void cancel_losers(StageContext& ctx) {
    if (const Candidate* best = best_completed()) {
      for (Candidate& c : candidates_) {
        if (!c.running() || c.sum() >= best->sum()) continue;
        std::printf("[best-of] cancel #%d: %.2f after %zu tokens is below #%d's total %.2f\n", c.index, c.sum(),
                    c.sums.size(), best->index, best->sum());
        cancel(c, ctx);
      }
    }
    for (;;) {
      std::vector<Candidate*> running;
      for (Candidate& c : candidates_)
        if (c.running()) running.push_back(&c);
      if (running.size() < 2) return;
      for (const Candidate* c : running)
        if (c->sums.size() < size_t(next_check_)) return;  // wait until all have reached it
      const size_t t = size_t(next_check_) - 1;
      std::stable_sort(running.begin(), running.end(),
                       [t](const Candidate* a, const Candidate* b) { return a->sums[t] > b->sums[t]; });
      const size_t keep = running.size() - running.size() / 2;
      std::string kept, dropped;
      for (size_t i = 0; i < running.size(); ++i) {
        char item[48];
        std::snprintf(item, sizeof item, " #%d %.2f", running[i]->index, running[i]->sums[t]);
        (i < keep ? kept : dropped) += item;
        if (i >= keep) cancel(*running[i], ctx);
      }
      std::printf("[best-of] after %d tokens: keep%s; cancel%s\n", next_check_, kept.c_str(), dropped.c_str());
      next_check_ += checkpoint_;
    }
  }

  // Sends the winner on once no other candidate can beat it.
  void decide(StageContext& ctx) {
    int running = 0;
    Candidate* last_running = nullptr;
    for (Candidate& c : candidates_)
      if (c.running()) ++running, last_running = &c;
    const Candidate* best = best_completed();
    if (running == 1 && best == nullptr) {
      winner_ = last_running->index;
      streaming_ = true;
      std::printf("[best-of] #%d is the only candidate left: its events go on as they come\n", winner_);
      release(*last_running, ctx);
      return;
    }
    if (running > 0) return;
    if (best != nullptr) {
      winner_ = best->index;
      return release(candidates_[size_t(best->index)], ctx);
    }
    // No candidate completed: the pipeline was cancelled, or they all failed.
    StreamEvent end;
    end.finish = FinishReason::cancelled;
    for (const Candidate& c : candidates_)
      if (c.finish == FinishReason::error) end = c.held.back();
    ctx.emit(std::move(end));
  }

  void release(Candidate& c, StageContext& ctx) {
    if (c.completed()) summary();
    for (StreamEvent& e : c.held) ctx.emit(std::move(e));
    c.held.clear();
  }

  void summary() const {
    for (const Candidate& c : candidates_)
      std::printf("[best-of] #%d: %s after %zu tokens, cumulative logprob %.2f%s\n", c.index,
                  c.cancelled ? "cancelled" : to_string(c.finish), c.sums.size(), c.sum(),
                  c.index == winner_ ? " (winner)" : "");
  }

  const int count_;
  const int checkpoint_;
  int next_check_;
  std::vector<Candidate> candidates_;
  int winner_ = -1;
  bool streaming_ = false;
};

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"conveyor example: best of K samples by cumulative log-probability"};
  std::string model_name;
  int candidates = 4, checkpoint = 8;
  float temperature = 3.0f;
  app.add_option("--model", model_name, "GGUF file, llama2.c checkpoint or dummy:NAME (default: the embedded tiny model)");
  app.add_option("--candidates", candidates, "samplers the prompt goes to")->check(CLI::Range(1, 64));
  app.add_option("--checkpoint", checkpoint, "tokens between halvings")->check(CLI::Range(1, 1000));
  app.add_option("--temperature", temperature, "sampling temperature (default 3: see above)")->check(conveyor::cli::finite_range(0, 100));
  if (auto code = conveyor::cli::parse_command_line(app, argc, argv)) return *code;
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // whole lines, also into a pipe: several threads print

  caf::actor_system_config cfg;
  add_engine_types(cfg);
  caf::actor_system sys{cfg};
  std::unique_ptr<Engine> engine = examples::start_engine(sys, model_name);
  if (!engine) return 1;
  const ModelInfo& model = engine->model();

  RequestSpec spec;
  spec.request.prompt = examples::prompt_ids(model, "The best answer is");
  spec.request.sampling.max_tokens = 32;
  spec.request.sampling.temperature = temperature;
  spec.request.sampling.seed = 100;
  spec.request.sampling.has_seed = true;

  Pipeline best_of(*engine);
  best_of.then<BestOf>(candidates, checkpoint);
  auto out = examples::run_and_wait(sys, best_of, spec, "winner", model);
  std::printf("the sink got %zu tokens of one candidate\n", out->token_ids.size());
  return out->last.finish == FinishReason::error ? 1 : 0;
}
