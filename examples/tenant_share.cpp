// Tenant share: an admission policy of your own, plugged into the engine.
// Two tenants share a small KV cache: alice sends 8 requests at once, bob 4
// just after. The policy (examples/tenant_share_policy.hpp, written against
// conveyor's public headers only) lets no tenant start work that would take
// it past --share of the cache, so bob's requests start beside alice's
// instead of waiting for hers to end. The same requests run twice: with the
// cap (registered by name, "tenant-share", and named in the EngineConfig, as
// `conveyor serve --admission tenant-share` would do in a program that
// registers it), and with a share of 1 (no cap, plugged in by handle), for
// comparison.
//
//   build-dir/examples/tenant_share [--model MODEL] [--share 0.5]
//
// Prints, per run and tenant: the most KV blocks its requests held at once
// (and the share of the cache), counted from the stream: a request holds
// its prompt and the tokens it has produced so far, from its first token to
// its last; and the tenant's mean time to first token.
#include <CLI/CLI.hpp>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <map>
#include <mutex>

#include "actors/policy_registry.hpp"
#include "base/cli_checks.hpp"
#include "examples/example_util.hpp"
#include "examples/tenant_share_policy.hpp"

using namespace conveyor;
using examples::TenantShare;
using clock_type = std::chrono::steady_clock;

namespace {

struct Progress {
  std::mutex mutex;
  std::condition_variable changed;
  int finished = 0;
  int failed = 0;
  std::map<std::string, std::vector<double>> first_token_seconds;  // by tenant
  std::map<std::string, int32_t> held, peak;                      // blocks, by tenant
};

// Runs alice's 8 and bob's 4 requests on `engine`; true when all ended normally.
bool run_tenants(Engine& engine, Progress& progress) {
  const ModelInfo& model = engine.model();
  const auto start = clock_type::now();
  int submitted = 0;
  for (const auto& [tenant, count] : {std::pair<std::string, int>{"alice", 8}, {"bob", 4}}) {
    for (int i = 0; i < count; ++i) {
      RequestSpec spec;
      spec.request.prompt = examples::prompt_ids(model, "Once upon a time");
      spec.request.tenant = tenant;
      spec.request.sampling.temperature = 0;
      spec.request.sampling.max_tokens = 48;
      spec.request.sampling.ignore_eos = true;
      // The request's tokens so far and the blocks they fill.
      struct Held {
        int32_t tokens = 0, blocks = 0;
      };
      auto held = std::make_shared<Held>(Held{int32_t(spec.request.prompt.size()), 0});
      const int32_t block_size = engine.config().block_size;
      engine.submit(spec, [&progress, tenant, start, held, block_size](const StreamEvent& e) {
        std::lock_guard lock(progress.mutex);
        if (!e.token_ids.empty()) {
          if (held->blocks == 0)
            progress.first_token_seconds[tenant].push_back(
                std::chrono::duration<double>(clock_type::now() - start).count());
          held->tokens += int32_t(e.token_ids.size());
          const int32_t blocks = (held->tokens + block_size - 1) / block_size;
          progress.held[tenant] += blocks - held->blocks;
          held->blocks = blocks;
          progress.peak[tenant] = std::max(progress.peak[tenant], progress.held[tenant]);
        }
        if (e.last()) {
          progress.held[tenant] -= held->blocks;
          if (e.finish != FinishReason::length) {
            ++progress.failed;
            std::printf("[%s] ended: %s %s\n", tenant.c_str(), to_string(e.finish), e.message.c_str());
          }
          ++progress.finished;
          progress.changed.notify_all();
        }
      });
      ++submitted;
    }
  }
  std::unique_lock lock(progress.mutex);
  progress.changed.wait(lock, [&] { return progress.finished == submitted; });
  return progress.failed == 0;
}

void report(const char* run, const Engine& engine, const Progress& progress) {
  for (const auto& [tenant, blocks] : progress.peak) {
    const auto& ttft = progress.first_token_seconds.at(tenant);
    double sum = 0;
    for (double t : ttft) sum += t;
    std::printf("%s: %s peak %d of %d blocks (%.0f%%), mean time to first token %.1f ms over %zu requests\n", run,
                tenant.c_str(), blocks, engine.num_blocks(), 100.0 * blocks / engine.num_blocks(),
                1e3 * sum / double(ttft.size()), ttft.size());
  }
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"conveyor example: an admission policy that caps each tenant's share of the KV cache"};
  std::string model_name;
  double share = 0.5;
  app.add_option("--model", model_name, "GGUF file, llama2.c checkpoint or dummy:NAME (default: the embedded tiny model)");
  app.add_option("--share", share, "the share of the KV cache each tenant may hold")->check(conveyor::cli::finite_range(0.05, 1));
  if (auto code = conveyor::cli::parse_command_line(app, argc, argv)) return *code;
  std::setvbuf(stdout, nullptr, _IOLBF, 0);

  caf::actor_system_config cfg;
  add_engine_types(cfg);
  caf::actor_system sys{cfg};

  // 1. With the cap: registered by name before the engine is created, and
  //    named in its config. The factory gives each engine a fresh actor.
  Status registered =
      register_admission_policy("tenant-share", [share](caf::actor_system& sys, const EngineConfig&) {
        return sys.spawn(examples::tenant_share_policy, TenantShare{share});
      });
  if (!registered) {
    std::fprintf(stderr, "%s\n", registered.error().message.c_str());
    return 1;
  }
  // 512 tokens: 32 blocks; each request may grow to 4 (its prompt and 48
  // tokens), so alice's 8 alone could fill the cache.
  constexpr int64_t kKvTokens = 512;
  bool ok = true;
  {
    auto loaded = load_model(model_name);
    if (!loaded) {
      std::fprintf(stderr, "cannot load the model: %s\n", loaded.error().message.c_str());
      return 1;
    }
    std::printf("model: %s\n", loaded->source.c_str());
    EngineConfig config;
    config.kv_cache_tokens = kKvTokens;
    config.admission_policy = "tenant-share";
    auto engine = Engine::create(sys, config, std::move(loaded).value());
    if (!engine) {
      std::fprintf(stderr, "cannot start the engine: %s\n", engine.error().message.c_str());
      return 1;
    }
    Progress progress;
    ok = run_tenants(**engine, progress) && ok;
    char label[32];
    std::snprintf(label, sizeof label, "share %.2f", share);
    report(label, **engine, progress);
  }

  // 2. No cap (a share of 1), plugged in by handle into a running engine.
  {
    std::unique_ptr<Engine> engine = examples::start_engine(sys, model_name, kKvTokens);
    if (!engine) return 1;
    if (Status s = engine->set_admission_policy(sys.spawn(examples::tenant_share_policy, TenantShare{1.0})); !s) {
      std::fprintf(stderr, "%s\n", s.error().message.c_str());
      return 1;
    }
    Progress progress;
    ok = run_tenants(*engine, progress) && ok;
    report("no cap", *engine, progress);
  }
  std::printf("%s\n", ok ? "all 24 requests completed" : "some requests failed");
  return ok ? 0 : 1;
}
