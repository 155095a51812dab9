// A chat template rendered the way Hugging Face's apply_chat_template calls
// it: the caller's messages, tools and documents are data (tools and
// documents are None when absent, so `tools is defined` holds as in
// transformers), and so are the caller's extra variables (kwargs:
// chat_template_kwargs, enable_thinking, ...), which never replace messages,
// tools or documents; the special tokens and add_generation_prompt are the
// template's side.
#pragma once

#include <optional>
#include <string>
#include <string_view>

#include <boost/json/array.hpp>
#include <boost/json/object.hpp>
#include <boost/json/value.hpp>

#include "template/jinja/jinja.hpp"

namespace conveyor::jinja {

struct ChatInputs {
  boost::json::array messages;           // [{"role": ..., "content": ...}, ...]
  boost::json::value tools = nullptr;    // a list of tool schemas, or null
  boost::json::value documents = nullptr;
  bool add_generation_prompt = true;
  std::optional<std::string> bos_token;  // unset: undefined in the template (as when a config has none)
  std::optional<std::string> eos_token;
  boost::json::object kwargs;            // the caller's extra template variables (chat_template_kwargs)
};

// Whether `name` is a variable render_chat sets itself (messages, tools,
// documents, add_generation_prompt, bos_token, eos_token) or a function of
// the template language: a caller's kwarg of that name would hide it (and
// render_chat's own value wins), so a server refuses such kwargs.
bool is_reserved_chat_name(std::string_view name);

Expected<Rendered> render_chat(const Template& chat_template, const ChatInputs& inputs,
                               const RenderOptions& options = {});

}  // namespace conveyor::jinja
