// Bounded and intersected regular expressions (grammar/length_bound.hpp)
// against std::regex, an implementation that is not ours: for patterns
// over a small alphabet, every string up to six characters is accepted
// exactly when std::regex finds (search) or matches (whole string) every
// pattern in it and its length is within the bounds.
#include "grammar/length_bound.hpp"

#include <gtest/gtest.h>

#include <regex>
#include <string>
#include <vector>

#include "grammar/regex.hpp"
#include "tests/grammar/earley.hpp"

namespace conveyor::grammar {
namespace {

using Anchoring = RegexOptions::Anchoring;

struct Bounds {
  int32_t min, max;
};

std::vector<std::string> all_strings(std::string_view alphabet, size_t max_length) {
  std::vector<std::string> out{""};
  for (size_t begin = 0; begin < out.size(); ++begin)
    if (out[begin].size() < max_length)
      for (char c : alphabet) out.push_back(out[begin] + c);
  return out;
}

Grammar bounded(const std::vector<std::pair<std::string, Anchoring>>& patterns, Bounds bounds) {
  std::vector<Expr> exprs;
  for (const auto& [p, anchoring] : patterns) {
    auto e = regex_expr(p, anchoring);
    EXPECT_TRUE(e) << p;
    if (!e) return {};
    exprs.push_back(std::move(*e));
  }
  GrammarBuilder b;
  const int32_t root = b.add_rule("root");
  auto element = add_bounded_regexes(b, exprs, bounds.min, bounds.max, TextForm::raw);
  EXPECT_TRUE(element) << element.error().message;
  if (!element) return {};
  b.add_alternative(root, {*element});
  auto g = std::move(b).build(root);
  EXPECT_TRUE(g) << g.error().message;
  return g ? *g : Grammar{};
}

bool std_accepts(const std::string& text, const std::vector<std::pair<std::string, Anchoring>>& patterns,
                 Bounds bounds) {
  if (int32_t(text.size()) < bounds.min || (bounds.max >= 0 && int32_t(text.size()) > bounds.max)) return false;
  for (const auto& [p, anchoring] : patterns) {
    const std::regex re(p, std::regex::ECMAScript);
    if (anchoring == Anchoring::search ? !std::regex_search(text, re) : !std::regex_match(text, re)) return false;
  }
  return true;
}

void expect_same_language(const std::vector<std::pair<std::string, Anchoring>>& patterns, Bounds bounds) {
  const Grammar g = bounded(patterns, bounds);
  if (g.rules.empty()) return;
  std::string name;
  for (const auto& [p, anchoring] : patterns) name += (anchoring == Anchoring::search ? " search " : " whole ") + p;
  name += " lengths " + std::to_string(bounds.min) + ".." + std::to_string(bounds.max);
  int mismatches = 0;
  for (const std::string& s : all_strings("abc", 6)) {
    const bool expected = std_accepts(s, patterns, bounds);
    if (testing::earley_accepts(g, s) != expected && ++mismatches <= 3)
      ADD_FAILURE() << name << ": \"" << s << "\" should be " << (expected ? "accepted" : "refused");
  }
}

const char* const kPatterns[] = {"a*b",      "(ab|ba)+",   "a{2,3}b?",  "^(a|b)*c$", "[^a]+",    "(a|ab)(c|bcd)",
                                 "^b",       "c$",         "(a*)*b",    "a|b|",      "^(abc){0,2}$", "[ab]{2}c*",
                                 "^.a.$",    "(a|b)*a(a|b)", "((a|b)c?)+"};
const Bounds kBounds[] = {{0, -1}, {2, -1}, {0, 3}, {2, 4}, {3, 3}, {5, 6}};

TEST(LengthBound, OneSearchedPatternAgreesWithStdRegex) {
  for (const char* p : kPatterns)
    for (Bounds bounds : kBounds) expect_same_language({{p, Anchoring::search}}, bounds);
}

TEST(LengthBound, OneWholePatternAgreesWithStdRegex) {
  for (const char* p : kPatterns)
    for (Bounds bounds : kBounds) expect_same_language({{p, Anchoring::whole_string}}, bounds);
}

TEST(LengthBound, IntersectionsAgreeWithStdRegex) {
  for (size_t i = 0; i < std::size(kPatterns); i += 2)
    for (size_t j = 1; j < std::size(kPatterns); j += 3)
      for (Bounds bounds : {Bounds{0, -1}, Bounds{1, 4}})
        expect_same_language({{kPatterns[i], Anchoring::search}, {kPatterns[j], Anchoring::whole_string}}, bounds);
}

// A repetition whose maximum reaches the length bound is built unbounded
// (far fewer states: an email address's {0,61} labels under a maxLength
// of 40): the strings within the bound must stay the same, nullable items
// and minimums past the bound included.
TEST(LengthBound, RepeatsReachingTheBoundKeepTheirLanguage) {
  const char* const patterns[] = {"^(a|bc){1,4}$", "(ab?){0,5}c", "^(a?){4,6}$",  "^(a{1,3}b){1,2}$",
                                  "^a{3,9}$",      "^(a|b){5,8}c", "^(c?){7,9}b$", "^((a|b)c?){2,3}$"};
  for (const char* p : patterns)
    for (Bounds bounds : {Bounds{0, 3}, Bounds{2, 4}, Bounds{1, 5}, Bounds{0, 6}})
      for (Anchoring anchoring : {Anchoring::search, Anchoring::whole_string})
        expect_same_language({{p, anchoring}}, bounds);
}

TEST(LengthBound, NoStringLeftMatchesNothing) {
  const Grammar g = bounded({{"^a{2}$", Anchoring::search}}, {3, -1});
  for (const std::string& s : all_strings("abc", 5)) EXPECT_FALSE(testing::earley_accepts(g, s)) << s;
}

TEST(LengthBound, RefusesAutomataPastItsLimits) {
  GrammarBuilder b;
  auto e = regex_expr("(a|b)*a(a|b){13}", Anchoring::whole_string);
  ASSERT_TRUE(e);
  std::vector<Expr> exprs{*e};
  auto element = add_bounded_regexes(b, exprs, 0, 40, TextForm::raw);
  ASSERT_FALSE(element);
  EXPECT_NE(element.error().message.find("more than 4000 deterministic states"), std::string::npos)
      << element.error().message;
  e = regex_expr("[ab]{0,1000}", Anchoring::whole_string);
  ASSERT_TRUE(e);
  exprs = {*e};
  element = add_bounded_regexes(b, exprs, 0, 10000, TextForm::raw);
  ASSERT_FALSE(element);
  EXPECT_NE(element.error().message.find("too large to bound its length"), std::string::npos)
      << element.error().message;
  // Few states, but each a set of hundreds: refused for the work, in a bounded time.
  std::string optional_classes;
  for (int i = 0; i < 300; ++i)
    optional_classes += "[\\u" + std::to_string(1000 + 3 * i) + "-\\u" + std::to_string(1001 + 3 * i) + "]?";
  e = regex_expr(optional_classes, Anchoring::search);
  ASSERT_TRUE(e) << e.error().message;
  exprs = {*e};
  element = add_bounded_regexes(b, exprs, 0, 300, TextForm::raw);
  ASSERT_FALSE(element);
  EXPECT_NE(element.error().message.find("steps to build"), std::string::npos) << element.error().message;
}

}  // namespace
}  // namespace conveyor::grammar
