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
// Only normal and user-defined pieces can be produced from text: control
// tokens (`<s>`), the unknown token and byte tokens are never matched by their
// spelling, so typing "<s>" in a prompt cannot forge a BOS. (llama.cpp also
// splits user-defined tokens out of the text before merging; conveyor lets
// them take part in merges like normal pieces.)
#include <array>
#include <queue>
#include <string>
#include <vector>

#include "model/tokenizer/tokenizer.hpp"
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

// A run of the escaped text that is (so far) one token; merged-away symbols
// keep length 0.
struct Symbol {
  size_t offset;
  size_t length;
  ptrdiff_t prev;  // -1: none
  ptrdiff_t next;  // -1: none
};

// A candidate merge of symbols `left` and `right` (adjacent when queued).
struct Bigram {
  float score;
  size_t left;
  size_t right;
  size_t length;  // bytes of the merged text; stale when the symbols changed
};

struct LowerPriority {
  bool operator()(const Bigram& a, const Bigram& b) const {
    return a.score < b.score || (a.score == b.score && a.left > b.left);
  }
};

class SentencePieceTokenizer final : public Tokenizer {
 public:
  explicit SentencePieceTokenizer(Vocabulary vocab) : vocab_(std::move(vocab)) {
    bos_id_ = vocab_.bos_id;
    eos_id_ = vocab_.eos_id;
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

  std::vector<int32_t> encode(std::string_view text, bool add_bos) const override {
    std::vector<int32_t> out;
    if (add_bos && vocab_.add_bos && bos_id_ >= 0) out.push_back(bos_id_);
    if (text.empty()) return out;
    const std::string escaped = escape_spaces(text, vocab_.add_space_prefix);
    std::vector<Symbol> symbols = split_characters(escaped);
    merge(escaped, symbols);
    out.reserve(out.size() + symbols.size());
    for (ptrdiff_t i = 0; i != -1; i = symbols[i].next) {
      append_symbol(std::string_view(escaped).substr(symbols[i].offset, symbols[i].length), out);
    }
    return out;
  }

  std::string token_bytes(int32_t id) const override {
    if (id < 0 || id >= vocab_size()) return {};
    const std::string& piece = vocab_.pieces[id];
    switch (vocab_.types[id]) {
      case TokenType::normal:
      case TokenType::user_defined:
        return unescape_spaces(piece);
      case TokenType::byte:
        if (const auto byte = tokenizer_detail::parse_byte_piece(piece)) {
          return std::string(1, static_cast<char>(*byte));
        }
        return unescape_spaces(piece);
      case TokenType::unknown:
        return std::string(utf8::kReplacement);
      case TokenType::control:
      case TokenType::unused:
        return {};
    }
    return {};
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

 private:
  // One symbol per UTF-8 character; an ill-formed byte is a symbol of its own
  // (it will fall back to its byte token).
  static std::vector<Symbol> split_characters(std::string_view text) {
    std::vector<Symbol> symbols;
    symbols.reserve(text.size());
    size_t offset = 0;
    while (offset < text.size()) {
      size_t length = utf8::char_length(text, offset);
      if (length == 0) length = 1;
      const auto index = static_cast<ptrdiff_t>(symbols.size());
      offset += length;
      symbols.push_back({offset - length, length, index - 1,
                         offset == text.size() ? -1 : index + 1});
    }
    return symbols;
  }

  void merge(std::string_view text, std::vector<Symbol>& symbols) const {
    std::priority_queue<Bigram, std::vector<Bigram>, LowerPriority> queue;
    const auto try_add = [&](ptrdiff_t left, ptrdiff_t right) {
      if (left < 0 || right < 0) return;
      const Symbol& l = symbols[left];
      const size_t length = l.length + symbols[right].length;
      const int32_t id = find_piece(index_, text.substr(l.offset, length));
      if (id < 0) return;
      queue.push({vocab_.scores[id], static_cast<size_t>(left), static_cast<size_t>(right), length});
    };
    for (size_t i = 1; i < symbols.size(); ++i) try_add(i - 1, i);

    while (!queue.empty()) {
      const Bigram bigram = queue.top();
      queue.pop();
      Symbol& left = symbols[bigram.left];
      Symbol& right = symbols[bigram.right];
      // Lengths only grow, so equal lengths mean both symbols are unchanged.
      if (left.length == 0 || right.length == 0 ||
          left.length + right.length != bigram.length) {
        continue;
      }
      left.length += right.length;
      right.length = 0;
      left.next = right.next;
      if (right.next >= 0) symbols[right.next].prev = static_cast<ptrdiff_t>(bigram.left);
      try_add(left.prev, static_cast<ptrdiff_t>(bigram.left));
      try_add(static_cast<ptrdiff_t>(bigram.left), left.next);
    }
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
