// spec_bench: speculative decoding (`--speculative ngram`) against plain
// decoding, the actor engine in-process on one model.
//
//   spec_bench [--model dummy:llama-110m] [--method ngram|suffix|draft:FILE] [--streams 1,32]
//              [--temperatures 0,1] [--tokens 256] [--prompt-len 32] [--spec-tokens 5]
//              [--disable-batch 4] [--waves 1] [--repeats 2] [--threads 0]
//              [--kv-cache-dtype auto|f32|f16|bf16|q8_0]
//
// For each number of streams and temperature: `repeats` pairs of runs, plain
// then speculative, each on a fresh engine: every stream gets its own random
// prompt of `prompt-len` tokens (BOS first) and generates `tokens` tokens
// (EOS ignored; at temperature > 0 seeded per stream and wave, so both runs
// sample the same ids). With --waves W the streams send their prompts W
// times, one wave after the other (an agent calling again: the suffix
// method finds the earlier waves' outputs). Printed per pair: generated tokens per second of each run
// and their ratio, the share of drafts accepted, and the tokens a verify
// step emitted on average. The streams' ids are compared between the two
// runs ("same" column): speculation must not change them.
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <optional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "actors/engine.hpp"
#include "bench/bench_util.hpp"
#include "tests/actors/engine_test_util.hpp"

namespace conveyor {
namespace {

struct Options {
  std::string model = "dummy:llama-110m";
  std::vector<int> streams = {1, 32};
  std::vector<double> temperatures = {0, 1};
  SpeculativeMethod method = SpeculativeMethod::ngram;
  std::string draft_model;  // --method draft:FILE
  int waves = 1;
  int tokens = 256, prompt_len = 32, spec_tokens = 5, disable_batch = 4, repeats = 2, threads = 0;
  std::optional<KvDtype> kv_cache_dtype;  // --kv-cache-dtype; the engine's default (auto) when unset
};

struct Run {
  double seconds = 0;
  uint64_t generated = 0;
  EngineStats stats;
  std::vector<std::vector<int32_t>> ids;
};

Run run(caf::actor_system& sys, const LoadedModel& model, const Options& o, int streams, double temperature,
        bool speculate) {
  EngineConfig config;
  config.threads = o.threads;
  config.kv_cache_dtype = o.kv_cache_dtype;
  config.max_num_seqs = std::max(streams, 1);
  config.kv_cache_tokens = int64_t(streams) * (o.prompt_len + o.tokens + 64);
  if (speculate) {
    config.speculative.method = o.method;
    config.speculative.draft_model = o.draft_model;
    config.speculative.num_tokens = o.spec_tokens;
    config.speculative.disable_batch = o.disable_batch;
  }
  auto engine = Engine::create(sys, config, model);
  if (!engine) {
    std::fprintf(stderr, "spec_bench: %s\n", engine.error().message.c_str());
    std::exit(1);
  }
  std::mt19937_64 rng(12345);
  std::vector<std::vector<int32_t>> prompts(size_t(streams), std::vector<int32_t>(size_t(o.prompt_len)));
  for (auto& prompt : prompts) {
    for (int32_t& t : prompt) t = 3 + int32_t(rng() % uint64_t(model.config.vocab_size - 3));
    prompt[0] = 1;
  }
  Run r;
  const auto t0 = std::chrono::steady_clock::now();
  for (int wave = 0; wave < o.waves; ++wave) {
    testing::Collector collector;
    for (int s = 0; s < streams; ++s) {
      RequestSpec spec = testing::greedy_spec(uint64_t(s) + 1, prompts[size_t(s)], o.tokens, /*ignore_eos=*/true);
      spec.request.sampling.temperature = float(temperature);
      spec.request.sampling.has_seed = true;
      spec.request.sampling.seed = uint64_t(s) * 7919 + uint64_t(wave) * 104729 + 1;
      (*engine)->submit(spec, collector.callback_for(uint64_t(s) + 1));
    }
    if (!collector.wait_for(size_t(streams), std::chrono::seconds(3600))) {
      std::fprintf(stderr, "spec_bench: timed out\n");
      std::exit(1);
    }
    for (const auto& [id, outcome] : collector.outcomes()) {
      r.generated += outcome.tokens.size();
      r.ids.push_back(outcome.tokens);
    }
  }
  r.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  r.stats = *(*engine)->stats();
  return r;
}

}  // namespace
}  // namespace conveyor

int main(int argc, char** argv) {
  using namespace conveyor;
  Options o;
  for (int i = 1; i < argc; ++i) {
    auto next = [&] {
      return i + 1 < argc ? argv[++i] : (std::fprintf(stderr, "%s needs a value\n", argv[i]), std::exit(2), "");
    };
    if (!std::strcmp(argv[i], "--model")) o.model = next();
    else if (!std::strcmp(argv[i], "--streams")) o.streams = parse_list<int>(next());
    else if (!std::strcmp(argv[i], "--method")) {
      auto m = parse_speculative(next());
      if (!m || m->method == SpeculativeMethod::none) {
        std::fprintf(stderr, "spec_bench: --method is ngram, suffix or draft:FILE\n");
        return 2;
      }
      o.method = m->method;
      o.draft_model = m->draft_model;
    } else if (!std::strcmp(argv[i], "--waves")) o.waves = std::atoi(next());
    else if (!std::strcmp(argv[i], "--temperatures")) o.temperatures = parse_list<double>(next());
    else if (!std::strcmp(argv[i], "--tokens")) o.tokens = std::atoi(next());
    else if (!std::strcmp(argv[i], "--prompt-len")) o.prompt_len = std::atoi(next());
    else if (!std::strcmp(argv[i], "--spec-tokens")) o.spec_tokens = std::atoi(next());
    else if (!std::strcmp(argv[i], "--disable-batch")) o.disable_batch = std::atoi(next());
    else if (!std::strcmp(argv[i], "--repeats")) o.repeats = std::atoi(next());
    else if (!std::strcmp(argv[i], "--threads")) o.threads = std::atoi(next());
    else if (!std::strcmp(argv[i], "--kv-cache-dtype")) {
      auto d = parse_kv_cache_dtype(next());
      if (!d) {
        std::fprintf(stderr, "--kv-cache-dtype: %s\n", d.error().message.c_str());
        return 2;
      }
      o.kv_cache_dtype = *d;
    }
    else {
      std::fprintf(stderr,
                   "usage: spec_bench [--model M] [--method ngram|suffix|draft:FILE] [--streams 1,32] [--temperatures 0,1] "
                   "[--tokens N] [--prompt-len N] [--spec-tokens N] [--disable-batch N] [--waves N] [--repeats N] "
                   "[--threads N] [--kv-cache-dtype auto|f32|f16|bf16|q8_0]\n");
      return 2;
    }
  }
  if (o.tokens < 1 || o.prompt_len < 2 || o.repeats < 1 || o.waves < 1 || o.streams.empty()) {
    std::fprintf(stderr, "spec_bench: counts must be positive (--prompt-len at least 2)\n");
    return 2;
  }
  auto loaded = load_model(o.model);
  if (!loaded) {
    std::fprintf(stderr, "spec_bench: %s\n", loaded.error().message.c_str());
    return 1;
  }
  const LoadedModel model = std::move(loaded).value();
  if (o.prompt_len + o.tokens > model.config.context_length) {
    std::fprintf(stderr, "spec_bench: --prompt-len + --tokens must fit the context (%d)\n",
                 model.config.context_length);
    return 2;
  }
  std::printf("model %s; %d-token prompts, %d new tokens, %d wave(s); %s, %d drafts at most, none past %d "
              "decoding; %u hardware threads\n",
              o.model.c_str(), o.prompt_len, o.tokens, o.waves, to_string(o.method), o.spec_tokens, o.disable_batch,
              std::thread::hardware_concurrency());
  std::printf("%8s %6s %12s %12s %8s %10s %12s %6s\n", "streams", "temp", "plain_tok/s", "spec_tok/s", "ratio",
              "accepted", "tok/verify", "same");
  testing::EngineSystemConfig cfg;
  caf::actor_system sys{cfg};
  for (int streams : o.streams) {
    for (double temperature : o.temperatures) {
      for (int rep = 0; rep < o.repeats; ++rep) {
        const Run plain = run(sys, model, o, streams, temperature, false);
        const Run spec = run(sys, model, o, streams, temperature, true);
        const double plain_tps = double(plain.generated) / plain.seconds;
        const double spec_tps = double(spec.generated) / spec.seconds;
        const EngineStats& s = spec.stats;
        const double accepted = s.spec_draft_tokens ? double(s.spec_accepted_tokens) / double(s.spec_draft_tokens) : 0;
        const double per_verify = s.spec_drafts ? 1.0 + double(s.spec_accepted_tokens) / double(s.spec_drafts) : 0;
        std::printf("%8d %6.2f %12.1f %12.1f %8.2f %10.2f %12.2f %6s\n", streams, temperature, plain_tps, spec_tps,
                    spec_tps / plain_tps, accepted, per_verify, plain.ids == spec.ids ? "yes" : "NO");
        std::fflush(stdout);
      }
    }
  }
  return 0;
}
