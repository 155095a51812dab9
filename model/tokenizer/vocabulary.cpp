#include "model/tokenizer/vocabulary.hpp"

#include "model/tokenizer/utf8.hpp"

#include <cmath>
#include <string>

namespace conveyor::tokenizer_detail {
namespace {

std::optional<uint8_t> hex_digit(char c) {
  if (c >= '0' && c <= '9') return static_cast<uint8_t>(c - '0');
  if (c >= 'A' && c <= 'F') return static_cast<uint8_t>(c - 'A' + 10);
  if (c >= 'a' && c <= 'f') return static_cast<uint8_t>(c - 'a' + 10);
  return std::nullopt;
}

bool id_in_range(int32_t id, size_t n) {
  return id == -1 || (id >= 0 && static_cast<size_t>(id) < n);
}

}  // namespace

std::optional<uint8_t> parse_byte_piece(std::string_view piece) {
  if (piece.size() != 6 || piece.substr(0, 3) != "<0x" || piece[5] != '>') return std::nullopt;
  const auto high = hex_digit(piece[3]);
  const auto low = hex_digit(piece[4]);
  if (!high || !low) return std::nullopt;
  return static_cast<uint8_t>(*high * 16 + *low);
}

void guess_types(Vocabulary& vocab) {
  const size_t n = vocab.pieces.size();
  vocab.types.assign(n, TokenType::normal);
  for (size_t i = 0; i < n; ++i) {
    const std::string& piece = vocab.pieces[i];
    if (parse_byte_piece(piece)) {
      vocab.types[i] = TokenType::byte;
    } else if (piece == "<s>" || piece == "</s>") {
      vocab.types[i] = TokenType::control;
    } else if (piece == "<unk>") {
      vocab.types[i] = TokenType::unknown;
    }
  }
  for (int32_t id : {vocab.bos_id, vocab.eos_id}) {
    if (id >= 0 && static_cast<size_t>(id) < n) vocab.types[id] = TokenType::control;
  }
  if (vocab.unk_id >= 0 && static_cast<size_t>(vocab.unk_id) < n) {
    vocab.types[vocab.unk_id] = TokenType::unknown;
  }
}

Status normalize_vocabulary(Vocabulary& vocab, std::string_view kind) {
  const std::string what = std::string(kind) + " vocabulary: ";
  const size_t n = vocab.pieces.size();
  if (n == 0) return make_error(Errc::invalid_argument, what + "no tokens");
  if (n > static_cast<size_t>(INT32_MAX)) {
    return make_error(Errc::invalid_argument, what + "too many tokens");
  }
  if (!vocab.scores.empty() && vocab.scores.size() != n) {
    return make_error(Errc::invalid_argument,
                      what + std::to_string(vocab.scores.size()) + " scores for " +
                          std::to_string(n) + " tokens");
  }
  if (!vocab.types.empty() && vocab.types.size() != n) {
    return make_error(Errc::invalid_argument,
                      what + std::to_string(vocab.types.size()) + " token types for " +
                          std::to_string(n) + " tokens");
  }
  const struct { const char* name; int32_t id; } specials[] = {
      {"BOS", vocab.bos_id}, {"EOS", vocab.eos_id}, {"unknown", vocab.unk_id}};
  for (const auto& special : specials) {
    if (!id_in_range(special.id, n)) {
      return make_error(Errc::invalid_argument,
                        what + special.name + " id " + std::to_string(special.id) +
                            " is outside [0, " + std::to_string(n) + ")");
    }
  }
  for (size_t i = 0; i < vocab.scores.size(); ++i) {
    if (std::isnan(vocab.scores[i])) {
      return make_error(Errc::bad_format, what + "token " + std::to_string(i) + " has a NaN score");
    }
  }
  for (size_t i = 0; i < vocab.types.size(); ++i) {
    const auto type = static_cast<uint8_t>(vocab.types[i]);
    if (type < static_cast<uint8_t>(TokenType::normal) || type > static_cast<uint8_t>(TokenType::byte)) {
      return make_error(Errc::bad_format,
                        what + "token " + std::to_string(i) + " has unknown type " +
                            std::to_string(type));
    }
  }
  if (vocab.scores.empty()) vocab.scores.assign(n, 0.0f);
  if (vocab.types.empty()) guess_types(vocab);
  return Status::ok();
}

std::string token_bytes(const Vocabulary& vocab, int32_t id,
                        std::string (*decode_text)(std::string_view), bool user_defined_raw) {
  if (id < 0 || static_cast<size_t>(id) >= vocab.pieces.size()) return {};
  const std::string& piece = vocab.pieces[id];
  switch (vocab.types[id]) {
    case TokenType::normal:
      return decode_text(piece);
    case TokenType::user_defined:
      return user_defined_raw ? piece : decode_text(piece);
    case TokenType::byte:
      if (const auto byte = parse_byte_piece(piece)) return std::string(1, static_cast<char>(*byte));
      return decode_text(piece);
    case TokenType::unknown:
      return std::string(utf8::kReplacement);
    case TokenType::control:
    case TokenType::unused:
      return {};
  }
  return {};
}

}  // namespace conveyor::tokenizer_detail
