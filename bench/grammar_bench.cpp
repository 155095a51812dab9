// Constrained decoding's cost per token on a real vocabulary: for each
// grammar, the time to compile it, to precompute every position's token
// mask, and to fill one mask (one row of the vocabulary) along random valid
// continuations: at each step a random token the mask allows is accepted,
// with a bias to tokens holding JSON punctuation so the walks leave long
// strings and visit realistic states. "cold" masks are walks on a fresh
// compile (they pay the lazy per-position precomputation as they meet new
// positions), "warm" ones walks on a grammar whose masks were all
// precomputed (precompute() computes the per-position masks; the
// (position, return address) pairs fill in as the warm walks meet them).
// "build" is the time from the schema's text to the grammar, "compile" to
// the matcher's form; "accept" is accept_token's p50; "positions" the grammar's byte-class
// positions, "masks" the distinct masks they needed (equal positions
// share one), "pairs" the (mask, return address) masks, "stored" the
// distinct masks of both kinds the grammar holds, "tries" the
// distinct tries of suffixes the masks check at run time and "tMB" their
// memory (a part of "MB"), "dMB" the DFA's and "gMB" the grammar's own
// (its rules, their flat form, a mask slot per position: other parts), "MB" all the cached
// masks and the DFA they were computed with (CompiledGrammar::cache_stats,
// what the server's grammar cache bounds), "RSS+" what the process's
// resident memory grew by during precompute() (the pairs come later). One
// thread.
//
//   grammar_bench [file.gguf] [--walks N] [--steps N] [--only GRAMMAR] [--schema FILE]
//
// Default vocabulary: ../shared/models/tiny-llama3-q4_k_m.gguf (Llama 3's
// 128k tokens).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <random>
#include <string>
#include <unistd.h>
#include <vector>

#include "grammar/json_schema.hpp"
#include "grammar/matcher.hpp"
#include "grammar/regex.hpp"
#include "model/formats/gguf_llama.hpp"
#include "model/formats/gguf_reader.hpp"
#include "model/sampling/grammar_vocabulary.hpp"

namespace {

using namespace conveyor::grammar;
using Clock = std::chrono::steady_clock;

double ms_since(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

double percentile(std::vector<double> v, double p) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  return v[std::min(v.size() - 1, size_t(p * double(v.size())))];
}

Grammar must(conveyor::Expected<Grammar> g, const char* what) {
  if (!g) {
    std::fprintf(stderr, "%s: %s\n", what, g.error().message.c_str());
    std::exit(1);
  }
  return std::move(*g);
}

// A nested schema: a person with an address, tags, scores and an enum.
constexpr const char* kNestedSchema = R"({
  "type": "object",
  "properties": {
    "name": {"type": "string"},
    "age": {"type": "integer", "minimum": 0, "maximum": 150},
    "email": {"type": "string", "format": "email"},
    "address": {"type": "object", "properties": {
      "street": {"type": "string"}, "city": {"type": "string"},
      "zip": {"type": "string", "pattern": "^[0-9]{5}$"}, "country": {"enum": ["FR", "DE", "US", "JP"]}},
      "required": ["street", "city"]},
    "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 8},
    "scores": {"type": "array", "items": {"type": "number"}},
    "active": {"type": "boolean"}
  },
  "required": ["name", "age", "address", "active"]
})";

// A flat schema of 20 properties of every scalar type: the compile-time target.
std::string twenty_property_schema() {
  const char* types[] = {"string", "integer", "number", "boolean"};
  std::string props, required;
  for (int i = 0; i < 20; ++i) {
    const std::string name = "\"field_" + std::to_string(i) + "\"";
    props += (i ? ", " : "") + name + ": {\"type\": \"" + types[i % 4] + "\"}";
    required += (i ? ", " : "") + name;
  }
  return "{\"type\": \"object\", \"properties\": {" + props + "}, \"required\": [" + required + "]}";
}

// Many required booleans (an agent's large tool set or form): the grammar's
// size and its compile time grow with the schema; compile must stay linear.
std::string many_property_schema(int n) {
  std::string props, required;
  for (int i = 0; i < n; ++i) {
    const std::string name = "\"property_" + std::to_string(i) + "\"";
    props += (i ? ", " : "") + name + ": {\"type\": \"boolean\"}";
    required += (i ? ", " : "") + name;
  }
  return "{\"type\": \"object\", \"properties\": {" + props + "}, \"required\": [" + required +
         "], \"additionalProperties\": false}";
}

// Strings of at most 100 characters: a bounded repetition, one grammar
// position per character.
constexpr const char* kMaxLengthSchema = R"({"type": "object", "properties": {
  "title": {"type": "string", "maxLength": 100}, "summary": {"type": "string", "maxLength": 300}},
  "required": ["title", "summary"]})";

// Six short bounded strings (what an agent's small extraction schema looks
// like): each length bound unrolls into positions of their own.
constexpr const char* kSixStringsSchema = R"({"type": "object", "properties": {
  "a": {"type": "string", "maxLength": 8}, "b": {"type": "string", "maxLength": 9},
  "c": {"type": "string", "maxLength": 10}, "d": {"type": "string", "maxLength": 11},
  "e": {"type": "string", "maxLength": 12}, "f": {"type": "string", "maxLength": 13}},
  "required": ["a", "b", "c", "d", "e", "f"], "additionalProperties": false})";

// A format and a pattern held to lengths: each becomes a deterministic
// automaton times a count of characters (grammar/length_bound.hpp).
constexpr const char* kBoundedPatternSchema = R"({"type": "object", "properties": {
  "email": {"type": "string", "format": "email", "maxLength": 64},
  "code": {"type": "string", "pattern": "^[A-Z]{2}-[0-9]+$", "maxLength": 12}},
  "required": ["email", "code"]})";

// A GBNF-style grammar: arithmetic expressions over numbers and names.
//   root ::= expr ("\n" expr)*   expr ::= term (ws [-+] ws term)*
//   term ::= factor (ws [*/] ws factor)*   factor ::= num | name | "(" ws expr ws ")"
Grammar gbnf_like_grammar() {
  GrammarBuilder b;
  const int32_t root = b.add_rule("root");
  const int32_t expr = b.add_rule("expr");
  const int32_t term = b.add_rule("term");
  const int32_t factor = b.add_rule("factor");
  const Element ws = b.star({b.byte(' ')});
  b.add_alternative(root, {b.rule_ref(expr), b.star({b.byte('\n'), b.rule_ref(expr)})});
  b.add_alternative(expr, {b.rule_ref(term), b.star({ws, b.codepoints({{'+', '+'}, {'-', '-'}}), ws, b.rule_ref(term)})});
  b.add_alternative(term, {b.rule_ref(factor), b.star({ws, b.codepoints({{'*', '*'}, {'/', '/'}}), ws, b.rule_ref(factor)})});
  b.add_alternative(factor, {b.plus({b.codepoints({{'0', '9'}})}), b.optional({b.byte('.'), b.plus({b.codepoints({{'0', '9'}})})})});
  b.add_alternative(factor, {b.codepoints({{'a', 'z'}, {'A', 'Z'}, {'_', '_'}}),
                             b.star({b.codepoints({{'a', 'z'}, {'A', 'Z'}, {'_', '_'}, {'0', '9'}})})});
  b.add_alternative(factor, {b.byte('('), ws, b.rule_ref(expr), ws, b.byte(')')});
  return must(std::move(b).build(root), "gbnf");
}

struct WalkTimes {
  std::vector<double> mask_us, accept_us;
  double slowest_us = 0;
  std::string slowest_after;  // the text before the slowest mask (its last bytes)
};

// Random valid continuations from a fresh matcher, timing fill_mask and accept_token.
void random_walks(const std::shared_ptr<const CompiledGrammar>& g, int walks, int steps, uint32_t seed, WalkTimes& t) {
  std::mt19937 rng(seed);
  const TokenIndex& vocab = g->vocabulary();
  std::vector<uint64_t> mask((size_t(vocab.vocab_size()) + 63) / 64);
  std::vector<int32_t> allowed, structural;
  for (int w = 0; w < walks; ++w) {
    Matcher m(g);
    std::string text;
    for (int s = 0; s < steps && !m.is_terminated(); ++s) {
      const auto t0 = Clock::now();
      m.fill_mask(mask);
      t.mask_us.push_back(ms_since(t0) * 1000);
      if (t.mask_us.back() > t.slowest_us) {
        t.slowest_us = t.mask_us.back();
        t.slowest_after = text.substr(text.size() > 40 ? text.size() - 40 : 0);
      }
      allowed.clear();
      structural.clear();
      for (size_t i = 0; i < mask.size(); ++i) {
        for (uint64_t bits = mask[i]; bits; bits &= bits - 1) {
          const auto id = int32_t(i * 64 + size_t(__builtin_ctzll(bits)));
          allowed.push_back(id);
          if (vocab.bytes(id).find_first_of("\"}],:") != std::string_view::npos) structural.push_back(id);
        }
      }
      if (allowed.empty()) break;
      const std::vector<int32_t>& pool = !structural.empty() && rng() % 3 == 0 ? structural : allowed;
      const int32_t token = pool[rng() % pool.size()];
      const auto t1 = Clock::now();
      if (!m.accept_token(token)) {
        std::fprintf(stderr, "a token the mask allowed was refused: %d\n", token);
        std::exit(1);
      }
      t.accept_us.push_back(ms_since(t1) * 1000);
      text += vocab.bytes(token);
    }
  }
}

// This process's resident memory, MB (/proc/self/statm).
double resident_mb() {
  std::ifstream statm("/proc/self/statm");
  long pages = 0, resident = 0;
  statm >> pages >> resident;
  return double(resident) * double(sysconf(_SC_PAGESIZE)) / 1e6;
}

}  // namespace

int main(int argc, char** argv) {
  std::string path = std::string(CONVEYOR_SHARED_MODELS) + "/tiny-llama3-q4_k_m.gguf";
  int walks = 20, steps = 200;
  std::string only;
  std::string schema_path;  // --schema FILE: only that JSON schema
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
    else if (!std::strcmp(argv[i], "--walks") && i + 1 < argc) walks = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--steps") && i + 1 < argc) steps = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--schema") && i + 1 < argc) schema_path = argv[++i];
    else path = argv[i];
  }
  if (!std::filesystem::exists(path)) return std::fprintf(stderr, "%s: missing\n", path.c_str()), 1;
  auto file = conveyor::read_gguf(path);
  if (!file) return std::fprintf(stderr, "%s\n", file.error().message.c_str()), 1;
  auto tok = conveyor::tokenizer_from_gguf(*file);
  if (!tok || !tok->tokenizer) return std::fprintf(stderr, "%s: no tokenizer\n", path.c_str()), 1;
  auto t0 = Clock::now();
  const auto vocab = index_vocabulary(conveyor::vocabulary_bytes(*tok->tokenizer, tok->eos_ids));
  std::printf("%s: %d tokens (the longest %zu bytes), indexed in %.1f ms (%.1f MB of trie)\n", path.c_str(),
              vocab->vocab_size(), vocab->max_token_length(), ms_since(t0),
              double(vocab->text_trie().memory_bytes()) / 1e6);
  std::printf("%-15s %8s %8s %10s %9s %9s %9s %9s %9s %7s %9s %6s %6s %6s %6s %6s %6s %6s %6s %6s\n", "grammar", "build", "compile", "precompute",
              "cold p50", "cold p99", "warm p50", "warm p99", "warm max", "accept", "positions", "masks", "pairs", "stored", "tries", "tMB", "dMB", "gMB", "MB", "RSS+");
  const std::pair<const char*, std::function<Grammar()>> cases[] = {
      {"json_object", [] { return grammar_for_json_object(); }},
      {"nested_schema", [] { return must(grammar_from_json_schema(kNestedSchema), "nested schema"); }},
      {"20_properties", [] { return must(grammar_from_json_schema(twenty_property_schema()), "20 properties"); }},
      {"1000_properties", [] { return must(grammar_from_json_schema(many_property_schema(1000)), "1000 properties"); }},
      {"4000_properties", [] { return must(grammar_from_json_schema(many_property_schema(4000)), "4000 properties"); }},
      {"max_length", [] { return must(grammar_from_json_schema(kMaxLengthSchema), "maxLength schema"); }},
      {"six_strings", [] { return must(grammar_from_json_schema(kSixStringsSchema), "six strings schema"); }},
      {"bounded_pattern",
       [] { return must(grammar_from_json_schema(kBoundedPatternSchema), "bounded pattern schema"); }},
      {"regex_email", [] { return must(grammar_from_regex(R"([a-z0-9._%+-]+@[a-z0-9.-]+\.[a-z]{2,6})"), "regex"); }},
      {"regex_bounded",
       [] { return must(grammar_from_regex(R"(\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2})? [A-Za-z ,.]{1,80})"), "regex"); }},
      {"gbnf", gbnf_like_grammar},
  };
  std::vector<std::pair<const char*, std::function<Grammar()>>> chosen(std::begin(cases), std::end(cases));
  if (!schema_path.empty()) {
    std::ifstream in(schema_path);
    if (!in) return std::fprintf(stderr, "%s: cannot read\n", schema_path.c_str()), 1;
    const std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    chosen = {{"schema", [text] { return must(grammar_from_json_schema(text), "--schema"); }}};
  }
  std::vector<std::pair<const char*, WalkTimes>> slowest;
  for (const auto& [name, make] : chosen) {
    if (!only.empty() && only != name) continue;
    t0 = Clock::now();
    Grammar grammar = make();
    const double build_ms = ms_since(t0);
    t0 = Clock::now();
    auto compiled = compile(grammar, vocab);
    const double compile_ms = ms_since(t0);
    if (!compiled) return std::fprintf(stderr, "%s: %s\n", name, compiled.error().message.c_str()), 1;
    auto eager = compile(grammar, vocab);
    const double rss_before = resident_mb();
    t0 = Clock::now();
    (*eager)->precompute();
    const double precompute_ms = ms_since(t0);
    const double rss_growth = resident_mb() - rss_before;
    WalkTimes cold, warm;
    random_walks(*compiled, walks, steps, 1, cold);
    random_walks(*eager, walks, steps, 2, warm);
    const auto stats = (*eager)->cache_stats();
    std::printf("%-15s %6.2fms %6.2fms %8.1fms %7.1fus %7.1fus %7.1fus %7.1fus %7.1fus %5.1fus %9d %6d %6d %6d %6d %6.1f %6.1f %6.1f %6.1f %6.1f\n", name,
                build_ms, compile_ms, precompute_ms, percentile(cold.mask_us, 0.5), percentile(cold.mask_us, 0.99),
                percentile(warm.mask_us, 0.5), percentile(warm.mask_us, 0.99), percentile(warm.mask_us, 1.0),
                percentile(warm.accept_us, 0.5), stats.positions, stats.distinct, stats.returns,
                stats.stored, stats.suffix_tries, double(stats.suffix_bytes) / 1e6, double(stats.dfa_bytes) / 1e6, double(stats.grammar_bytes) / 1e6, double(stats.memory_bytes) / 1e6, rss_growth);
    slowest.emplace_back(name, warm);
  }
  std::printf("\nslowest warm mask per grammar, after the text (last 40 bytes):\n");
  for (const auto& [name, w] : slowest) std::printf("  %-16s %8.1fus  \"%s\"\n", name, w.slowest_us, w.slowest_after.c_str());
  return 0;
}
