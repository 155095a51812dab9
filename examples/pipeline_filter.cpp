// Filter stages: rules on the text as it streams, in actors of their own
// between the engine and a sink (actors/pipeline.hpp).
//
//   StopAt  ends the stream at the first stop phrase; the Pipeline then
//           cancels the request, so the engine stops generating.
//   Redact  masks words wherever they appear, even split across events.
// Everything else passes through unchanged.
//
//   build-dir/examples/pipeline_filter [--model MODEL] [--stop PHRASE] [--redact WORD]
//
// The engine has stop strings of its own (RequestSpec::stop); StopAt shows
// how any stage ends a stream early. The embedded default model has random
// weights, so no phrase given in advance would ever appear in its output
// (at temperature 1 it repeats the prompt's last character; this example
// samples at 3 for varied text). Without --stop/--redact the program first
// runs the request unfiltered and picks both from that text, then runs it
// again (same seed: same tokens) through the stages and checks the result
// against the unfiltered text.
#include <CLI/CLI.hpp>
#include <cstdio>

#include "base/cli_checks.hpp"
#include "actors/stream_actor.hpp"
#include "examples/example_util.hpp"

using namespace conveyor;

namespace {

class StopAt final : public StreamStage {
 public:
  explicit StopAt(std::vector<std::string> phrases) : matcher_(std::move(phrases)) {}

  void on_event(const StreamEvent& event, StageContext& ctx) override {
    StreamEvent out = event;
    tokens_ += int32_t(event.token_ids.size());
    out.text = matcher_.push(event.text);  // holds back a tail that may begin a phrase
    if (matcher_.stopped()) {
      out.finish = FinishReason::stop;      // our last event: the Pipeline cancels the request
      out.completion_tokens = tokens_;
    } else if (event.last()) {
      out.text += matcher_.flush();
    }
    ctx.emit(std::move(out));
  }
  std::string name() const override { return "StopAt"; }

 private:
  StopMatcher matcher_;  // the stream actor's own matcher (actors/stream_actor.hpp)
  int32_t tokens_ = 0;
};

class Redact final : public StreamStage {
 public:
  Redact(std::vector<std::string> words, std::string mask) : words_(std::move(words)), mask_(std::move(mask)) {
    std::erase_if(words_, [](const std::string& w) { return w.empty(); });
  }

  void on_event(const StreamEvent& event, StageContext& ctx) override {
    pending_ += event.text;
    StreamEvent out = event;
    out.text = take_ready(event.last());
    // Token ids and logprobs would spell out what was masked.
    out.token_ids.clear();
    out.logprobs.clear();
    if (!out.text.empty() || out.last()) ctx.emit(std::move(out));
  }
  std::string name() const override { return "Redact"; }

 private:
  // Masks every whole word in pending_ and returns what is safe to send: all
  // of it at the end, else all but a tail that may begin a word.
  std::string take_ready(bool at_end) {
    std::string ready;
    size_t i = 0;
    for (;;) {
      size_t at = std::string::npos, len = 0;
      for (const std::string& w : words_) {
        const size_t p = pending_.find(w, i);
        if (p < at || (p == at && w.size() > len)) at = p, len = w.size();
      }
      if (at == std::string::npos) break;
      ready.append(pending_, i, at - i).append(mask_);
      i = at + len;
    }
    size_t keep = 0;
    if (!at_end) {
      for (const std::string& w : words_)
        for (size_t k = std::min(w.size() - 1, pending_.size() - i); k > keep; --k)
          if (pending_.compare(pending_.size() - k, k, w, 0, k) == 0) keep = k;
    }
    ready.append(pending_, i, pending_.size() - i - keep);
    pending_.erase(0, pending_.size() - keep);
    return ready;
  }

  std::vector<std::string> words_;
  std::string mask_;
  std::string pending_;
};

bool starts_char(const std::string& text, size_t i) { return (static_cast<unsigned char>(text[i]) & 0xC0) != 0x80; }

// UTF-8: `n` whole characters of `text` from byte `from` (a character's start) on.
std::string chars_at(const std::string& text, size_t from, int n) {
  size_t end = from;
  for (int c = 0; c < n && end < text.size(); ++c) {
    ++end;
    while (end < text.size() && !starts_char(text, end)) ++end;
  }
  return text.substr(from, end - from);
}

// A stop phrase for the demo: the shortest run of one to four characters
// that starts in the second half of `text` and appears there for the first
// time, so that it cuts the text there and not before; "" if the text only
// repeats itself.
std::string pick_stop(const std::string& text) {
  for (size_t p = text.size() / 2; p < text.size(); ++p) {
    if (!starts_char(text, p)) continue;
    for (int n = 1; n <= 4; ++n)
      if (const std::string s = chars_at(text, p, n); text.find(s) == p) return s;
  }
  return "";
}

// A word to mask: the most frequent printable ASCII character of `text`
// (else its first character).
std::string pick_word(const std::string& text) {
  int count[128] = {};
  char best = 0;
  for (unsigned char c : text)
    if (c > 0x20 && c < 0x7f && ++count[c] > count[static_cast<unsigned char>(best)]) best = char(c);
  return best != 0 ? std::string(1, best) : chars_at(text, 0, 1);
}

// What the stages should produce, computed on the whole text at once.
std::string expected_output(std::string text, const std::string& stop, const std::string& word,
                            const std::string& mask, int& masked) {
  if (const size_t p = text.find(stop); !stop.empty() && p != std::string::npos) text.resize(p);
  masked = 0;
  if (word.empty()) return text;
  std::string out;
  size_t i = 0;
  for (size_t p; (p = text.find(word, i)) != std::string::npos; i = p + word.size(), ++masked)
    out.append(text, i, p - i).append(mask);
  return out.append(text, i);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"conveyor example: filter stages (stop phrase, redaction)"};
  std::string model_name, stop, word;
  float temperature = 3.0f;
  const std::string mask = "*";
  app.add_option("--model", model_name, "GGUF file, llama2.c checkpoint or dummy:NAME (default: the embedded tiny model)");
  app.add_option("--stop", stop, "stop phrase (default: picked from the unfiltered output)");
  app.add_option("--redact", word, "word to mask (default: picked from the unfiltered output)");
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
  spec.request.prompt = examples::prompt_ids(model, "The password is");
  spec.request.sampling.max_tokens = 48;
  spec.request.sampling.temperature = temperature;
  spec.request.sampling.seed = 7;
  spec.request.sampling.has_seed = true;
  spec.request.sampling.ignore_eos = true;

  // A pipeline with no stages: the request's events as the engine sends them.
  auto raw = examples::run_and_wait(sys, Pipeline(*engine), spec, "unfiltered", model, false);
  if (!model.tokenizer) {
    std::printf("the model has no tokenizer: its events carry token ids and no text, so there is nothing to filter\n");
    return 0;
  }
  if (stop.empty()) stop = pick_stop(raw->text);
  if (stop.empty()) {
    std::printf("the unfiltered text only repeats itself: no phrase would end it early; pass --stop "
                "(or a higher --temperature)\n");
    return 1;
  }
  if (word.empty()) word = pick_word(raw->text.substr(0, raw->text.find(stop)));
  std::printf("stop at \"%s\", mask \"%s\"\n", examples::printable(stop).c_str(), examples::printable(word).c_str());

  // The stages, in flow order: the stop phrase is matched on the model's own
  // text, then the words are masked.
  Pipeline filtered(*engine);
  filtered.then<StopAt>(std::vector<std::string>{stop}).then<Redact>(std::vector<std::string>{word}, mask);
  auto out = examples::run_and_wait(sys, filtered, spec, "filtered", model);

  int masked = 0;
  const std::string expected = expected_output(raw->text, stop, word, mask, masked);
  const bool stopped_early = raw->text.find(stop) != std::string::npos;
  std::printf("masked %d times; %s; the filtered text %s the unfiltered text cut at the stop phrase and masked\n",
              masked, stopped_early ? "stopped at the phrase" : "the phrase never came",
              out->text == expected ? "equals" : "DIFFERS FROM");
  if (out->text != expected) {
    std::printf("expected \"%s\"\n", examples::printable(expected).c_str());
    return 1;
  }
  return 0;
}
