// libFuzzer target: any text as a regular expression (grammar/regex.hpp),
// whole-string and, as a JSON Schema pattern, searched inside a JSON string.
// Checked: grammar_fuzz_checks.hpp.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "grammar/regex.hpp"
#include "tests/fuzz/grammar_fuzz_checks.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace conveyor::grammar;
  const std::string_view pattern(reinterpret_cast<const char*>(data), size);
  fuzz::check_result(grammar_from_regex(pattern), "regex: ");
  GrammarBuilder b;
  const int32_t root = b.add_rule("root");
  auto e = add_regex(b, pattern, RegexOptions{RegexOptions::Anchoring::search, TextForm::json_string});
  if (!e) {
    fuzz::check_result(e.error(), "regex: ");
    return 0;
  }
  b.add_alternative(root, {*e});
  fuzz::check_result(std::move(b).build(root), "");
  return 0;
}
