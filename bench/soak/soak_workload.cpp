#include "bench/soak/soak_workload.hpp"

#include <boost/json.hpp>
#include <string>

namespace conveyor::soak {
namespace {

namespace json = boost::json;

constexpr int32_t kMinPromptChars = 16;
constexpr int32_t kMinMaxTokens = 4;
constexpr double kTwoSamples = 0.1;
constexpr double kIgnoreEos = 0.75;
constexpr double kReadToEnd = 0.35;
constexpr double kAbandonAtStart = 0.15;

std::string random_text(int32_t chars, std::mt19937_64& rng) {
  static const char* const words[] = {"the", "conveyor", "moves", "tokens", "along", "a",   "belt",
                                      "of",  "blocks",   "while", "actors", "talk",  "to", "each",
                                      "other", "and",    "streams", "end",  "early", "or", "late"};
  std::string out;
  std::uniform_int_distribution<size_t> pick(0, std::size(words) - 1);
  while (int32_t(out.size()) < chars) {
    if (!out.empty()) out += ' ';
    out += words[pick(rng)];
  }
  out.resize(size_t(chars));
  return out;
}

bool chance(double p, std::mt19937_64& rng) { return std::bernoulli_distribution(p)(rng); }

int32_t uniform(int32_t lo, int32_t hi, std::mt19937_64& rng) {
  return std::uniform_int_distribution<int32_t>(lo, hi)(rng);
}

std::string request_body(Transport transport, const WorkloadShape& shape, std::mt19937_64& rng) {
  json::object body;
  const std::string text = random_text(uniform(kMinPromptChars, shape.max_prompt_chars, rng), rng);
  const bool chat = transport == Transport::sse_chat || (transport == Transport::ws && chance(0.5, rng));
  if (chat) {
    body["messages"] = json::array{json::object{{"role", "user"}, {"content", text}}};
  } else {
    body["prompt"] = text;
  }
  body["max_tokens"] = uniform(kMinMaxTokens, shape.max_tokens, rng);
  if (chance(kTwoSamples, rng)) body["n"] = 2;
  if (chance(0.5, rng)) {
    body["temperature"] = 0.8;
    body["seed"] = uniform(0, 1 << 30, rng);
  } else {
    body["temperature"] = 0;
  }
  if (chance(kIgnoreEos, rng)) body["ignore_eos"] = true;
  if (transport != Transport::ws) body["stream"] = true;
  return json::serialize(body);
}

}  // namespace

std::vector<StreamPlan> make_streams(int64_t count, const WorkloadShape& shape, std::mt19937_64& rng) {
  std::vector<StreamPlan> plans;
  plans.reserve(size_t(count));
  for (int64_t i = 0; i < count; ++i) {
    StreamPlan p;
    p.transport = Transport(uniform(0, 2, rng));
    p.body = request_body(p.transport, shape, rng);
    const double where = std::uniform_real_distribution<double>(0, 1)(rng);
    if (where < kReadToEnd) {
      p.abandon = Abandon::none;
    } else {
      if (p.transport == Transport::ws) {
        const double how = std::uniform_real_distribution<double>(0, 1)(rng);
        p.abandon = how < 0.5 ? Abandon::cancel : how < 0.8 ? Abandon::close : Abandon::drop;
      } else {
        p.abandon = Abandon::close;
      }
      if (where < kReadToEnd + kAbandonAtStart) {
        p.after_events = 0;
        p.before_response = p.transport != Transport::ws && chance(0.5, rng);
      } else {
        p.after_events = uniform(1, shape.max_tokens + 2, rng);
      }
    }
    plans.push_back(std::move(p));
  }
  return plans;
}

double mean_stream_tokens(const WorkloadShape& shape) {
  const double prompt = (kMinPromptChars + shape.max_prompt_chars) / 2.0 + 1.0;
  const double output = (kMinMaxTokens + shape.max_tokens) / 2.0;
  return prompt + output * (1.0 + kTwoSamples);
}

}  // namespace conveyor::soak
