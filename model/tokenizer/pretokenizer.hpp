// Byte-level BPE pre-tokenizers, by their GGUF name (tokenizer.ggml.pre).
//
// A pre-tokenizer cuts text into words; BPE merges then run inside each word.
// Each name stands for a sequence of regular expressions, as in llama.cpp's
// llm_tokenizer_bpe and in Hugging Face's Sequence of Split(behavior=Isolated)
// pre-tokenizers: the first expression cuts the text into its matches and the
// stretches between them, and each following expression cuts every piece
// again. The expressions are those of the models' tokenizer.json files, run
// by ICU's regex engine, so the Unicode classes are exact (ICU 72: Unicode
// 15.0). `\s` means Unicode White_Space there, as in Hugging Face's Oniguruma
// and in llama.cpp (ICU's own `\s` leaves out \v and U+0085). The three
// expressions most vocabularies use run as hand-written equivalents, three to
// five times faster (word_splitters.hpp).
//
// Bytes that are not well-formed UTF-8 are pieces of one byte each; the text
// between them is split as if they were its ends. Every byte of the input
// lands in exactly one piece, in order.
//
// Some names also say how to normalize text before splitting: qwen2 means NFC
// (Qwen's tokenizer.json has an NFC normalizer; llama.cpp skips it, Hugging
// Face does not). The names, their expressions and their sources are listed in
// pretokenizer.cpp. A PreTokenizer is immutable and safe to share between
// threads; each split() call makes its own matchers.
#pragma once

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.hpp"

namespace conveyor::tokenizer_detail {

class PreTokenizer {
 public:
  // The pre-tokenizer `name` stands for ("" is GPT-2's); Errc::unsupported,
  // naming it, when conveyor does not know the name. The GPT-2, Llama 3 and
  // Qwen 2 expressions run as hand-written splitters (word_splitters.hpp)
  // unless `builtin_splitters` is false (tests compare the two).
  static Expected<std::shared_ptr<const PreTokenizer>> create(std::string_view name,
                                                              bool builtin_splitters = true);
  ~PreTokenizer();

  // Whether a word that is itself a vocabulary piece becomes that token
  // without running merges (Hugging Face's ignore_merges: Llama 3, Tekken).
  bool ignore_merges() const;

  // `text` normalized as the name asks (into `storage`), or `text` itself.
  std::string_view normalize(std::string_view text, std::string& storage) const;

  // Appends to `pieces` consecutive non-empty views of `text` that cover it.
  void split(std::string_view text, std::vector<std::string_view>& pieces) const;

  struct Rules;
  struct Compiled;

 private:
  PreTokenizer(const Rules& rules, std::unique_ptr<Compiled> compiled);

  const Rules& rules_;
  std::unique_ptr<Compiled> compiled_;
};

// Whether pre-tokenizer `name` starts sequences with BOS when the file does
// not say (llama.cpp's defaults); false for unknown names.
bool pretokenizer_adds_bos(std::string_view name);

// Every name PreTokenizer::create knows.
std::vector<std::string_view> pretokenizer_names();

}  // namespace conveyor::tokenizer_detail
