#include "template/jinja/chat.hpp"

namespace conveyor::jinja {

bool is_reserved_chat_name(std::string_view name) {
  return name == "messages" || name == "tools" || name == "documents" || name == "add_generation_prompt" ||
         name == "bos_token" || name == "eos_token" || is_global_function(name);
}

Expected<Rendered> render_chat(const Template& chat_template, const ChatInputs& inputs,
                               const RenderOptions& options) {
  // The caller's variables are data, and never stand for the messages,
  // tools or documents (nor, on the template's side, for what follows).
  boost::json::object data = inputs.kwargs;
  data["messages"] = inputs.messages;
  data["tools"] = inputs.tools;
  data["documents"] = inputs.documents;
  boost::json::object own;
  own["add_generation_prompt"] = inputs.add_generation_prompt;
  if (inputs.bos_token) own["bos_token"] = *inputs.bos_token;
  if (inputs.eos_token) own["eos_token"] = *inputs.eos_token;
  return chat_template.render(data, own, options);
}

}  // namespace conveyor::jinja
