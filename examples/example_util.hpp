// What the examples share: starting an engine on --model, prompts for models
// with or without a tokenizer, and printing generated text (which, from the
// embedded default model's random weights, is arbitrary bytes).
#pragma once

#include <cstdio>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "actors/engine.hpp"
#include "actors/pipeline.hpp"
#include "examples/printable.hpp"

namespace conveyor::examples {

// Loads `model` ("" = the embedded default) and starts an engine on it, with
// a KV cache of `kv_tokens` tokens (the default, 0, sizes it by the memory
// available: more than an example needs). Prints the reason and returns null
// on failure.
inline std::unique_ptr<Engine> start_engine(caf::actor_system& sys, const std::string& model,
                                            int64_t kv_tokens = 16384) {
  auto loaded = load_model(model);
  if (!loaded) {
    std::fprintf(stderr, "cannot load the model: %s\n", loaded.error().message.c_str());
    return nullptr;
  }
  std::printf("model: %s (vocabulary %d, context %d, %s)\n", loaded->source.c_str(), loaded->config.vocab_size,
              loaded->config.context_length, loaded->tokenizer ? "with a tokenizer" : "no tokenizer");
  EngineConfig config;
  config.kv_cache_tokens = kv_tokens;
  auto engine = Engine::create(sys, config, std::move(loaded).value());
  if (!engine) {
    std::fprintf(stderr, "cannot start the engine: %s\n", engine.error().message.c_str());
    return nullptr;
  }
  return std::move(engine).value();
}

// The prompt's token ids: the tokenizer's (with BOS where the model wants
// one). A model without a tokenizer (dummy:llama-15m, a llama2.c checkpoint
// loaded without its tokenizer file) cannot read text: then the text's bytes,
// each taken modulo the vocabulary size, stand in as ids, and a note says so.
inline std::vector<int32_t> prompt_ids(const ModelInfo& model, std::string_view text) {
  if (model.tokenizer) return model.tokenizer->encode(text, true);
  std::vector<int32_t> ids;
  for (unsigned char c : text) ids.push_back(int32_t(c) % model.config.vocab_size);
  std::fprintf(stderr, "note: the model has no tokenizer; the prompt \"%.*s\" goes as %zu token ids (its bytes)\n",
               int(text.size()), text.data(), ids.size());
  return ids;
}

// What an event carries, for printing: its text, or its token ids when the
// model has no tokenizer (events then carry ids only).
inline std::string shown(const StreamEvent& e, const ModelInfo& model) {
  if (model.tokenizer) return printable(e.text);
  std::string out;
  for (int32_t id : e.token_ids) out += (out.empty() ? "[" : " [") + std::to_string(id) + "]";
  return out;
}

// What a printing sink saw; read it after the sink's actor has ended.
struct Collected {
  std::string text;
  std::vector<int32_t> token_ids;
  int events = 0;        // events that carried text or tokens
  StreamEvent last;      // the stream's last event
};

// A sink of ours: a typed actor (stream_sink) that collects the events into
// `out`, prints them as `[tag] "text"` (each as it comes, or all on one line
// at the end) and ends after the last one.
inline stream_sink::behavior_type printing_sink(stream_sink::pointer self, std::string tag, const ModelInfo* model,
                                                std::shared_ptr<Collected> out, bool each_event = true) {
  return {
      [=](const StreamEvent& e) {
        if (!e.text.empty() || !e.token_ids.empty()) {
          ++out->events;
          if (each_event) std::printf("[%s] \"%s\"\n", tag.c_str(), shown(e, *model).c_str());
        }
        out->text += e.text;
        out->token_ids.insert(out->token_ids.end(), e.token_ids.begin(), e.token_ids.end());
        if (!e.last()) return;
        out->last = e;
        if (!each_event) {
          StreamEvent all;
          all.text = out->text;
          all.token_ids = out->token_ids;
          std::printf("[%s] \"%s\"\n", tag.c_str(), shown(all, *model).c_str());
        }
        std::printf("[%s] finished: %s after %d tokens%s%s\n", tag.c_str(), to_string(e.finish), e.completion_tokens,
                    e.message.empty() ? "" : ": ", e.message.c_str());
        self->quit();
      },
  };
}

// Runs `pipeline` on `spec` into a printing sink and waits for its last event.
inline std::shared_ptr<Collected> run_and_wait(caf::actor_system& sys, const Pipeline& pipeline, RequestSpec spec,
                                               const std::string& tag, const ModelInfo& model,
                                               bool each_event = true) {
  auto out = std::make_shared<Collected>();
  auto sink = sys.spawn(printing_sink, tag, &model, out, each_event);
  pipeline.run(std::move(spec), sink);
  caf::scoped_actor self{sys};
  self->wait_for(sink);
  return out;
}

}  // namespace conveyor::examples
