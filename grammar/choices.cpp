#include "grammar/choices.hpp"

#include <algorithm>
#include <vector>

namespace conveyor::grammar {
namespace {

// The strings s[lo, hi), sorted and distinct, which share their first
// `depth` bytes: one alternative per next byte, written up to where the
// strings under it part.
Element trie_node(GrammarBuilder& b, const std::vector<std::string>& s, size_t lo, size_t hi, size_t depth) {
  const int32_t rule = b.add_rule("choice");
  if (s[lo].size() == depth) {  // sorted: the string that ends here comes first
    b.add_alternative(rule, {});
    ++lo;
  }
  while (lo < hi) {
    size_t end = lo + 1;
    while (end < hi && s[end][depth] == s[lo][depth]) ++end;
    // The group's common prefix: first and last share what all share.
    const std::string& first = s[lo];
    const std::string& last = s[end - 1];
    size_t common = depth + 1;
    while (common < first.size() && common < last.size() && first[common] == last[common]) ++common;
    Alternative alt = b.literal(std::string_view(first).substr(depth, common - depth));
    if (end - lo > 1 || first.size() > common) alt.push_back(trie_node(b, s, lo, end, common));
    b.add_alternative(rule, std::move(alt));
    lo = end;
  }
  return b.rule_ref(rule);
}

}  // namespace

Expected<Element> add_choices(GrammarBuilder& b, std::span<const std::string> choices) {
  if (choices.empty()) return make_error(Errc::invalid_argument, "choices: the list is empty");
  std::vector<std::string> sorted(choices.begin(), choices.end());
  std::sort(sorted.begin(), sorted.end());
  sorted.erase(std::unique(sorted.begin(), sorted.end()), sorted.end());
  return trie_node(b, sorted, 0, sorted.size(), 0);
}

Expected<Grammar> grammar_from_choices(std::span<const std::string> choices) {
  GrammarBuilder b;
  const int32_t root = b.add_rule("root");
  auto e = add_choices(b, choices);
  if (!e) return e.error();
  b.add_alternative(root, {*e});
  return std::move(b).build(root);
}

}  // namespace conveyor::grammar
