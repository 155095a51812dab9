#include "tests/http/test_server.hpp"

#include <condition_variable>
#include <mutex>
#include <stdexcept>

#include "actors/engine.hpp"
#include "http/engine_port.hpp"
#include "http/server.hpp"

namespace conveyor::http::testing {

EngineConfig small_engine() {
  EngineConfig c;
  c.block_size = 16;
  c.kv_cache_tokens = 8192;
  c.max_waiting = 256;
  c.threads = 1;
  return c;
}

struct TestServer::Impl {
  struct Config : caf::actor_system_config {
    Config() {
      add_engine_types(*this);
      set("scheduler.max-threads", 2);
    }
  };
  // Destroyed bottom-up: the server, the port, the engine, then the actors.
  Config cfg;
  caf::actor_system sys{cfg};
  std::unique_ptr<Engine> engine;
  std::unique_ptr<EnginePort> port;
  std::unique_ptr<Server> server;
  uint16_t bound = 0;
};

namespace {
LoadedModel embedded_model() {
  auto model = load_model("");
  if (!model) throw std::runtime_error(model.error().message);
  return std::move(model).value();
}
}  // namespace

TestServer::TestServer(EngineConfig engine_config, ServerOptions options)
    : TestServer(embedded_model(), std::move(engine_config), std::move(options)) {}

TestServer::TestServer(LoadedModel model, EngineConfig engine_config, ServerOptions options)
    : impl_(std::make_unique<Impl>()) {
  const ModelConfig config = model.config;
  const std::string gguf_template = model.chat_template;
  auto engine = Engine::create(impl_->sys, engine_config, std::move(model));
  if (!engine) throw std::runtime_error(engine.error().message);
  impl_->engine = std::move(engine).value();
  impl_->port = std::make_unique<EnginePort>(*impl_->engine);
  options.host = "127.0.0.1";
  options.port = 0;
  auto context = make_model_context(config, impl_->port->tokenizer(), "", options.chat_template, gguf_template,
                                    options.tool_call_parser);
  if (!context) throw std::runtime_error(context.error().message);
  impl_->server = std::make_unique<Server>(*impl_->port, options, std::move(context).value());
  auto bound = impl_->server->start();
  if (!bound) throw std::runtime_error(bound.error().message);
  impl_->bound = *bound;
}

TestServer::~TestServer() = default;

uint16_t TestServer::port() const { return impl_->bound; }
const std::string& TestServer::model_name() const { return impl_->server->model().served_name; }
int32_t TestServer::context_length() const { return impl_->server->model().config.context_length; }
Expected<uint16_t> TestServer::start_again() { return impl_->server->start(); }

void TestServer::stop() { impl_->server->stop(); }
Status TestServer::reload_api_keys() { return impl_->server->reload_api_keys(); }

std::vector<int32_t> TestServer::encode(const std::string& text) const {
  return impl_->server->model().tokenizer->encode(text, /*add_bos=*/true);
}

std::vector<int32_t> TestServer::engine_greedy(const std::vector<int32_t>& prompt, int32_t max_tokens,
                                               bool ignore_eos) {
  struct Wait {  // shared: the callback may outlive a wait that timed out
    std::mutex mutex;
    std::condition_variable cv;
    std::vector<int32_t> tokens;
    bool done = false;
  };
  auto wait = std::make_shared<Wait>();
  RequestSpec spec;
  spec.request.prompt = prompt;
  spec.request.sampling.temperature = 0;
  spec.request.sampling.max_tokens = max_tokens;
  spec.request.sampling.ignore_eos = ignore_eos;
  impl_->engine->submit(std::move(spec), [wait](const StreamEvent& e) {
    std::lock_guard lock(wait->mutex);
    wait->tokens.insert(wait->tokens.end(), e.token_ids.begin(), e.token_ids.end());
    if (e.last()) {
      wait->done = true;
      wait->cv.notify_all();
    }
  });
  std::unique_lock lock(wait->mutex);
  wait->cv.wait_for(lock, std::chrono::seconds(30), [&] { return wait->done; });
  return wait->tokens;
}

}  // namespace conveyor::http::testing
