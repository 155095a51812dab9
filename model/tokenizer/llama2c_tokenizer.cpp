// llama2.c tokenizer files: int32 max_token_length, then per token a float32
// score, an int32 byte length and the bytes, all little-endian.
//
// llama2.c's exporter wrote SentencePiece's "▁" as a plain space and BOS/EOS
// as "\n<s>\n" / "\n</s>\n"; the loader turns them back into SentencePiece
// spelling so the pieces look like those of a GGUF vocabulary.
#include <bit>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "model/tokenizer/tokenizer.hpp"

namespace conveyor {
namespace {

static_assert(std::endian::native == std::endian::little,
              "llama2.c tokenizer files are little-endian");

constexpr int32_t kUnkId = 0;
constexpr int32_t kBosId = 1;
constexpr int32_t kEosId = 2;
// Far above any real vocabulary; guards the reservations below against absurd sizes.
constexpr int32_t kMaxVocabSize = 1 << 22;

// Reads little-endian values from a byte span, never past its end.
class Reader {
 public:
  explicit Reader(std::span<const uint8_t> bytes) : bytes_(bytes) {}

  size_t offset() const { return offset_; }
  size_t remaining() const { return bytes_.size() - offset_; }

  template <class T>
  bool read(T& value) {
    if (remaining() < sizeof(T)) return false;
    std::memcpy(&value, bytes_.data() + offset_, sizeof(T));
    offset_ += sizeof(T);
    return true;
  }

  bool read_string(size_t length, std::string& out) {
    if (remaining() < length) return false;
    out.assign(reinterpret_cast<const char*>(bytes_.data() + offset_), length);
    offset_ += length;
    return true;
  }

 private:
  std::span<const uint8_t> bytes_;
  size_t offset_ = 0;
};

std::string to_sentencepiece_spelling(int32_t id, std::string piece) {
  if (id == kBosId && piece == "\n<s>\n") return "<s>";
  if (id == kEosId && piece == "\n</s>\n") return "</s>";
  std::string out;
  out.reserve(piece.size());
  for (char c : piece) {
    if (c == ' ') {
      out.append("\xE2\x96\x81");
    } else {
      out.push_back(c);
    }
  }
  return out;
}

Error format_error(const std::string& name, const std::string& problem) {
  return make_error(Errc::bad_format, name + ": " + problem);
}

}  // namespace

Expected<std::unique_ptr<Tokenizer>> parse_llama2c_tokenizer(std::span<const uint8_t> bytes,
                                                             int32_t vocab_size,
                                                             const std::string& name) {
  if (vocab_size <= kEosId || vocab_size > kMaxVocabSize) {
    return make_error(Errc::invalid_argument,
                      name + ": vocabulary size " + std::to_string(vocab_size) +
                          " is outside [3, " + std::to_string(kMaxVocabSize) + "]");
  }
  Reader reader(bytes);
  int32_t max_token_length = 0;
  if (!reader.read(max_token_length)) {
    return format_error(name, "file is too short for its header (" +
                                  std::to_string(bytes.size()) + " bytes)");
  }
  if (max_token_length < 0) {
    return format_error(name, "negative max_token_length " + std::to_string(max_token_length));
  }

  Vocabulary vocab;
  vocab.pieces.reserve(vocab_size);
  vocab.scores.reserve(vocab_size);
  for (int32_t id = 0; id < vocab_size; ++id) {
    const size_t token_offset = reader.offset();
    const auto where = [&] {
      return "token " + std::to_string(id) + " at offset " + std::to_string(token_offset);
    };
    float score = 0;
    int32_t length = 0;
    if (!reader.read(score) || !reader.read(length)) {
      return format_error(name, "truncated at " + where() + " (expected " +
                                    std::to_string(vocab_size) + " tokens)");
    }
    if (length < 0) {
      return format_error(name, where() + " has negative length " + std::to_string(length));
    }
    if (static_cast<size_t>(length) > reader.remaining()) {
      return format_error(name, where() + " has length " + std::to_string(length) + " but only " +
                                    std::to_string(reader.remaining()) + " bytes remain");
    }
    std::string piece;
    (void)reader.read_string(static_cast<size_t>(length), piece);
    vocab.pieces.push_back(to_sentencepiece_spelling(id, std::move(piece)));
    vocab.scores.push_back(score);
  }
  vocab.unk_id = kUnkId;
  vocab.bos_id = kBosId;
  vocab.eos_id = kEosId;
  vocab.add_bos = true;
  vocab.add_space_prefix = true;

  auto tokenizer = make_sentencepiece_tokenizer(std::move(vocab));
  if (!tokenizer) return format_error(name, tokenizer.error().message);
  return tokenizer;
}

Expected<std::unique_ptr<Tokenizer>> load_llama2c_tokenizer(const std::string& path,
                                                            int32_t vocab_size) {
  std::ifstream file(path, std::ios::binary);
  if (!file) return make_error(Errc::io_error, path + ": cannot open tokenizer file");
  file.seekg(0, std::ios::end);
  const std::streamoff size = file.tellg();
  file.seekg(0, std::ios::beg);
  if (size < 0 || !file) return make_error(Errc::io_error, path + ": cannot read tokenizer file");
  std::vector<uint8_t> bytes(static_cast<size_t>(size));
  if (!file.read(reinterpret_cast<char*>(bytes.data()), size)) {
    return make_error(Errc::io_error, path + ": read failed");
  }
  return parse_llama2c_tokenizer(bytes, vocab_size, path);
}

}  // namespace conveyor
