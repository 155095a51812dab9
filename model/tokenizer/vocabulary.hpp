// Checks and defaults shared by the tokenizer factories (internal header).
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_map>

#include "base/status.hpp"
#include "model/tokenizer/tokenizer.hpp"

namespace conveyor::tokenizer_detail {

// Piece text to id, searchable with a string_view without building a string.
struct PieceHash {
  using is_transparent = void;
  size_t operator()(std::string_view s) const { return std::hash<std::string_view>{}(s); }
};
using PieceIndex = std::unordered_map<std::string, int32_t, PieceHash, std::equal_to<>>;

inline int32_t find_piece(const PieceIndex& index, std::string_view text) {
  const auto it = index.find(text);
  return it == index.end() ? -1 : it->second;
}

// Validates `vocab` for a tokenizer of kind `kind` ("sentencepiece", "bpe"):
// a non-empty vocabulary, scores/types either empty or one per piece, special
// ids in range or -1, no NaN scores. Fills empty scores with zeros and empty
// types with guesses (see guess_types). Errors name the kind and the problem.
Status normalize_vocabulary(Vocabulary& vocab, std::string_view kind);

// Types for a vocabulary that came without them (llama2.c files): `<0xNN>`
// pieces are byte tokens, the BOS/EOS ids and `<s>`/`</s>` are control, the
// unk id and `<unk>` are unknown, everything else is normal.
void guess_types(Vocabulary& vocab);

// The byte that a `<0xNN>` piece stands for (upper- or lower-case hex).
std::optional<uint8_t> parse_byte_piece(std::string_view piece);

// Whether encoding may produce a token of this type from plain text.
inline bool is_encodable(TokenType type) {
  return type == TokenType::normal || type == TokenType::user_defined;
}

// What token `id` decodes to, by its type: a normal piece through
// `decode_text` (BPE's byte map, SentencePiece's ▁ as a space); a
// user-defined piece as stored when `user_defined_raw` (BPE files keep added
// tokens as plain text), else through `decode_text`; a byte token's byte
// (a malformed one through `decode_text`); an unknown token U+FFFD; control
// and unused tokens, and ids out of range, nothing.
std::string token_bytes(const Vocabulary& vocab, int32_t id,
                        std::string (*decode_text)(std::string_view), bool user_defined_raw);

}  // namespace conveyor::tokenizer_detail
