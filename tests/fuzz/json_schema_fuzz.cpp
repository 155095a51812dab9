// libFuzzer target: any text as a JSON Schema, compiled in strict and
// non-strict mode (grammar/json_schema.hpp). Seeds: fuzz_seeds writes
// schemas using every supported keyword. Checked: grammar_fuzz_checks.hpp.
#include <cstddef>
#include <cstdint>
#include <string_view>

#include "grammar/json_schema.hpp"
#include "tests/fuzz/grammar_fuzz_checks.hpp"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace conveyor::grammar;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  for (const bool strict : {true, false}) {
    fuzz::check_result(grammar_from_json_schema(text, JsonSchemaOptions{strict}), "json_schema: ");
  }
  return 0;
}
