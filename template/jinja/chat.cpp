#include "template/jinja/chat.hpp"

namespace conveyor::jinja {

Expected<Rendered> render_chat(const Template& chat_template, const ChatInputs& inputs,
                               const RenderOptions& options) {
  const boost::json::object data = {
      {"messages", inputs.messages}, {"tools", inputs.tools}, {"documents", inputs.documents}};
  boost::json::object own = inputs.kwargs;
  own["add_generation_prompt"] = inputs.add_generation_prompt;
  if (inputs.bos_token) own["bos_token"] = *inputs.bos_token;
  if (inputs.eos_token) own["eos_token"] = *inputs.eos_token;
  return chat_template.render(data, own, options);
}

}  // namespace conveyor::jinja
