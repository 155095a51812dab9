// Chat templates: `messages` to prompt token ids.
//
// The model's own template is a Jinja program (GGUF tokenizer.chat_template,
// or a file named by --chat-template), rendered as Hugging Face renders it
// (template/jinja) with messages, tools, the request's template variables,
// add_generation_prompt, bos_token and eos_token. The rendered text is
// encoded with special tokens parsed, except inside the bytes that came from
// the request (message roles and contents, tools, its variables): typing
// "<|im_start|>" into a message cannot forge a control token. When the text
// already starts with BOS, no second BOS is added.
//
// Three built-in formats remain, by name or as the fallback for a model
// without a template (or whose template does not parse here):
//   llama2  <s>[INST] <<SYS>>\n{system}\n<</SYS>>\n\n{user} [/INST] {assistant} </s><s>[INST] ...
//   chatml  <|im_start|>{role}\n{content}<|im_end|>\n ... <|im_start|>assistant\n
//   plain   {system}\n\nUser: {user}\nAssistant: {assistant}\n ... Assistant:
// Their special tokens go in as ids and their text as plain text; the last
// opening of the assistant's turn only with add_generation_prompt.
//
// Thread-safety: immutable after construction.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "http/api_types.hpp"
#include "base/status.hpp"
#include "model/tokenizer/tokenizer.hpp"
#include "template/jinja/jinja.hpp"

namespace conveyor::http {

enum class ChatTemplateKind : uint8_t { plain, llama2, chatml, jinja };

const char* to_string(ChatTemplateKind kind);
// The --chat-template setting other than "auto": "plain", "llama2", "chatml",
// or a readable template file (jinja); anything else is invalid_argument.
Expected<ChatTemplateKind> parse_chat_template_kind(std::string_view name);
// The built-in format whose markers a GGUF chat template shows ("<|im_start|>"
// chatml, "[INST]" llama2, else plain): the fallback for templates that do
// not parse here.
ChatTemplateKind detect_chat_template(std::string_view gguf_template);

// What a request adds to its messages.
struct ChatApplyOptions {
  std::string_view tools_json;        // a JSON array of tool schemas, or ""
  std::string_view kwargs_json;       // chat_template_kwargs: a JSON object, or "" (Jinja templates only)
  bool add_generation_prompt = true;  // end with the assistant's turn opened
};

// A prompt: the text, the ranges of it that came from the request, its ids.
struct ChatPrompt {
  std::string text;             // special tokens spelled out
  std::vector<TextRange> data;  // the request's bytes (empty for the built-in formats)
  std::vector<int32_t> ids;
};

class ChatTemplate {
 public:
  // A built-in format; `tokenizer` must not be null. `note` goes after the
  // name in description().
  ChatTemplate(ChatTemplateKind kind, std::shared_ptr<const Tokenizer> tokenizer, std::string_view note = {});
  // A Jinja template parsed from `text`; `origin` says where it came from, for the start-up line.
  ChatTemplate(jinja::Template source, std::string text, std::string origin,
               std::shared_ptr<const Tokenizer> tokenizer);

  ChatTemplateKind kind() const { return kind_; }
  // "chatml", "jinja (GGUF tokenizer.chat_template)", "chatml (... does not parse: line 3: ...)".
  const std::string& description() const { return description_; }
  // The Jinja template's text ("" for the built-in formats): it shows the
  // model's tool call syntax (http/tool_call_format.hpp).
  const std::string& source() const { return source_; }

  // The prompt for `messages`. A template's raise_exception(), a type error
  // in it or bad tools JSON is an Error (invalid_argument) to report to the
  // client.
  Expected<ChatPrompt> apply(const std::vector<ChatMessage>& messages, const ChatApplyOptions& options = {}) const;

 private:
  struct Fragment {
    int32_t special = -1;  // a token id, or -1 for text
    std::string text;      // the text, or the special token's spelling
  };
  std::vector<Fragment> fragments(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const;
  Fragment special(int32_t id, const char* spelling) const;
  ChatPrompt apply_builtin(const std::vector<ChatMessage>& messages, bool add_generation_prompt) const;
  Expected<ChatPrompt> apply_jinja(const std::vector<ChatMessage>& messages, const ChatApplyOptions& options) const;

  ChatTemplateKind kind_;
  std::string description_;
  std::string source_;
  std::shared_ptr<const Tokenizer> tokenizer_;
  std::shared_ptr<const jinja::Template> jinja_;  // kind jinja only
  int32_t im_start_ = -1;  // ChatML markers, when the vocabulary has them
  int32_t im_end_ = -1;
  bool adds_bos_ = false;  // the tokenizer puts BOS in front of an encoded prompt
};

// The chat template for `setting` (auto | plain | llama2 | chatml | a file)
// and a model whose GGUF carries `gguf_template` ("" when none). auto: the
// GGUF template, or the built-in format its markers suggest when it does
// not parse here (description() says why), or plain without one. A file
// that cannot be read or parsed is an Error naming it and the line.
Expected<std::shared_ptr<const ChatTemplate>> make_chat_template(std::string_view setting,
                                                                std::string_view gguf_template,
                                                                std::shared_ptr<const Tokenizer> tokenizer);

}  // namespace conveyor::http
