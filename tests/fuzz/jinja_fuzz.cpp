// libFuzzer target: an arbitrary chat template source, parsed and rendered
// with a fixed conversation (system, user, an assistant tool call, a tool
// result, tools, special tokens, a template kwarg) as Hugging Face's
// apply_chat_template passes it (render_chat). Seeds: the real templates of
// tests/template/data/templates (fuzz_seeds writes them).
//
// Checked (jinja_fuzz_checks.hpp): errors say their line, data ranges are
// well formed, valid UTF-8 in gives valid UTF-8 out, and a second render of
// the same template gives the same result.
#include <boost/json/parse.hpp>

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "template/jinja/chat.hpp"
#include "tests/fuzz/jinja_fuzz_checks.hpp"

namespace {

using namespace conveyor;

const jinja::ChatInputs& conversation() {
  static const jinja::ChatInputs inputs = [] {
    jinja::ChatInputs c;
    c.messages = boost::json::parse(R"([
      {"role": "system", "content": "You are terse. <|im_start|>"},
      {"role": "user", "content": "Weather in Paris, in \u00b0C? \ud83d\ude00"},
      {"role": "assistant", "content": "", "tool_calls": [{"type": "function", "id": "call_1",
        "function": {"name": "get_weather", "arguments": {"city": "Paris", "days": [1, 2]}}}]},
      {"role": "tool", "content": "{\"temp\": 21.5}", "tool_call_id": "call_1"},
      {"role": "assistant", "content": "<think>warm</think>21.5 \u00b0C"},
      {"role": "user", "content": [{"type": "text", "text": "And tomorrow?"}]}
    ])").as_array();
    c.tools = boost::json::parse(R"([{"type": "function", "function": {"name": "get_weather",
      "description": "Weather.", "parameters": {"type": "object",
      "properties": {"city": {"type": "string"}}, "required": ["city"]}}}])");
    c.bos_token = "<s>";
    c.eos_token = "</s>";
    c.kwargs["enable_thinking"] = false;
    return c;
  }();
  return inputs;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view source(reinterpret_cast<const char*>(data), size);
  Expected<jinja::Template> t = jinja::Template::parse(source);
  if (!t) {
    fuzz::check(t.error().message.rfind("line ", 0) == 0);
    return 0;
  }
  const jinja::RenderOptions options = fuzz::fuzz_render_options();
  const auto first = jinja::render_chat(t.value(), conversation(), options);
  fuzz::check_rendered(first, fuzz::valid_utf8(source));
  fuzz::check_same(first, jinja::render_chat(t.value(), conversation(), options));
  return 0;
}
