// Broken templates must give errors, not crashes or hangs: the real
// templates of tests/template/data, truncated and mutated (a seeded
// generator, so a failure reproduces), each parsed and, when it parses,
// rendered under tight limits. A sanitizer build makes this a memory test too.
#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <random>
#include <sstream>

#include <boost/json.hpp>

#include "template/jinja/jinja.hpp"

namespace conveyor::jinja {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;

const fs::path kData = fs::path(CONVEYOR_SOURCE_DIR) / "tests/template/data";

std::string slurp(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

std::vector<std::string> templates() {
  std::vector<std::string> out;
  for (const auto& e : fs::directory_iterator(kData / "templates")) out.push_back(slurp(e.path()));
  return out;
}

// Pieces of Jinja syntax that break or bend a template when spliced in.
constexpr const char* kPalette[] = {
    "{%", "%}", "{{", "}}", "{#", "#}", "{%-", "-%}", "(", ")", "[", "]", "{", "}", "'", "\"", "\\", "|", "~",
    ".", ",", ":", "**", "//", "-", "+", " is ", " not ", " in ", " if ", " else ", "endfor", "endif", "\n",
    "{% endif %}", "{% for x in messages %}", "{% set ns.x = 1 %}", "{{ loop.index }}", "{{ caller() }}",
    "{% macro m() %}{{ m() }}{% endmacro %}{{ m() }}", "{{ range(99999) | list | tojson }}", "|tojson(indent=4)",
    "[::-1]", "|selectattr('role')", "{{ raise_exception('x') }}", "\xff", "\xe2\x82", "\0",
};

std::string mutate(const std::string& src, std::mt19937& rng) {
  std::string s = src;
  std::uniform_int_distribution<size_t> pos(0, s.size());
  const int edits = 1 + static_cast<int>(rng() % 3);
  for (int e = 0; e < edits; ++e) {
    const size_t at = std::min(pos(rng), s.size());
    switch (rng() % 4) {
      case 0: s.insert(at, kPalette[rng() % std::size(kPalette)]); break;
      case 1: s.erase(at, rng() % 16); break;
      case 2: s.insert(at, s.substr(std::min(pos(rng), s.size()), rng() % 64)); break;
      default:
        if (at < s.size()) s[at] = static_cast<char>(rng() % 256);
    }
  }
  return s;
}

struct Tally {
  int parse_errors = 0;
  int render_errors = 0;
  int rendered = 0;
};

void exercise(const std::string& src, const json::object& data, Tally& tally) {
  RenderOptions options;
  options.limits.max_steps = 200'000;
  options.limits.max_output_bytes = 1 << 20;
  options.now = std::chrono::system_clock::from_time_t(0);
  const auto t = Template::parse(src);
  if (!t) {
    ++tally.parse_errors;
    EXPECT_FALSE(t.error().message.empty());
    return;
  }
  const auto r = t->render(data, {{"add_generation_prompt", true}, {"bos_token", "<s>"}}, options);
  if (!r) {
    ++tally.render_errors;
    EXPECT_FALSE(r.error().message.empty());
  } else {
    ++tally.rendered;
    for (const TextRange& d : r->data) EXPECT_LE(d.end, r->text.size());
  }
}

json::object conversation() {
  return json::parse(slurp(kData / "conversations/tools.json")).as_object();
}

TEST(JinjaRobustness, TruncatedTemplatesFailCleanly) {
  const json::object data = conversation();
  Tally tally;
  for (const std::string& src : templates()) {
    for (size_t cut = 1; cut < src.size(); cut += std::max<size_t>(1, src.size() / 97)) {
      exercise(src.substr(0, cut), data, tally);
    }
  }
  // Most cuts land inside a tag or a block: those must be errors.
  EXPECT_GT(tally.parse_errors, tally.rendered) << tally.rendered << " truncations rendered";
}

TEST(JinjaRobustness, MutatedTemplatesFailCleanlyAndQuickly) {
  const json::object data = conversation();
  std::mt19937 rng(20240726);
  Tally tally;
  const auto start = std::chrono::steady_clock::now();
  for (const std::string& src : templates()) {
    for (int i = 0; i < 150; ++i) exercise(mutate(src, rng), data, tally);
  }
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_GT(tally.parse_errors, 0);
  EXPECT_GT(tally.render_errors, 0);
  EXPECT_GT(tally.rendered, 0);
  EXPECT_LT(seconds, 5.0) << "mutants should cost milliseconds each";
  std::printf("mutants: %d parse errors, %d render errors, %d rendered in %.2f s\n", tally.parse_errors,
              tally.render_errors, tally.rendered, seconds);
}

TEST(JinjaRobustness, RandomBytesFailCleanly) {
  std::mt19937 rng(7);
  Tally tally;
  for (int i = 0; i < 300; ++i) {
    std::string src;
    const size_t n = rng() % 200;
    for (size_t k = 0; k < n; ++k) {
      src += (rng() % 4 == 0) ? std::string(kPalette[rng() % std::size(kPalette)]) : std::string(1, static_cast<char>(rng() % 128));
    }
    exercise(src, {}, tally);
  }
  EXPECT_GT(tally.parse_errors, 0);
}

}  // namespace
}  // namespace conveyor::jinja
