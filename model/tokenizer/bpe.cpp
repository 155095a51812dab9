// Byte-level BPE (GGUF "gpt2": GPT-2, Llama 3, Qwen 2, SmolLM), matching
// Hugging Face's BPE model with a ByteLevel pre-tokenizer and llama.cpp's
// llm_tokenizer_bpe.
//
// Encoding a stretch of text without added tokens: normalize it and split it
// into words as the vocabulary's pre-tokenizer says (pretokenizer.hpp); write
// each word's bytes as GPT-2's printable stand-ins (bytes_to_unicode: a space
// is "Ġ", a newline "Ċ"); when the pre-tokenizer ignores merges and the word
// is a piece, that is its token; otherwise split it into characters and
// repeatedly apply the adjacent merge with the lowest rank (ties: leftmost),
// using a priority queue over a linked list of symbols. A final symbol that is
// not in the vocabulary falls back to one token per character. Merges produce
// only normal and user-defined pieces.
// Decoding maps the stand-ins back to bytes. The vocabulary's
// add_space_prefix is ignored: byte-level BPE encodes spaces explicitly.
#include <array>
#include <optional>
#include <string>
#include <vector>

#include "model/tokenizer/pretokenizer.hpp"
#include "model/tokenizer/tokenizer.hpp"
#include "model/tokenizer/symbol_merge.hpp"
#include "model/tokenizer/utf8.hpp"
#include "model/tokenizer/vocabulary.hpp"

namespace conveyor {
namespace {

using tokenizer_detail::find_piece;
using tokenizer_detail::PieceIndex;
using tokenizer_detail::PreTokenizer;

// GPT-2's bytes_to_unicode: printable Latin-1 bytes stand for themselves; the
// other 68 bytes take code points 256, 257, ... in byte order.
struct ByteMap {
  std::array<std::string, 256> to_text;  // byte -> UTF-8 of its stand-in
  std::array<int16_t, 324> to_byte;      // stand-in code point -> byte, or -1

  ByteMap() {
    to_byte.fill(-1);
    uint32_t next_extra = 256;
    for (uint32_t b = 0; b < 256; ++b) {
      const bool printable = (b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174);
      const uint32_t cp = printable ? b : next_extra++;
      utf8::append_code_point(cp, to_text[b]);
      to_byte[cp] = static_cast<int16_t>(b);
    }
  }
};

const ByteMap& byte_map() {
  static const ByteMap map;
  return map;
}

using tokenizer_detail::Symbol;

class BpeTokenizer final : public Tokenizer {
 public:
  BpeTokenizer(Vocabulary vocab, PieceIndex merge_ranks,
               std::shared_ptr<const PreTokenizer> pre_tokenizer)
      : vocab_(std::move(vocab)),
        merge_ranks_(std::move(merge_ranks)),
        pre_tokenizer_(std::move(pre_tokenizer)) {
    bos_id_ = vocab_.bos_id;
    eos_id_ = vocab_.eos_id;
    add_bos_ = vocab_.add_bos;
    set_added_tokens(vocab_);
    const auto n = static_cast<int32_t>(vocab_.pieces.size());
    for (int32_t id = 0; id < n; ++id) {
      if (tokenizer_detail::is_encodable(vocab_.types[id]) && !vocab_.pieces[id].empty()) {
        index_.emplace(vocab_.pieces[id], id);
      }
    }
  }

  int32_t vocab_size() const override { return static_cast<int32_t>(vocab_.pieces.size()); }

  std::string token_bytes(int32_t id) const override {
    return tokenizer_detail::token_bytes(vocab_, id, &unmap_bytes, true);
  }

  std::string decode(std::span<const int32_t> ids) const override {
    std::string bytes;
    for (int32_t id : ids) bytes += token_bytes(id);
    return utf8::sanitize(bytes);
  }

  std::string piece(int32_t id) const override {
    if (id < 0 || id >= vocab_size()) return {};
    return vocab_.pieces[id];
  }

 protected:
  void encode_text(std::string_view text, bool, std::vector<int32_t>& out) const override {
    std::string normalized;
    text = pre_tokenizer_->normalize(text, normalized);
    std::vector<std::string_view> words;
    pre_tokenizer_->split(text, words);
    std::string mapped;
    std::string key;
    std::vector<Symbol> symbols;
    for (std::string_view word : words) {
      mapped.clear();
      for (char c : word) mapped += byte_map().to_text[static_cast<uint8_t>(c)];
      if (pre_tokenizer_->ignore_merges()) {
        if (const int32_t id = find_piece(index_, mapped); id >= 0) {
          out.push_back(id);
          continue;
        }
      }
      tokenizer_detail::split_characters(mapped, symbols);
      merge(mapped, symbols, key);
      for (ptrdiff_t i = 0; i != -1; i = symbols[i].next) {
        append_symbol(std::string_view(mapped).substr(symbols[i].offset, symbols[i].length), out);
      }
    }
  }

 private:
  // Merges by rank: a pair merges when "left right" is a merge rule, the
  // lowest rank first. `text` (the mapped word) is well-formed UTF-8 by
  // construction.
  void merge(std::string_view text, std::vector<Symbol>& symbols, std::string& key) const {
    tokenizer_detail::merge_symbols(text, symbols, [&](std::string_view merged, size_t left_length)
                                                      -> std::optional<double> {
      key.assign(merged.substr(0, left_length));
      key.push_back(' ');
      key.append(merged.substr(left_length));
      const int32_t rank = find_piece(merge_ranks_, key);
      if (rank < 0) return std::nullopt;
      return -double(rank);
    });
  }

  void append_symbol(std::string_view symbol, std::vector<int32_t>& out) const {
    if (const int32_t id = find_piece(index_, symbol); id >= 0) {
      out.push_back(id);
      return;
    }
    size_t pos = 0;
    while (pos < symbol.size()) {
      const size_t length = std::max<size_t>(1, utf8::char_length(symbol, pos));
      const int32_t id = find_piece(index_, symbol.substr(pos, length));
      if (id >= 0) {
        out.push_back(id);
      } else if (vocab_.unk_id >= 0) {
        out.push_back(vocab_.unk_id);
      }
      pos += length;
    }
  }

  // Stand-in characters back to bytes; characters outside the map (a
  // vocabulary that stores some pieces as plain text) are kept as they are.
  static std::string unmap_bytes(std::string_view piece) {
    std::string out;
    out.reserve(piece.size());
    size_t pos = 0;
    while (pos < piece.size()) {
      const size_t length = utf8::char_length(piece, pos);
      if (length == 0) {
        out.push_back(piece[pos++]);
        continue;
      }
      const uint32_t cp = utf8::decode_char(piece, pos, length);
      const auto& to_byte = byte_map().to_byte;
      if (cp < to_byte.size() && to_byte[cp] >= 0) {
        out.push_back(static_cast<char>(to_byte[cp]));
      } else {
        out.append(piece.substr(pos, length));
      }
      pos += length;
    }
    return out;
  }

  Vocabulary vocab_;
  PieceIndex index_;        // pieces that text can produce
  PieceIndex merge_ranks_;  // "left right" -> rank (0 merges first)
  std::shared_ptr<const PreTokenizer> pre_tokenizer_;
};

}  // namespace

Expected<std::unique_ptr<Tokenizer>> make_bpe_tokenizer(Vocabulary vocab) {
  if (Status status = tokenizer_detail::normalize_vocabulary(vocab, "bpe"); !status) {
    return status.error();
  }
  auto pre_tokenizer = PreTokenizer::create(vocab.pre);
  if (!pre_tokenizer) {
    return make_error(pre_tokenizer.error().code, "bpe vocabulary: " + pre_tokenizer.error().message);
  }
  if (vocab.merges.size() > static_cast<size_t>(INT32_MAX)) {
    return make_error(Errc::invalid_argument, "bpe vocabulary: too many merges");
  }
  PieceIndex merge_ranks;
  merge_ranks.reserve(vocab.merges.size());
  for (size_t rank = 0; rank < vocab.merges.size(); ++rank) {
    const std::string& merge = vocab.merges[rank];
    // Pieces never hold a plain space (it is written "Ġ"), so the first space
    // after the first character separates the halves.
    const size_t space = merge.size() > 1 ? merge.find(' ', 1) : std::string::npos;
    if (space == std::string::npos || space + 1 >= merge.size()) {
      return make_error(Errc::bad_format,
                        "bpe vocabulary: merge " + std::to_string(rank) + " '" + merge +
                            "' is not two pieces separated by a space");
    }
    merge_ranks.emplace(merge, static_cast<int32_t>(rank));  // the first duplicate wins
  }
  vocab.merges.clear();
  vocab.merges.shrink_to_fit();
  return std::unique_ptr<Tokenizer>(std::make_unique<BpeTokenizer>(
      std::move(vocab), std::move(merge_ranks), std::move(pre_tokenizer).value()));
}

bool bpe_adds_bos_by_default(std::string_view pre) {
  return tokenizer_detail::pretokenizer_adds_bos(pre);
}

}  // namespace conveyor
