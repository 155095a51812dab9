#include "http/chat_template.hpp"

namespace conveyor::http {

const char* to_string(ChatTemplateKind kind) {
  switch (kind) {
    case ChatTemplateKind::plain: return "plain";
    case ChatTemplateKind::llama2: return "llama2";
    case ChatTemplateKind::chatml: return "chatml";
  }
  return "?";
}

Expected<ChatTemplateKind> parse_chat_template_kind(std::string_view name) {
  if (name == "plain") return ChatTemplateKind::plain;
  if (name == "llama2") return ChatTemplateKind::llama2;
  if (name == "chatml") return ChatTemplateKind::chatml;
  return make_error(Errc::invalid_argument, "unknown chat template '" + std::string(name) +
                                                "' (auto, plain, llama2 or chatml)");
}

ChatTemplateKind detect_chat_template(std::string_view gguf_template) {
  if (gguf_template.find("<|im_start|>") != std::string_view::npos) return ChatTemplateKind::chatml;
  if (gguf_template.find("[INST]") != std::string_view::npos) return ChatTemplateKind::llama2;
  return ChatTemplateKind::plain;
}

ChatTemplate::ChatTemplate(ChatTemplateKind kind, std::shared_ptr<const Tokenizer> tokenizer)
    : kind_(kind), tokenizer_(std::move(tokenizer)) {
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
  }
  return out;
}

std::vector<int32_t> ChatTemplate::encode(const std::vector<ChatMessage>& messages) const {
  std::vector<int32_t> ids;
  for (const Fragment& f : fragments(messages)) {
    if (f.special >= 0) {
      ids.push_back(f.special);
    } else {
      const std::vector<int32_t> piece = tokenizer_->encode(f.text, /*add_bos=*/false);
      ids.insert(ids.end(), piece.begin(), piece.end());
    }
  }
  return ids;
}

std::string ChatTemplate::render(const std::vector<ChatMessage>& messages) const {
  std::string out;
  for (const Fragment& f : fragments(messages)) out += f.text;
  return out;
}

}  // namespace conveyor::http
