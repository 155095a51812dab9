// The byte tokenizer: token b < 256 is byte b, 256 is BOS, 257 is EOS.
#include <string>
#include <vector>

#include "model/tokenizer/tokenizer.hpp"
#include "model/tokenizer/utf8.hpp"

namespace conveyor {
namespace {

constexpr int32_t kBos = 256;
constexpr int32_t kEos = 257;

class ByteTokenizer final : public Tokenizer {
 public:
  ByteTokenizer() {
    bos_id_ = kBos;
    eos_id_ = kEos;
    // BOS and EOS are control tokens: "<s>" and "</s>" in a text read with
    // parse_special (a chat template's bos_token, /tokenize of what
    // /detokenize wrote) are those tokens, not their bytes.
    Vocabulary vocab;
    for (int32_t id = 0; id <= kEos; ++id) {
      vocab.pieces.push_back(piece(id));
      vocab.types.push_back(id < kBos ? TokenType::byte : TokenType::control);
    }
    set_added_tokens(vocab);
  }

  int32_t vocab_size() const override { return 258; }

  std::string token_bytes(int32_t id) const override {
    if (id < 0 || id > 255) return {};
    return std::string(1, static_cast<char>(id));
  }

  std::string decode(std::span<const int32_t> ids) const override {
    std::string bytes;
    bytes.reserve(ids.size());
    for (int32_t id : ids) {
      if (id >= 0 && id <= 255) bytes.push_back(static_cast<char>(id));
    }
    return utf8::sanitize(bytes);
  }

  std::string piece(int32_t id) const override {
    if (id == kBos) return "<s>";
    if (id == kEos) return "</s>";
    if (id < 0 || id > 255) return {};
    static constexpr char kHex[] = "0123456789ABCDEF";
    return std::string{'<', '0', 'x', kHex[id >> 4], kHex[id & 15], '>'};
  }

 protected:
  void encode_text(std::string_view text, bool, std::vector<int32_t>& out) const override {
    out.reserve(out.size() + text.size());
    for (char c : text) out.push_back(static_cast<uint8_t>(c));
  }
};

}  // namespace

std::unique_ptr<Tokenizer> make_byte_tokenizer() { return std::make_unique<ByteTokenizer>(); }

}  // namespace conveyor
