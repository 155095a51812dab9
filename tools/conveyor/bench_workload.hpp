// What `conveyor bench` sends: prompt and output lengths drawn from
// distributions (or prompts read from a JSONL dataset), and when it sends them
// (Poisson arrivals). Plain code with no networking, so tests call it directly.
//
// Everything random comes from one seeded generator with hand-written draws
// (not <random>'s distributions, whose results differ between standard
// libraries), so a seed gives the same workload on every platform.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.hpp"

namespace conveyor::bench {

// splitmix64: small, fast, and good enough for workload draws.
class Rng {
 public:
  explicit Rng(uint64_t seed) : state_(seed) {}
  uint64_t next_u64();
  double uniform01();                         // in [0, 1)
  int64_t uniform_int(int64_t lo, int64_t hi);  // in [lo, hi], lo <= hi
  double exponential(double mean);            // mean > 0

 private:
  uint64_t state_;
};

// A distribution of positive token counts: "fixed:n", "uniform:a:b" (both
// ends included) or "exponential:mean[:cap]" (rounded, at least 1, at most
// cap when given).
struct LengthDist {
  enum class Kind { fixed, uniform, exponential };
  Kind kind = Kind::fixed;
  int64_t a = 128;   // fixed: n; uniform: lower end
  int64_t b = 128;   // uniform: upper end
  double mean = 0;   // exponential
  int64_t cap = 0;   // exponential: 0 means no cap

  static Expected<LengthDist> parse(std::string_view spec);
  static LengthDist fixed(int64_t n) { return LengthDist{Kind::fixed, n, n, 0, 0}; }
  int64_t draw(Rng& rng) const;
  std::string describe() const;  // the spec in canonical form
};

// One request to send. The prompt is either token ids (completions only) or
// text (chat always; completions when a dataset gives a string).
struct RequestSpec {
  std::vector<int32_t> prompt_ids;
  std::string prompt_text;
  bool prompt_is_text = false;
  int64_t max_tokens = 128;
  int64_t prompt_len_hint = 0;  // tokens we asked for (ids: exact; text: a guess)
};

// A JSONL dataset: each line an object with "prompt" (a string or an array of
// token ids) and an optional "max_tokens". Blank lines are skipped.
struct DatasetEntry {
  std::vector<int32_t> prompt_ids;
  std::string prompt_text;
  bool prompt_is_text = false;
  std::optional<int64_t> max_tokens;
};
Expected<std::vector<DatasetEntry>> load_dataset(const std::string& path);
Expected<std::vector<DatasetEntry>> parse_dataset(std::string_view jsonl, const std::string& name);

// Makes the stream of requests. Random prompts use token ids in
// [kMinTokenId, kMaxTokenId], valid in every vocabulary conveyor loads
// (the embedded byte-level model included) and clear of BOS/EOS.
class WorkloadSource {
 public:
  static constexpr int32_t kMinTokenId = 3;
  static constexpr int32_t kMaxTokenId = 250;

  // Random prompts; `chat` makes text prompts of about input-length words.
  WorkloadSource(LengthDist input, LengthDist output, bool chat, uint64_t seed);
  // Dataset prompts, in file order, cycling; entries without max_tokens draw
  // from `output`.
  WorkloadSource(std::vector<DatasetEntry> dataset, LengthDist output, uint64_t seed);

  RequestSpec next();

 private:
  LengthDist input_;
  LengthDist output_;
  bool chat_ = false;
  std::vector<DatasetEntry> dataset_;
  size_t next_entry_ = 0;
  Rng rng_;
};

// Seconds from the start at which each of `count` requests arrives, for a
// Poisson process of `rate` requests per second (exponential gaps).
class PoissonArrivals {
 public:
  PoissonArrivals(double rate, uint64_t seed) : rate_(rate), rng_(seed ^ 0x9e3779b97f4a7c15ull) {}
  double next();  // the next arrival time, in seconds from the start

 private:
  double rate_;
  double t_ = 0;
  Rng rng_;
};

}  // namespace conveyor::bench
