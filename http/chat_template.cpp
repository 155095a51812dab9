#include "http/chat_template.hpp"

#include <fstream>
#include <optional>
#include <sstream>

#include <boost/json.hpp>

#include "template/jinja/chat.hpp"
#include "http/json_detail.hpp"

namespace conveyor::http {

namespace {

std::optional<std::string> read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return std::nullopt;
  std::stringstream s;
  s << f.rdbuf();
  if (f.bad()) return std::nullopt;
  return s.str();
}

// An assistant message's tool_calls as templates read them. OpenAI sends
// each call's arguments as a JSON string; the Llama 3.x and Hermes templates
// write `arguments | tojson` and Qwen's iterate or print them, so a string
// that holds an object is given as that object (as llama.cpp and vLLM do).
boost::json::value template_tool_calls(const std::string& tool_calls_json) {
  boost::system::error_code ec;
  boost::json::value calls = boost::json::parse(tool_calls_json, ec);
  if (ec || !calls.is_array()) return nullptr;  // the request parser checked it already
  for (boost::json::value& call : calls.get_array()) {
    boost::json::object* fn = call.is_object() && call.get_object().contains("function")
                                  ? call.get_object()["function"].if_object()
                                  : nullptr;
    boost::json::value* args = fn ? fn->if_contains("arguments") : nullptr;
    if (args == nullptr || !args->is_string()) continue;
    boost::json::value parsed = boost::json::parse(args->get_string(), ec);
    if (!ec && parsed.is_object()) *args = std::move(parsed);
  }
  return calls;
}

// A message as the template sees it: keys the client did not send stay
// undefined (Llama 3.1's template asks `'tool_calls' in message`).
boost::json::object template_message(const ChatMessage& m) {
  boost::json::object o{{"role", m.role}, {"content", m.content}};
  if (!m.tool_calls_json.empty()) o["tool_calls"] = template_tool_calls(m.tool_calls_json);
  if (!m.tool_call_id.empty()) o["tool_call_id"] = m.tool_call_id;
  if (!m.name.empty()) o["name"] = m.name;
  return o;
}

}  // namespace

const char* to_string(ChatTemplateKind kind) {
  switch (kind) {
    case ChatTemplateKind::plain: return "plain";
    case ChatTemplateKind::llama2: return "llama2";
    case ChatTemplateKind::chatml: return "chatml";
    case ChatTemplateKind::jinja: return "jinja";
  }
  return "?";
}

Expected<ChatTemplateKind> parse_chat_template_kind(std::string_view name) {
  if (name == "plain") return ChatTemplateKind::plain;
  if (name == "llama2") return ChatTemplateKind::llama2;
  if (name == "chatml") return ChatTemplateKind::chatml;
  if (!name.empty() && std::ifstream(std::string(name)).good()) return ChatTemplateKind::jinja;
  return make_error(Errc::invalid_argument, "unknown chat template '" + std::string(name) +
                                                "' (auto, plain, llama2, chatml or a template file)");
}

ChatTemplateKind detect_chat_template(std::string_view gguf_template) {
  if (gguf_template.find("<|im_start|>") != std::string_view::npos) return ChatTemplateKind::chatml;
  if (gguf_template.find("[INST]") != std::string_view::npos) return ChatTemplateKind::llama2;
  return ChatTemplateKind::plain;
}

ChatTemplate::ChatTemplate(jinja::Template source, std::string text, std::string origin,
                           std::shared_ptr<const Tokenizer> tokenizer)
    : kind_(ChatTemplateKind::jinja),
      description_("jinja (" + origin + ")"),
      source_(std::move(text)),
      tokenizer_(std::move(tokenizer)),
      jinja_(std::make_shared<const jinja::Template>(std::move(source))) {}

ChatTemplate::ChatTemplate(ChatTemplateKind kind, std::shared_ptr<const Tokenizer> tokenizer, std::string_view note)
    : kind_(kind), description_(to_string(kind)), tokenizer_(std::move(tokenizer)) {
  if (!note.empty()) description_ += " (" + std::string(note) + ")";
  const std::vector<int32_t> probe = tokenizer_->encode("a", /*add_bos=*/true);
  adds_bos_ = tokenizer_->bos_id() >= 0 && !probe.empty() && probe.front() == tokenizer_->bos_id();
  if (kind_ != ChatTemplateKind::chatml) return;
  for (int32_t id = 0; id < tokenizer_->vocab_size() && (im_start_ < 0 || im_end_ < 0); ++id) {
    const std::string piece = tokenizer_->piece(id);
    if (piece == "<|im_start|>") im_start_ = id;
    if (piece == "<|im_end|>") im_end_ = id;
  }
}

ChatTemplate::Fragment ChatTemplate::special(int32_t id, const char* spelling) const {
  return Fragment{id, spelling};
}

std::vector<ChatTemplate::Fragment> ChatTemplate::fragments(
    const std::vector<ChatMessage>& messages) const {
  std::vector<Fragment> out;
  auto text = [&out](std::string t) { out.push_back(Fragment{-1, std::move(t)}); };
  switch (kind_) {
    case ChatTemplateKind::chatml: {
      if (adds_bos_) out.push_back(special(tokenizer_->bos_id(), "<s>"));
      for (const ChatMessage& m : messages) {
        out.push_back(special(im_start_, "<|im_start|>"));
        text(m.role + "\n" + m.content);
        out.push_back(special(im_end_, "<|im_end|>"));
        text("\n");
      }
      out.push_back(special(im_start_, "<|im_start|>"));
      text("assistant\n");
      break;
    }
    case ChatTemplateKind::llama2: {
      // Meta's format: the system prompt goes inside the first [INST] block;
      // each user turn opens a block, each assistant answer closes it with EOS.
      std::string system;
      bool open = false;  // a [INST] block waits for its answer
      for (const ChatMessage& m : messages) {
        if (m.role == "system") {
          system += m.content;
        } else if (m.role == "assistant") {
          text(" " + m.content + " ");
          out.push_back(special(tokenizer_->eos_id(), "</s>"));
          open = false;
        } else {
          if (open) text(" ");
          out.push_back(special(tokenizer_->bos_id(), "<s>"));
          std::string block = "[INST] ";
          if (!system.empty()) block += "<<SYS>>\n" + std::exchange(system, {}) + "\n<</SYS>>\n\n";
          text(block + m.content + " [/INST]");
          open = true;
        }
      }
      if (!open) {  // no user turn to answer: open an empty one
        out.push_back(special(tokenizer_->bos_id(), "<s>"));
        std::string block = "[INST] ";
        if (!system.empty()) block += "<<SYS>>\n" + system + "\n<</SYS>>\n\n";
        text(block + " [/INST]");
      }
      break;
    }
    case ChatTemplateKind::plain: {
      std::string all;
      for (const ChatMessage& m : messages) {
        if (m.role == "system") all += m.content + "\n\n";
        else if (m.role == "assistant") all += "Assistant: " + m.content + "\n";
        else all += "User: " + m.content + "\n";
      }
      all += "Assistant:";
      if (adds_bos_) out.push_back(special(tokenizer_->bos_id(), "<s>"));
      text(std::move(all));
      break;
    }
    case ChatTemplateKind::jinja:  // apply() renders these with apply_jinja
      break;
  }
  return out;
}

Expected<ChatPrompt> ChatTemplate::apply(const std::vector<ChatMessage>& messages,
                                         std::string_view tools_json) const {
  if (kind_ == ChatTemplateKind::jinja) return apply_jinja(messages, tools_json);
  return apply_builtin(messages);
}

ChatPrompt ChatTemplate::apply_builtin(const std::vector<ChatMessage>& messages) const {
  ChatPrompt prompt;
  for (const Fragment& f : fragments(messages)) {
    prompt.text += f.text;
    if (f.special >= 0) {
      prompt.ids.push_back(f.special);
    } else {
      const std::vector<int32_t> piece = tokenizer_->encode(f.text, /*add_bos=*/false);
      prompt.ids.insert(prompt.ids.end(), piece.begin(), piece.end());
    }
  }
  return prompt;
}

Expected<ChatPrompt> ChatTemplate::apply_jinja(const std::vector<ChatMessage>& messages,
                                               std::string_view tools_json) const {
  jinja::ChatInputs inputs;
  for (const ChatMessage& m : messages) inputs.messages.push_back(template_message(m));
  if (!tools_json.empty()) {
    boost::system::error_code ec;
    inputs.tools = detail::parse_request_json(tools_json, ec);
    if (ec) return make_error(Errc::invalid_argument, "tools: not valid JSON (" + ec.message() + ")");
  }
  inputs.add_generation_prompt = true;
  std::string bos;
  if (tokenizer_->bos_id() >= 0) inputs.bos_token = bos = tokenizer_->piece(tokenizer_->bos_id());
  if (tokenizer_->eos_id() >= 0) inputs.eos_token = tokenizer_->piece(tokenizer_->eos_id());

  auto rendered = jinja::render_chat(*jinja_, inputs);
  if (!rendered) return make_error(Errc::invalid_argument, "chat template: " + rendered.error().message);
  ChatPrompt prompt;
  prompt.text = std::move(rendered->text);
  prompt.data = std::move(rendered->data);
  // A template that writes bos_token itself gets no second one.
  const bool starts_with_bos = !bos.empty() && prompt.text.starts_with(bos) &&
                               (prompt.data.empty() || prompt.data.front().begin >= bos.size());
  prompt.ids = tokenizer_->encode(
      prompt.text, EncodeOptions{.add_bos = !starts_with_bos, .parse_special = true, .verbatim = prompt.data});
  return prompt;
}

Expected<std::shared_ptr<const ChatTemplate>> make_chat_template(std::string_view setting,
                                                                std::string_view gguf_template,
                                                                std::shared_ptr<const Tokenizer> tokenizer) {
  if (setting == "auto") {
    if (gguf_template.empty()) return std::make_shared<const ChatTemplate>(ChatTemplateKind::plain, tokenizer);
    auto parsed = jinja::Template::parse(gguf_template);
    if (parsed) {
      return std::make_shared<const ChatTemplate>(std::move(*parsed), std::string(gguf_template),
                                                  "GGUF tokenizer.chat_template", tokenizer);
    }
    // A template this interpreter cannot read: serve with the format it shows.
    return std::make_shared<const ChatTemplate>(detect_chat_template(gguf_template), tokenizer,
                                                "the GGUF template does not parse here: " + parsed.error().message);
  }
  auto kind = parse_chat_template_kind(setting);
  if (!kind) return kind.error();
  if (*kind != ChatTemplateKind::jinja) return std::make_shared<const ChatTemplate>(*kind, tokenizer);
  const std::string path(setting);
  const std::optional<std::string> source = read_file(path);
  if (!source) return make_error(Errc::io_error, path + ": cannot read the chat template");
  auto parsed = jinja::Template::parse(*source);
  if (!parsed) return make_error(Errc::bad_format, path + ": " + parsed.error().message);
  return std::make_shared<const ChatTemplate>(std::move(*parsed), *source, path, tokenizer);
}

}  // namespace conveyor::http
