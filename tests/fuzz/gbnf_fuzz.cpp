// libFuzzer target: any text as a GBNF grammar (grammar/gbnf.hpp). Seeds:
// fuzz_seeds writes llama.cpp-style grammars. Checked:
// grammar_fuzz_checks.hpp.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "grammar/gbnf.hpp"
#include "tests/fuzz/grammar_fuzz_checks.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace conveyor::grammar;
  fuzz::check_result(grammar_from_gbnf(std::string_view(reinterpret_cast<const char*>(data), size)), "gbnf: ");
  return 0;
}
