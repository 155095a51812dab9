// SentencePiece-style tokenizer, matching llama.cpp's llm_tokenizer_spm.
//
// Encoding: optionally prepend a space, write spaces as U+2581 ("▁"), split
// into UTF-8 characters, then repeatedly merge the adjacent pair whose
// concatenation is a vocabulary piece with the highest score (ties: leftmost
// first). Pairs wait in a priority queue and symbols form a linked list, so a
// merge costs O(log n) and a prompt of n characters O(n log n). A symbol that
// is not a piece falls back to its bytes as `<0xNN>` tokens, or to the unknown
// token when the vocabulary has no byte tokens.
//
// Added tokens (user-defined always, control with parse_special) are cut out
// of the text first (tokenizer.hpp); as in llama.cpp, each stretch of text
// that starts the input or follows such a token gets the leading space.
// Merges produce only normal and user-defined pieces: control tokens, the
// unknown token and byte tokens never come from merging.
#include <array>
#include <optional>
#include <string>
#include <vector>

#include "model/tokenizer/tokenizer.hpp"
#include "model/tokenizer/symbol_merge.hpp"
#include "model/tokenizer/utf8.hpp"
#include "model/tokenizer/vocabulary.hpp"

namespace conveyor {
namespace {

using tokenizer_detail::find_piece;
using tokenizer_detail::PieceIndex;

constexpr std::string_view kSpaceMark = "\xE2\x96\x81";  // U+2581 "▁"

std::string escape_spaces(std::string_view text, bool add_space_prefix) {
  std::string out;
  out.reserve(text.size() + text.size() / 4 + kSpaceMark.size());
  if (add_space_prefix) out.append(kSpaceMark);
  for (char c : text) {
    if (c == ' ') {
      out.append(kSpaceMark);
    } else {
      out.push_back(c);
    }
  }
  return out;
}

std::string unescape_spaces(std::string_view piece) {
  std::string out;
  out.reserve(piece.size());
  size_t pos = 0;
  while (pos < piece.size()) {
    const size_t mark = piece.find(kSpaceMark, pos);
    if (mark == std::string_view::npos) {
      out.append(piece.substr(pos));
      break;
    }
    out.append(piece.substr(pos, mark - pos));
    out.push_back(' ');
    pos = mark + kSpaceMark.size();
  }
  return out;
}

using tokenizer_detail::Symbol;

class SentencePieceTokenizer final : public Tokenizer {
 public:
  explicit SentencePieceTokenizer(Vocabulary vocab) : vocab_(std::move(vocab)) {
    bos_id_ = vocab_.bos_id;
    eos_id_ = vocab_.eos_id;
    add_bos_ = vocab_.add_bos;
    set_added_tokens(vocab_);
    byte_ids_.fill(-1);
    const auto n = static_cast<int32_t>(vocab_.pieces.size());
    for (int32_t id = 0; id < n; ++id) {
      const std::string& piece = vocab_.pieces[id];
      const TokenType type = vocab_.types[id];
      if (type == TokenType::byte) {
        const auto byte = tokenizer_detail::parse_byte_piece(piece);
        if (byte && byte_ids_[*byte] < 0) byte_ids_[*byte] = id;
      } else if (tokenizer_detail::is_encodable(type) && !piece.empty()) {
        index_.emplace(piece, id);  // the first of duplicate pieces wins
      }
    }
  }

  int32_t vocab_size() const override { return static_cast<int32_t>(vocab_.pieces.size()); }

  std::string token_bytes(int32_t id) const override {
    return tokenizer_detail::token_bytes(vocab_, id, &unescape_spaces, false);
  }

  std::string decode(std::span<const int32_t> ids) const override {
    std::string bytes;
    bool at_start = true;
    for (int32_t id : ids) {
      std::string text = token_bytes(id);
      if (text.empty()) continue;  // BOS and other control tokens
      if (at_start && vocab_.add_space_prefix && text.front() == ' ') text.erase(0, 1);
      at_start = false;
      bytes += text;
    }
    return utf8::sanitize(bytes);
  }

  std::string piece(int32_t id) const override {
    if (id < 0 || id >= vocab_size()) return {};
    return vocab_.pieces[id];
  }

 protected:
  void encode_text(std::string_view text, bool follows_token,
                   std::vector<int32_t>& out) const override {
    const std::string escaped = escape_spaces(text, vocab_.add_space_prefix && follows_token);
    std::vector<Symbol> symbols;
    tokenizer_detail::split_characters(escaped, symbols);
    merge(escaped, symbols);
    out.reserve(out.size() + symbols.size());
    for (ptrdiff_t i = 0; i != -1; i = symbols[i].next) {
      append_symbol(std::string_view(escaped).substr(symbols[i].offset, symbols[i].length), out);
    }
  }

 private:
  // Merges by score: a pair merges when its joined text is a piece, the
  // highest score first.
  void merge(std::string_view text, std::vector<Symbol>& symbols) const {
    tokenizer_detail::merge_symbols(text, symbols, [&](std::string_view merged, size_t)
                                                      -> std::optional<double> {
      const int32_t id = find_piece(index_, merged);
      if (id < 0) return std::nullopt;
      return double(vocab_.scores[id]);
    });
  }

  void append_symbol(std::string_view symbol, std::vector<int32_t>& out) const {
    const int32_t id = find_piece(index_, symbol);
    if (id >= 0) {
      out.push_back(id);
      return;
    }
    bool all_bytes = true;
    for (char c : symbol) all_bytes = all_bytes && byte_ids_[static_cast<uint8_t>(c)] >= 0;
    if (all_bytes) {
      for (char c : symbol) out.push_back(byte_ids_[static_cast<uint8_t>(c)]);
    } else if (vocab_.unk_id >= 0) {
      out.push_back(vocab_.unk_id);
    }
    // Without byte tokens or an unknown token the character is dropped.
  }

  Vocabulary vocab_;
  PieceIndex index_;                   // pieces that text can produce
  std::array<int32_t, 256> byte_ids_;  // byte -> its `<0xNN>` token, or -1
};

}  // namespace

Expected<std::unique_ptr<Tokenizer>> make_sentencepiece_tokenizer(Vocabulary vocab) {
  if (Status status = tokenizer_detail::normalize_vocabulary(vocab, "sentencepiece"); !status) {
    return status.error();
  }
  return std::unique_ptr<Tokenizer>(std::make_unique<SentencePieceTokenizer>(std::move(vocab)));
}

}  // namespace conveyor
