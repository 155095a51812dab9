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
// "accept" is accept_token's p50; "positions" the grammar's byte-class
// positions, "pairs" the (position, return address) masks, "MB" all the
// cached masks. One thread.
//
//   grammar_bench [file.gguf] [--walks N] [--steps N]
//
// Default vocabulary: ../shared/models/tiny-llama3-q4_k_m.gguf (Llama 3's
// 128k tokens).
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <random>
#include <string>
#include <vector>

#include "grammar/matcher.hpp"
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

// JSON text: whitespace, strings with escapes and any UTF-8, numbers.
struct JsonParts {
  Element ws, string, number, integer, boolean;
};

JsonParts json_parts(GrammarBuilder& b) {
  JsonParts j;
  j.ws = b.star({b.codepoints({{' ', ' '}, {'\t', '\t'}, {'\n', '\n'}})});
  const Element hex = b.codepoints({{'0', '9'}, {'a', 'f'}, {'A', 'F'}});
  Alternative escape = b.literal("\\");
  escape.push_back(b.choice({{b.codepoints({{'"', '"'}, {'\\', '\\'}, {'/', '/'}, {'b', 'b'}, {'f', 'f'},
                                             {'n', 'n'}, {'r', 'r'}, {'t', 't'}})},
                             {b.byte('u'), hex, hex, hex, hex}},
                            "escape"));
  const Element chr = b.choice({{b.codepoints({{'"', '"'}, {'\\', '\\'}, {0, 0x1F}}, true)}, escape}, "char");
  j.string = b.choice({{b.byte('"'), b.star({chr}), b.byte('"')}}, "string");
  const Element digit = b.codepoints({{'0', '9'}});
  j.integer = b.choice({{b.optional(b.literal("-")),
                         b.choice({b.literal("0"), {b.codepoints({{'1', '9'}}), b.star({digit})}})}},
                       "integer");
  Alternative fraction = b.literal(".");
  fraction.push_back(b.plus({digit}));
  Alternative exponent{b.codepoints({{'e', 'e'}, {'E', 'E'}}), b.optional({b.codepoints({{'+', '+'}, {'-', '-'}})}),
                       b.plus({digit})};
  j.number = b.choice({{j.integer, b.optional(fraction), b.optional(exponent)}}, "number");
  j.boolean = b.choice({b.literal("true"), b.literal("false")}, "boolean");
  return j;
}

// "{" members "}" with the given (key, value) members in order, all required.
Element json_object_of(GrammarBuilder& b, const JsonParts& j, const std::vector<std::pair<std::string, Element>>& members) {
  Alternative alt{b.byte('{'), j.ws};
  for (size_t i = 0; i < members.size(); ++i) {
    if (i) {
      alt.push_back(b.byte(','));
      alt.push_back(j.ws);
    }
    for (const Element& e : b.literal("\"" + members[i].first + "\"")) alt.push_back(e);
    alt.insert(alt.end(), {j.ws, b.byte(':'), j.ws, members[i].second, j.ws});
  }
  alt.push_back(b.byte('}'));
  return b.choice({alt}, "object");
}

Element json_array_of(GrammarBuilder& b, const JsonParts& j, Element item) {
  Alternative more{b.byte(','), j.ws, item, j.ws};
  return b.choice({{b.byte('['), j.ws, b.optional({item, j.ws, b.star(more)}), b.byte(']')}}, "array");
}

Grammar finish(GrammarBuilder&& b, int32_t root) {
  auto g = std::move(b).build(root);
  if (!g) {
    std::fprintf(stderr, "bench grammar: %s\n", g.error().message.c_str());
    std::exit(1);
  }
  return std::move(*g);
}

// Any JSON object (response_format json_object).
Grammar json_object_grammar() {
  GrammarBuilder b;
  const int32_t root = b.add_rule("root");
  const int32_t value = b.add_rule("value");
  const JsonParts j = json_parts(b);
  Alternative member{j.string, j.ws, b.byte(':'), j.ws, b.rule_ref(value), j.ws};
  Alternative more = {b.byte(','), j.ws};
  more.insert(more.end(), member.begin(), member.end());
  Alternative members = member;
  members.push_back(b.star(more));
  const Element object = b.choice({{b.byte('{'), j.ws, b.optional(members), b.byte('}')}}, "object");
  Alternative more_values{b.byte(','), j.ws, b.rule_ref(value), j.ws};
  const Element array =
      b.choice({{b.byte('['), j.ws, b.optional({b.rule_ref(value), j.ws, b.star(more_values)}), b.byte(']')}}, "array");
  for (const Element& e : {object, array, j.string, j.number, j.boolean}) b.add_alternative(value, {e});
  b.add_alternative(value, b.literal("null"));
  b.add_alternative(root, {object});
  return finish(std::move(b), root);
}

// A nested schema: a person with an address, tags and scores.
Grammar nested_schema_grammar() {
  GrammarBuilder b;
  const int32_t root = b.add_rule("root");
  const JsonParts j = json_parts(b);
  const Element address =
      json_object_of(b, j, {{"street", j.string}, {"city", j.string}, {"zip", j.string}, {"country", j.string}});
  const Element person = json_object_of(b, j,
                                        {{"name", j.string},
                                         {"age", j.integer},
                                         {"email", j.string},
                                         {"address", address},
                                         {"tags", json_array_of(b, j, j.string)},
                                         {"scores", json_array_of(b, j, j.number)},
                                         {"active", j.boolean}});
  b.add_alternative(root, {person});
  return finish(std::move(b), root);
}

// A 20-property flat schema: the compile-time target.
Grammar twenty_property_grammar() {
  GrammarBuilder b;
  const int32_t root = b.add_rule("root");
  const JsonParts j = json_parts(b);
  std::vector<std::pair<std::string, Element>> members;
  for (int i = 0; i < 20; ++i) {
    const Element kinds[] = {j.string, j.integer, j.number, j.boolean};
    members.emplace_back("field_" + std::to_string(i), kinds[i % 4]);
  }
  b.add_alternative(root, {json_object_of(b, j, members)});
  return finish(std::move(b), root);
}

// An ISO date-time then a free-text note: what a regex
// `\d{4}-\d{2}-\d{2}T\d{2}:\d{2}(:\d{2})? [A-Za-z ,.]{1,80}` compiles to.
Grammar regex_like_grammar() {
  GrammarBuilder b;
  const int32_t root = b.add_rule("root");
  const Element d = b.codepoints({{'0', '9'}});
  Alternative alt{b.repeat({d}, 4, 4), b.byte('-'), d, d, b.byte('-'), d, d, b.byte('T'), d, d, b.byte(':'), d, d,
                  b.optional({b.byte(':'), d, d}), b.byte(' '),
                  b.repeat({b.codepoints({{'A', 'Z'}, {'a', 'z'}, {' ', ' '}, {',', ','}, {'.', '.'}})}, 1, 80)};
  b.add_alternative(root, alt);
  return finish(std::move(b), root);
}

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
  return finish(std::move(b), root);
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

}  // namespace

int main(int argc, char** argv) {
  std::string path = std::string(CONVEYOR_SHARED_MODELS) + "/tiny-llama3-q4_k_m.gguf";
  int walks = 20, steps = 200;
  for (int i = 1; i < argc; ++i) {
    if (!std::strcmp(argv[i], "--walks") && i + 1 < argc) walks = std::atoi(argv[++i]);
    else if (!std::strcmp(argv[i], "--steps") && i + 1 < argc) steps = std::atoi(argv[++i]);
    else path = argv[i];
  }
  if (!std::filesystem::exists(path)) return std::fprintf(stderr, "%s: missing\n", path.c_str()), 1;
  auto file = conveyor::read_gguf(path);
  if (!file) return std::fprintf(stderr, "%s\n", file.error().message.c_str()), 1;
  auto tok = conveyor::tokenizer_from_gguf(*file);
  if (!tok || !tok->tokenizer) return std::fprintf(stderr, "%s: no tokenizer\n", path.c_str()), 1;
  auto t0 = Clock::now();
  const auto vocab = index_vocabulary(conveyor::vocabulary_bytes(*tok->tokenizer, tok->eos_ids));
  std::printf("%s: %d tokens, indexed in %.1f ms (%.1f MB of trie)\n", path.c_str(), vocab->vocab_size(),
              ms_since(t0), double(vocab->text_trie().memory_bytes()) / 1e6);
  std::printf("%-14s %8s %10s %9s %9s %9s %9s %9s %7s %9s %6s %6s\n", "grammar", "compile", "precompute",
              "cold p50", "cold p99", "warm p50", "warm p99", "warm max", "accept", "positions", "pairs", "MB");
  const std::pair<const char*, std::function<Grammar()>> cases[] = {
      {"json_object", json_object_grammar},   {"nested_schema", nested_schema_grammar},
      {"20_properties", twenty_property_grammar}, {"regex", regex_like_grammar},
      {"gbnf", gbnf_like_grammar},
  };
  std::vector<std::pair<const char*, WalkTimes>> slowest;
  for (const auto& [name, make] : cases) {
    Grammar grammar = make();
    t0 = Clock::now();
    auto compiled = compile(grammar, vocab);
    const double compile_ms = ms_since(t0);
    if (!compiled) return std::fprintf(stderr, "%s: %s\n", name, compiled.error().message.c_str()), 1;
    auto eager = compile(grammar, vocab);
    t0 = Clock::now();
    (*eager)->precompute();
    const double precompute_ms = ms_since(t0);
    WalkTimes cold, warm;
    random_walks(*compiled, walks, steps, 1, cold);
    random_walks(*eager, walks, steps, 2, warm);
    const auto stats = (*eager)->cache_stats();
    std::printf("%-14s %6.2fms %8.1fms %7.1fus %7.1fus %7.1fus %7.1fus %7.1fus %5.1fus %9d %6d %6.1f\n", name,
                compile_ms, precompute_ms, percentile(cold.mask_us, 0.5), percentile(cold.mask_us, 0.99),
                percentile(warm.mask_us, 0.5), percentile(warm.mask_us, 0.99), percentile(warm.mask_us, 1.0),
                percentile(warm.accept_us, 0.5), stats.positions, stats.returns, double(stats.memory_bytes) / 1e6);
    slowest.emplace_back(name, warm);
  }
  std::printf("\nslowest warm mask per grammar, after the text (last 40 bytes):\n");
  for (const auto& [name, w] : slowest) std::printf("  %-16s %8.1fus  \"%s\"\n", name, w.slowest_us, w.slowest_after.c_str());
  return 0;
}
