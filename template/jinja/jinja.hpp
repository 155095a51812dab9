// A Jinja2 interpreter for chat templates.
//
// GGUF files and Hugging Face tokenizer configs carry a chat template: a
// Jinja2 program that turns `messages` (and `tools`, `add_generation_prompt`,
// `bos_token`, ...) into the prompt text. Hugging Face renders it with
//   jinja2.sandbox.ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
//                                                extensions=[loopcontrols])
// plus the globals raise_exception(msg) and strftime_now(fmt) and a `tojson`
// filter that is json.dumps(x, ensure_ascii=False, indent=...). This module
// renders the same bytes as that environment for the language the templates
// use; what it does not implement is an error, never a different output
// (template/jinja/README.md lists it).
//
// Provenance: a prompt must parse special tokens such as <|im_start|> only in
// the template's own text, never inside a message. Every string value knows
// which of its bytes came from the caller's data (`data_context`); the result
// says which byte ranges of the text those are, so the tokenizer can encode
// them verbatim.
//
// Errors are values: a syntax error, an unknown filter, raise_exception(), a
// type error or a resource limit gives an Error whose message starts with
// "line N: ". Rendering always ends: work, output size, nesting and macro
// recursion are bounded (RenderLimits).
//
// Thread-safety: a Template is immutable once parsed; render() may be called
// from any number of threads at once.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <boost/json/object.hpp>

#include "base/status.hpp"
#include "model/tokenizer/tokenizer.hpp"
#include "template/jinja/render_types.hpp"

namespace conveyor::jinja {

// Whether `name` is one of the functions every template can call (range,
// namespace, dict, strftime_now, raise_exception): a variable of that name
// in a render's context hides it.
bool is_global_function(std::string_view name);

class Template {
 public:
  // Parses `source`; a syntax error names its line. Newlines are normalized
  // and one trailing newline is dropped, as Jinja does.
  static Expected<Template> parse(std::string_view source);

  // Renders with the variables of both objects. Strings under `data_context`
  // (keys included) are caller data; `template_context` holds values that
  // belong to the template's side (bos_token, eos_token,
  // add_generation_prompt) and wins when a name is in both.
  Expected<Rendered> render(const boost::json::object& data_context,
                            const boost::json::object& template_context = {},
                            const RenderOptions& options = {}) const;

 private:
  explicit Template(std::shared_ptr<const Program> program) : program_(std::move(program)) {}
  std::shared_ptr<const Program> program_;
};

}  // namespace conveyor::jinja
