#include "http/chat_template.hpp"

#include <filesystem>
#include <fstream>

#include <boost/json.hpp>

#include "template/jinja/chat.hpp"
#include "template/jinja/pystr.hpp"
#include "http/json_detail.hpp"

namespace conveyor::http {

namespace {

// Chat templates are a few KiB (the largest known, tool-calling ones, tens);
// a file past this is not one.
constexpr std::streamsize kMaxTemplateBytes = std::streamsize{1} << 20;

Expected<std::string> read_template_file(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    return make_error(Errc::invalid_argument, path + " is a directory, not a chat template");
  std::ifstream f(path, std::ios::binary);
  if (!f) return make_error(Errc::io_error, path + ": cannot read the chat template");
  std::string text(size_t(kMaxTemplateBytes) + 1, '\0');
  f.read(text.data(), kMaxTemplateBytes + 1);
  if (f.bad()) return make_error(Errc::io_error, path + ": cannot read the chat template");
  if (f.gcount() > kMaxTemplateBytes)
    return make_error(Errc::invalid_argument, path + ": more than 1 MiB, not a chat template");
  text.resize(size_t(f.gcount()));
  return text;
}

// Python's str.strip() (its whitespace, U+3000 included) for the built-in
// llama2 format, as Meta's template strips each content.
std::string_view strip(std::string_view s) {
  const jinja::pystr::Span kept = jinja::pystr::strip(s, nullptr, true, true);
  return s.substr(kept.begin, kept.end - kept.begin);
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
  if (!m.reasoning_content.empty()) o["reasoning_content"] = m.reasoning_content;
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

// The text shows a special token as the vocabulary spells it (Llama 3's BOS
// is <|begin_of_text|>), or as `spelling` when the vocabulary lacks it (then
// the spelling is plain text: ChatML's markers on another model's vocabulary).
ChatTemplate::Fragment ChatTemplate::special(int32_t id, const char* spelling) const {
  return Fragment{id, id >= 0 ? tokenizer_->piece(id) : std::string(spelling)};
}

std::vector<ChatTemplate::Fragment> ChatTemplate::fragments(const std::vector<ChatMessage>& messages,
                                                            bool add_generation_prompt) const {
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
      if (add_generation_prompt) {
        out.push_back(special(im_start_, "<|im_start|>"));
        text("assistant\n");
      }
      break;
    }
    case ChatTemplateKind::llama2: {
      // Meta's format (its template's text, contents stripped as it strips
      // them): the system prompt goes inside the first [INST] block; each
      // user turn opens a block, each assistant answer closes it with EOS.
      // A vocabulary without BOS or EOS gets none (no "<s>" as text).
      auto bos = [&] {
        if (tokenizer_->bos_id() >= 0) out.push_back(special(tokenizer_->bos_id(), "<s>"));
      };
      std::string system;
      bool open = false;  // a [INST] block waits for its answer
      for (const ChatMessage& m : messages) {
        if (m.role == "system") {
          system += m.content;
        } else if (m.role == "assistant") {
          text(" " + std::string(strip(m.content)) + " ");
          if (tokenizer_->eos_id() >= 0) out.push_back(special(tokenizer_->eos_id(), "</s>"));
          open = false;
        } else {
          if (open) text(" ");
          bos();
          std::string block;
          if (!system.empty()) block += "<<SYS>>\n" + std::exchange(system, {}) + "\n<</SYS>>\n\n";
          text("[INST] " + std::string(strip(block + m.content)) + " [/INST]");
          open = true;
        }
      }
      if (!open && add_generation_prompt) {  // no user turn to answer: open an empty one
        bos();
        std::string block;
        if (!system.empty()) block += "<<SYS>>\n" + system + "\n<</SYS>>\n\n";
        text("[INST] " + std::string(strip(block)) + " [/INST]");
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
      if (add_generation_prompt) all += "Assistant:";
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
                                         const ChatApplyOptions& options) const {
  if (kind_ == ChatTemplateKind::jinja) return apply_jinja(messages, options);
  return apply_builtin(messages, options.add_generation_prompt);
}

ChatPrompt ChatTemplate::apply_builtin(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const {
  ChatPrompt prompt;
  std::string run;  // text since the last special token, encoded as one piece
  auto encode_run = [&] {
    const std::vector<int32_t> piece = tokenizer_->encode(run, /*add_bos=*/false);
    prompt.ids.insert(prompt.ids.end(), piece.begin(), piece.end());
    run.clear();
  };
  for (const Fragment& f : fragments(messages, add_generation_prompt)) {
    prompt.text += f.text;
    if (f.special >= 0) {
      if (!run.empty()) encode_run();
      prompt.ids.push_back(f.special);
    } else {
      run += f.text;
    }
  }
  if (!run.empty()) encode_run();
  return prompt;
}

Expected<ChatPrompt> ChatTemplate::apply_jinja(const std::vector<ChatMessage>& messages,
                                               const ChatApplyOptions& options) const {
  jinja::ChatInputs inputs;
  for (const ChatMessage& m : messages) inputs.messages.push_back(template_message(m));
  boost::system::error_code ec;
  if (!options.tools_json.empty()) {
    inputs.tools = detail::parse_request_json(options.tools_json, ec);
    if (ec) return make_error(Errc::invalid_argument, "tools: not valid JSON (" + ec.message() + ")");
  }
  if (!options.kwargs_json.empty()) {
    boost::json::value kwargs = detail::parse_request_json(options.kwargs_json, ec);
    if (ec || !kwargs.is_object())
      return make_error(Errc::invalid_argument, "chat_template_kwargs: not a JSON object");
    // Extra variables only: what the request's own fields, the model or the
    // template language name is not theirs to replace.
    for (const auto& [key, value] : kwargs.get_object())
      if (jinja::is_reserved_chat_name(key))
        return make_error(Errc::invalid_argument,
                          "chat_template_kwargs: '" + std::string(key) +
                              "' is set by the request's own fields, the model or the template language");
    inputs.kwargs = std::move(kwargs.get_object());
  }
  inputs.add_generation_prompt = options.add_generation_prompt;
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
  auto source = read_template_file(path);
  if (!source) return source.error();
  auto parsed = jinja::Template::parse(*source);
  if (!parsed) return make_error(Errc::bad_format, path + ": " + parsed.error().message);
  return std::make_shared<const ChatTemplate>(std::move(*parsed), *source, path, tokenizer);
}

}  // namespace conveyor::http
