// Chat templates: `messages` to prompt token ids.
//
// Three formats, chosen by name in the server config or, with "auto", from
// the model's GGUF tokenizer.chat_template text by its markers:
//   llama2  <s>[INST] <<SYS>>\n{system}\n<</SYS>>\n\n{user} [/INST] {assistant} </s><s>[INST] ...
//   chatml  <|im_start|>{role}\n{content}<|im_end|>\n ... <|im_start|>assistant\n
//   plain   {system}\n\nUser: {user}\nAssistant: {assistant}\n ... Assistant:
// (auto: "<|im_start|>" means chatml, "[INST]" llama2, anything else plain;
// the embedded byte-tokenizer model has no template, so plain.)
//
// Special tokens (BOS/EOS, <|im_start|>, <|im_end|>) are inserted as ids, not
// typed as text, since tokenizers never produce control tokens from text;
// the text between them is encoded piece by piece, as llama.cpp does. A
// marker the vocabulary lacks is encoded as plain text.
//
// Thread-safety: immutable after construction.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "http/api_types.hpp"
#include "model/status.hpp"
#include "model/tokenizer/tokenizer.hpp"

namespace conveyor::http {

enum class ChatTemplateKind : uint8_t { plain, llama2, chatml };

const char* to_string(ChatTemplateKind kind);
// "plain", "llama2", "chatml"; anything else is invalid_argument.
Expected<ChatTemplateKind> parse_chat_template_kind(std::string_view name);
// What "auto" picks for a model whose GGUF chat template is `gguf_template`.
ChatTemplateKind detect_chat_template(std::string_view gguf_template);

class ChatTemplate {
 public:
  // `tokenizer` must not be null.
  ChatTemplate(ChatTemplateKind kind, std::shared_ptr<const Tokenizer> tokenizer);

  ChatTemplateKind kind() const { return kind_; }
  // The prompt for `messages`, ending with the assistant's turn opened.
  std::vector<int32_t> encode(const std::vector<ChatMessage>& messages) const;
  // The same as text, special tokens spelled out (for tests and logs).
  std::string render(const std::vector<ChatMessage>& messages) const;

 private:
  struct Fragment {
    int32_t special = -1;  // a token id, or -1 for text
    std::string text;      // the text, or the special token's spelling
  };
  std::vector<Fragment> fragments(const std::vector<ChatMessage>& messages) const;
  Fragment special(int32_t id, const char* spelling) const;

  ChatTemplateKind kind_;
  std::shared_ptr<const Tokenizer> tokenizer_;
  int32_t im_start_ = -1;  // ChatML markers, when the vocabulary has them
  int32_t im_end_ = -1;
  bool adds_bos_ = false;  // the tokenizer puts BOS in front of an encoded prompt
};

}  // namespace conveyor::http
