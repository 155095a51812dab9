// The agent swarm's parts that do not depend on how requests reach the
// engine (examples/agent_swarm.cpp runs them in-process, swarm_http.hpp over
// HTTP): what every agent keeps, the token-id agent of --tool-choice off,
// what each turn measured, the live progress line and the summary's figures.
// The agents that make real tool calls are examples/swarm_tools.hpp.
//
// A TokenAgent's conversation is token ids: the shared system prompt, its own
// task, then per turn what the model generated and a tool's answer derived
// from it. Every turn sends the whole conversation again, so its prompt
// begins with the previous turn's prompt: the prefix cache finds the system
// prompt (shared by all agents) and the agent's own earlier turns.
#pragma once

#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "model/tokenizer/tokenizer.hpp"

namespace conveyor::examples::swarm {

using Clock = std::chrono::steady_clock;

inline double seconds_between(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double>(b - a).count();
}

// Upper bounds, in tokens, of an agent's task line and of one tool answer
// (both are cut to them): the context budget counts on them.
constexpr int kTaskTokens = 24;
constexpr int kToolTokens = 32;

// Text to token ids: the model's tokenizer when it has one; otherwise each
// byte stands in as an id (modulo the vocabulary), as in example_util.hpp.
// Over HTTP the swarm always sends bytes: ids below 256 exist in every
// vocabulary the server loads.
struct Encoder {
  std::shared_ptr<const Tokenizer> tokenizer;  // null: bytes as ids
  int32_t vocab_size = 256;

  std::vector<int32_t> operator()(std::string_view text, bool bos = false) const {
    if (tokenizer) return tokenizer->encode(text, bos);
    std::vector<int32_t> ids;
    for (unsigned char c : text) ids.push_back(int32_t(c) % vocab_size);
    return ids;
  }
};

// The longest system prompt that leaves room, within `context` tokens, for the
// task, `turns` generations of `max_tokens` and the tool answers between them.
inline int system_token_budget(int context, int turns, int max_tokens) {
  return context - kTaskTokens - (turns - 1) * (max_tokens + kToolTokens) - max_tokens;
}

// The system prompt every agent shares: rules, as many as asked for. Both
// kinds of agent grow it rule by rule to the length they want.
inline std::string system_text(int rules) {
  std::string text =
      "You are one agent of a swarm. Work in turns. In each turn, think, then call one of your tools. "
      "The tool's answer follows your turn.\n";
  for (int rule = 1; rule <= rules; ++rule) {
    text += "Rule " + std::to_string(rule) + ": use the answer of the previous tool call in the next one, " +
            "and keep every number below " + std::to_string(100 * rule) + ".\n";
  }
  return text;
}

// The system prompt as token ids, cut to exactly `tokens` (BOS first where
// the tokenizer adds one).
inline std::vector<int32_t> system_prompt(const Encoder& encode, int tokens) {
  std::vector<int32_t> ids = encode(system_text(0), true);
  for (int rules = 1; int(ids.size()) < tokens; ++rules) ids = encode(system_text(rules), true);
  ids.resize(size_t(tokens));
  return ids;
}

// What a TokenAgent makes of a turn's output: a call and its answer.
struct DerivedCall {
  std::string call;    // "calc(37 * 12)", "lookup(pi)"
  std::string answer;  // "444", "3.14159"
};

// A call derived from the output, for --tool-choice off, where nothing asks
// the model for a real one (swarm_tools.hpp does), deterministic for a
// given output: the first two numbers in the text when it has two, else the
// last two token ids, each modulo 100, are the operands; an even last token
// id picks the calculator (the operator by the output's length), an odd one
// the lookup table (the key by the sum of the ids).
inline DerivedCall derive_call(std::string_view text, const std::vector<int32_t>& ids) {
  std::vector<long> numbers;
  for (size_t i = 0; i < text.size() && numbers.size() < 2;) {
    if (text[i] < '0' || text[i] > '9') {
      ++i;
      continue;
    }
    long n = 0;
    for (; i < text.size() && text[i] >= '0' && text[i] <= '9'; ++i) n = (n * 10 + (text[i] - '0')) % 100;
    numbers.push_back(n);
  }
  const int32_t last = ids.empty() ? 0 : ids.back();
  if (numbers.size() < 2) numbers = {long(last % 100), long(ids.size() > 1 ? ids[ids.size() - 2] % 100 : 0)};
  if (last % 2 == 0) {
    const char op = "+-*"[ids.size() % 3];
    const long a = numbers[0], b = numbers[1];
    const long r = op == '+' ? a + b : op == '-' ? a - b : a * b;
    return {"calc(" + std::to_string(a) + " " + op + " " + std::to_string(b) + ")", std::to_string(r)};
  }
  static constexpr std::pair<const char*, const char*> kTable[] = {
      {"pi", "3.14159"}, {"e", "2.71828"},    {"c", "299792458"}, {"g", "9.81"},
      {"h", "6.626e-34"}, {"na", "6.022e23"}, {"kb", "1.38e-23"}, {"phi", "1.61803"}};
  long sum = 0;
  for (int32_t id : ids) sum += id;
  const auto& [key, value] = kTable[size_t(sum) % std::size(kTable)];
  return {std::string("lookup(") + key + ")", value};
}

// What one turn's request measured.
struct TurnRecord {
  double ttft = -1;  // seconds from sending to the first token (-1: none came)
  double e2e = 0;    // seconds from sending to the last event
  int tokens = 0;    // generated
};

// What every agent keeps: its turns' records, a transcript line per turn,
// and why it failed. Only the code driving the agent's current request
// touches it (one request at a time).
class Agent {
 public:
  Agent(int index, int turns) : index_(index), turns_(turns) {}
  virtual ~Agent() = default;

  int index() const { return index_; }
  const std::vector<TurnRecord>& records() const { return records_; }
  int turns_done() const { return int(records_.size()); }
  bool done() const { return turns_done() == turns_ || !error_.empty(); }
  const std::string& error() const { return error_; }
  // One line per turn: what it generated and the tool call it made.
  const std::vector<std::string>& transcript() const { return transcript_; }
  void fail(std::string why) { error_ = std::move(why); }

 protected:
  void record_turn(const TurnRecord& record, std::string line) {
    records_.push_back(record);
    transcript_.push_back("turn " + std::to_string(records_.size()) + ": " + std::move(line));
  }

 private:
  int index_;
  int turns_;
  std::vector<TurnRecord> records_;
  std::vector<std::string> transcript_;
  std::string error_;
};

// The agent of --tool-choice off: a conversation of token ids, sent as a
// plain completion, its tool call derived from the output (derive_call).
class TokenAgent : public Agent {
 public:
  TokenAgent(int index, const std::vector<int32_t>& system, const Encoder& encode, int turns)
      : Agent(index, turns), encode_(&encode), conversation_(system) {
    append_cut(encode("\nAgent " + std::to_string(index) + ": solve it.\n"), kTaskTokens);
  }

  const std::vector<int32_t>& conversation() const { return conversation_; }

  // The turn's request ended normally with these tokens (and their text, ""
  // when the model has no tokenizer): the output and the tool's answer join
  // the conversation.
  void finish_turn(const TurnRecord& record, const std::string& text, const std::vector<int32_t>& ids) {
    conversation_.insert(conversation_.end(), ids.begin(), ids.end());
    const DerivedCall tool = derive_call(text, ids);
    record_turn(record, std::to_string(ids.size()) + " tokens, last id " +
                            std::to_string(ids.empty() ? -1 : ids.back()) + " -> " + tool.call + " = " + tool.answer);
    if (!done()) append_cut((*encode_)("\n" + tool.call + " = " + tool.answer + "\n"), kToolTokens);
  }

 private:
  void append_cut(std::vector<int32_t> ids, int most) {
    if (int(ids.size()) > most) ids.resize(size_t(most));
    conversation_.insert(conversation_.end(), ids.begin(), ids.end());
  }

  const Encoder* encode_;
  std::vector<int32_t> conversation_;
};

// Counts the progress line reads while agents run on other threads.
struct Counters {
  std::atomic<int> turns{0}, agents_done{0}, agents_failed{0};
  std::atomic<int64_t> tokens{0};
};

// Prints "agents done, turns done, tokens/s" from a thread of its own until
// destroyed: rewritten in place with \r every quarter second on a terminal,
// one line a second otherwise (into a pipe or a file).
class ProgressLine {
 public:
  ProgressLine(const Counters& counters, int agents, int turns)
      : counters_(counters), agents_(agents), turns_(turns), tty_(isatty(fileno(stdout)) != 0) {
    thread_ = std::thread([this] { loop(); });
  }
  ~ProgressLine() {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    thread_.join();
    if (tty_) std::printf("\n");
  }

 private:
  void loop() {
    const auto interval = tty_ ? std::chrono::milliseconds(250) : std::chrono::milliseconds(1000);
    Clock::time_point last = Clock::now();
    int64_t last_tokens = 0;
    std::unique_lock lock(mutex_);
    while (!wake_.wait_for(lock, interval, [this] { return stop_; })) {
      const Clock::time_point now = Clock::now();
      const int64_t tokens = counters_.tokens.load();
      const double rate = double(tokens - last_tokens) / std::max(1e-9, seconds_between(last, now));
      std::printf("%sprogress: agents %d/%d done, turns %d/%d, %lld tokens, %.0f tokens/s%s", tty_ ? "\r" : "",
                  counters_.agents_done.load(), agents_, counters_.turns.load(), turns_, (long long)tokens, rate,
                  tty_ ? "   " : "\n");
      std::fflush(stdout);
      last = now;
      last_tokens = tokens;
    }
  }

  const Counters& counters_;
  int agents_, turns_;
  bool tty_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stop_ = false;
  std::thread thread_;
};

// The value below which `q` (0..1) of `values` lie (nearest rank); 0 if empty.
inline double percentile(std::vector<double> values, double q) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const size_t rank = size_t(std::max(1.0, std::ceil(q * double(values.size()))));
  return values[std::min(rank, values.size()) - 1];
}

// The run's figures, from the agents' records: throughput and latency
// percentiles per turn request. `cache_line` is the mode's prefix-cache line.
inline void print_figures(const std::vector<std::unique_ptr<Agent>>& agents, int turns, double seconds,
                          const std::string& cache_line) {
  std::vector<double> ttft, e2e;
  int64_t tokens = 0;
  int finished = 0, turns_done = 0;
  for (const auto& a : agents) {
    finished += a->turns_done() == turns;
    turns_done += a->turns_done();
    for (const TurnRecord& r : a->records()) {
      if (r.ttft >= 0) ttft.push_back(r.ttft);
      e2e.push_back(r.e2e);
      tokens += r.tokens;
    }
  }
  std::printf("agents finished: %d/%zu, turns finished: %d/%zu\n", finished, agents.size(), turns_done,
              agents.size() * size_t(turns));
  std::printf("throughput: %lld generated tokens in %.2f s = %.0f tokens/s\n", (long long)tokens, seconds,
              double(tokens) / std::max(seconds, 1e-9));
  std::printf("TTFT per turn request: p50 %.1f ms, p90 %.1f ms, p99 %.1f ms (%zu requests)\n",
              1e3 * percentile(ttft, 0.5), 1e3 * percentile(ttft, 0.9), 1e3 * percentile(ttft, 0.99), ttft.size());
  std::printf("end-to-end per turn request: p50 %.1f ms, p90 %.1f ms, p99 %.1f ms (%zu requests)\n",
              1e3 * percentile(e2e, 0.5), 1e3 * percentile(e2e, 0.9), 1e3 * percentile(e2e, 0.99), e2e.size());
  std::printf("%s\n", cache_line.c_str());
}

// What the run comes to: agent 0's turns (each tool call it made), the
// figures, and the first few agents that failed. Returns how many failed.
inline int print_report(const std::vector<std::unique_ptr<Agent>>& agents, int turns, double seconds,
                        const std::string& cache_line) {
  for (const std::string& line : agents.front()->transcript()) std::printf("agent 0, %s\n", line.c_str());
  print_figures(agents, turns, seconds, cache_line);
  int failed = 0;
  for (const auto& a : agents) {
    if (a->error().empty()) continue;
    if (failed++ < 5) std::printf("agent %d failed: %s\n", a->index(), a->error().c_str());
  }
  if (failed > 5) std::printf("... and %d more failed\n", failed - 5);
  return failed;
}

}  // namespace conveyor::examples::swarm
