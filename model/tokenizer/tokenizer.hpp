// Tokenizers: text to token ids and back.
//
// Three kinds, behind one interface:
//  - SentencePiece-style (llama2.c tokenizer files, GGUF `tokenizer.ggml.model`
//    = "llama"): pieces with scores, '▁' for a space, byte fallback through
//    `<0xNN>` tokens; encoding adds a leading space (llama.cpp convention).
//  - byte-level BPE (GGUF "gpt2": GPT-2, Llama 3, Qwen 2, SmolLM): GPT-2's
//    byte-to-unicode map and merges, after a pre-tokenizer chosen by name
//    (Vocabulary::pre; see pretokenizer.hpp for the names).
//  - bytes: token b < 256 is byte b; 256 is BOS, 257 is EOS (the embedded
//    default model).
// Added tokens in text (as llama.cpp's tokenizer_st_partition and Hugging
// Face's added tokens): user-defined tokens are always cut out of the text as
// their ids; control (and unknown) tokens only when EncodeOptions asks for it
// (parse_special), and never inside a verbatim range, so typing "<s>" or
// "<|im_start|>" into a message cannot forge a special token. Scanning from
// the left, the longest token that may match at a position wins (Hugging
// Face's rule; llama.cpp takes the longest tokens first over the whole text,
// which differs only where two tokens overlap). The text between them is
// encoded normally; SentencePiece gives each such stretch its leading space.
// Decoding drops control and unused tokens and shows the unknown token as
// U+FFFD; ids out of range decode to nothing.
// A Tokenizer is immutable after construction and safe to share between threads.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "base/status.hpp"

namespace conveyor {

namespace tokenizer_detail {
class AddedTokens;
}

// GGUF's tokenizer.ggml.token_type values.
enum class TokenType : uint8_t {
  normal = 1,
  unknown = 2,
  control = 3,
  user_defined = 4,
  unused = 5,
  byte = 6,
};

// A vocabulary as the file formats describe it; the tokenizer factories take it.
struct Vocabulary {
  std::vector<std::string> pieces;  // [n_vocab] token text as stored ("▁the", "<0x0A>", "Ġthe")
  std::vector<float> scores;        // [n_vocab] or empty
  std::vector<TokenType> types;     // [n_vocab] or empty (then guessed from the pieces)
  std::vector<std::string> merges;  // BPE merges "left right", highest priority first
  std::string pre;                  // BPE pre-tokenizer (GGUF tokenizer.ggml.pre); "": GPT-2's
  int32_t bos_id = -1;
  int32_t eos_id = -1;
  int32_t unk_id = -1;
  bool add_bos = true;           // encoding with add_bos prepends bos_id; false: never
  bool add_space_prefix = true;  // SentencePiece: encoding prepends a space (BPE ignores it)
};

struct TextRange {
  size_t begin = 0;  // byte offsets [begin, end)
  size_t end = 0;
};

struct EncodeOptions {
  // Prepend BOS when the vocabulary has one and wants it (Vocabulary::add_bos).
  bool add_bos = true;
  // Control tokens spelled in the text (<|im_start|>, <|eot_id|>, <s>) become
  // their ids. User-defined tokens are matched either way.
  bool parse_special = false;
  // Ranges of the text where parse_special does not apply (message content in
  // a rendered chat): a control token is matched only when it lies wholly
  // outside all of them. Any order; overlaps and ranges past the end are fine.
  std::span<const TextRange> verbatim = {};
};

class Tokenizer {
 public:
  virtual ~Tokenizer();

  virtual int32_t vocab_size() const = 0;
  int32_t bos_id() const { return bos_id_; }
  int32_t eos_id() const { return eos_id_; }

  // Token ids for `text` (see the top of this file for added tokens). Any
  // bytes are accepted: ill-formed UTF-8 goes through byte tokens where the
  // vocabulary has them.
  std::vector<int32_t> encode(std::string_view text, const EncodeOptions& options) const;
  // The same with parse_special off: plain text, BOS first when `add_bos`.
  std::vector<int32_t> encode(std::string_view text, bool add_bos) const {
    return encode(text, EncodeOptions{.add_bos = add_bos});
  }

  // The bytes that token `id` contributes to the text when it follows other
  // tokens: "▁the" gives " the", "<0x0A>" gives "\n", control tokens give "".
  // May be a partial UTF-8 character (byte tokens). Out-of-range ids give "".
  virtual std::string token_bytes(int32_t id) const = 0;

  // The text of a whole sequence as encode() produced it: the leading space
  // that encoding added is removed, control tokens are dropped, and bytes that
  // do not form valid UTF-8 become U+FFFD.
  virtual std::string decode(std::span<const int32_t> ids) const = 0;

  // The stored piece of `id`, for display and debugging.
  virtual std::string piece(int32_t id) const = 0;

  // Whether `id` is a control or unknown token that encode() reads from its
  // piece when parse_special is on (<s>, <|eot_id|>, <unk>).
  bool is_special(int32_t id) const;

 protected:
  Tokenizer();

  // Appends the ids of `text`, a stretch with no added token in it.
  // `follows_token` is true at the start of the input and right after an
  // added token (SentencePiece prefixes a space there).
  virtual void encode_text(std::string_view text, bool follows_token,
                           std::vector<int32_t>& out) const = 0;

  // Makes the control, unknown and user-defined tokens of `vocab` (which the
  // factories have checked) the added tokens that encode() cuts out of text.
  void set_added_tokens(const Vocabulary& vocab);

  int32_t bos_id_ = -1;
  int32_t eos_id_ = -1;
  bool add_bos_ = true;  // whether the vocabulary wants BOS (Vocabulary::add_bos)

 private:
  std::shared_ptr<const tokenizer_detail::AddedTokens> added_tokens_;  // null: none
};

// The factories check the vocabulary (sizes of scores/types, special ids in
// range, no NaN scores, well-formed merges, a known pre-tokenizer) and return
// an Error naming the problem; the caller adds the file name. Empty `types`
// are guessed: `<0xNN>` pieces are byte tokens, BOS/EOS and `<s>`/`</s>`
// control, unk `<unk>`. An unknown BPE pre-tokenizer name is Errc::unsupported:
// splitting text another way would give ids the model was not trained on.
Expected<std::unique_ptr<Tokenizer>> make_sentencepiece_tokenizer(Vocabulary vocab);
Expected<std::unique_ptr<Tokenizer>> make_bpe_tokenizer(Vocabulary vocab);
std::unique_ptr<Tokenizer> make_byte_tokenizer();

// Whether a byte-level BPE vocabulary with pre-tokenizer `pre` starts
// sequences with BOS when its file does not say (llama.cpp's defaults: the
// Llama 3 and Tekken names do, the others do not).
bool bpe_adds_bos_by_default(std::string_view pre);

// A llama2.c tokenizer file (int32 max_token_length, then per token: float32
// score, int32 length, bytes). `vocab_size` tokens are read; unk is 0, BOS 1,
// EOS 2. The exporter's spellings are undone: a space in a piece becomes "▁"
// and "\n<s>\n" / "\n</s>\n" become "<s>" / "</s>". Truncation, negative or
// oversized lengths give Errc::bad_format naming the file and the token.
Expected<std::unique_ptr<Tokenizer>> load_llama2c_tokenizer(const std::string& path,
                                                            int32_t vocab_size);
// The same from bytes in memory (what the fuzz target drives).
Expected<std::unique_ptr<Tokenizer>> parse_llama2c_tokenizer(std::span<const uint8_t> bytes,
                                                             int32_t vocab_size,
                                                             const std::string& name);

}  // namespace conveyor
