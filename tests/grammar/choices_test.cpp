// Choices to grammars: exactly one of the strings, prefixes of each other
// included, through earley.hpp; the empty list is an error.
#include "grammar/choices.hpp"

#include <gtest/gtest.h>

#include "tests/grammar/earley.hpp"

namespace conveyor::grammar {
namespace {

using testing::earley_accepts;

TEST(Choices, ExactlyOneOfTheStrings) {
  const std::vector<std::string> choices = {"yes", "yesterday", "no", "", "n\xC3\xA9", "yes", "maybe so"};
  auto g = grammar_from_choices(choices);
  ASSERT_TRUE(g) << g.error().message;
  for (const std::string& s : choices) EXPECT_TRUE(earley_accepts(*g, s)) << s;
  for (const char* s : {"ye", "yess", "yesterda", "yesterdays", "n", "noo", "n\xC3", "maybe", "Yes"}) {
    EXPECT_FALSE(earley_accepts(*g, s)) << s;
  }
}

TEST(Choices, OneStringAndAnEmptyList) {
  auto one = grammar_from_choices(std::vector<std::string>{"only"});
  ASSERT_TRUE(one) << one.error().message;
  EXPECT_TRUE(earley_accepts(*one, "only"));
  EXPECT_FALSE(earley_accepts(*one, "onl"));
  auto none = grammar_from_choices({});
  ASSERT_FALSE(none);
  EXPECT_EQ(none.error().code, Errc::invalid_argument);
  EXPECT_EQ(none.error().message, "choices: the list is empty");
}

}  // namespace
}  // namespace conveyor::grammar
