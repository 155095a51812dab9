// Tokenizers: text to token ids and back.
//
// Three kinds, behind one interface:
//  - SentencePiece-style (llama2.c tokenizer files, GGUF `tokenizer.ggml.model`
//    = "llama"): pieces with scores, '▁' for a space, byte fallback through
//    `<0xNN>` tokens; encoding adds a leading space (llama.cpp convention).
//  - byte-level BPE (GGUF "gpt2"): GPT-2's byte-to-unicode map and merges.
//  - bytes: token b < 256 is byte b; 256 is BOS, 257 is EOS (the embedded
//    default model).
// Shared rules: control tokens are never produced from plain text (typing
// "<s>" does not forge a BOS); decoding drops control and unused tokens and
// shows the unknown token as U+FFFD; ids out of range decode to nothing.
// A Tokenizer is immutable after construction and safe to share between threads.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "model/status.hpp"

namespace conveyor {

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
  int32_t bos_id = -1;
  int32_t eos_id = -1;
  int32_t unk_id = -1;
  bool add_bos = true;           // encode(..., add_bos=true) prepends bos_id; false: never
  bool add_space_prefix = true;  // SentencePiece: encoding prepends a space (BPE ignores it)
};

class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  virtual int32_t vocab_size() const = 0;
  int32_t bos_id() const { return bos_id_; }
  int32_t eos_id() const { return eos_id_; }

  // Token ids for `text`, with the BOS id first when `add_bos` (and the
  // vocabulary has a BOS and wants it). Any bytes are accepted: ill-formed
  // UTF-8 goes through byte tokens where the vocabulary has them.
  virtual std::vector<int32_t> encode(std::string_view text, bool add_bos) const = 0;

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

 protected:
  int32_t bos_id_ = -1;
  int32_t eos_id_ = -1;
};

// The factories check the vocabulary (sizes of scores/types, special ids in
// range, no NaN scores, well-formed merges) and return an Error naming the
// problem; the caller adds the file name. Empty `types` are guessed: `<0xNN>`
// pieces are byte tokens, BOS/EOS and `<s>`/`</s>` control, unk `<unk>`.
Expected<std::unique_ptr<Tokenizer>> make_sentencepiece_tokenizer(Vocabulary vocab);
Expected<std::unique_ptr<Tokenizer>> make_bpe_tokenizer(Vocabulary vocab);
std::unique_ptr<Tokenizer> make_byte_tokenizer();

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
