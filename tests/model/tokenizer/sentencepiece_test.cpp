#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <cstring>
#include <limits>
#include <optional>
#include <unordered_map>
#include <cstdio>
#include <string>
#include <vector>

#include "model/tokenizer/tokenizer.hpp"
#include "tests/model/tokenizer/test_util.hpp"

namespace conveyor {
namespace {

using Ids = std::vector<int32_t>;

// A small vocabulary: <unk> <s> </s>, optionally 256 byte tokens, then the
// pieces given (ids continue from there).
Vocabulary small_vocab(const std::vector<std::pair<std::string, float>>& pieces, bool bytes) {
  Vocabulary vocab;
  vocab.pieces = {"<unk>", "<s>", "</s>"};
  vocab.types = {TokenType::unknown, TokenType::control, TokenType::control};
  if (bytes) {
    for (int b = 0; b < 256; ++b) {
      char name[8];
      std::snprintf(name, sizeof name, "<0x%02X>", b);
      vocab.pieces.push_back(name);
      vocab.types.push_back(TokenType::byte);
    }
  }
  for (const auto& [piece, score] : pieces) {
    vocab.pieces.push_back(piece);
    vocab.types.push_back(TokenType::normal);
  }
  vocab.scores.assign(vocab.pieces.size(), 0.0f);
  for (size_t i = 0; i < pieces.size(); ++i) {
    vocab.scores[vocab.pieces.size() - pieces.size() + i] = pieces[i].second;
  }
  vocab.unk_id = 0;
  vocab.bos_id = 1;
  vocab.eos_id = 2;
  return vocab;
}

std::unique_ptr<Tokenizer> make(Vocabulary vocab) {
  auto tokenizer = make_sentencepiece_tokenizer(std::move(vocab));
  EXPECT_TRUE(tokenizer) << tokenizer.error().message;
  return tokenizer ? std::move(tokenizer).value() : nullptr;
}

TEST(SentencePiece, HighestScoringPairMergesFirst) {
  // ids: a=3 b=4 c=5 ab=6 bc=7
  auto vocab = small_vocab({{"a", 0}, {"b", 0}, {"c", 0}, {"ab", -1}, {"bc", -0.5f}}, false);
  vocab.add_space_prefix = false;
  auto tokenizer = make(vocab);
  ASSERT_TRUE(tokenizer);
  EXPECT_EQ(tokenizer->encode("abc", false), (Ids{3, 7}));

  vocab.scores[6] = -0.1f;  // now "ab" beats "bc"
  tokenizer = make(vocab);
  ASSERT_TRUE(tokenizer);
  EXPECT_EQ(tokenizer->encode("abc", false), (Ids{6, 5}));
}

TEST(SentencePiece, EqualScoresMergeLeftmostFirst) {
  auto vocab = small_vocab({{"a", 0}, {"aa", -1}}, false);
  vocab.add_space_prefix = false;
  const auto tokenizer = make(vocab);
  ASSERT_TRUE(tokenizer);
  EXPECT_EQ(tokenizer->encode("aaa", false), (Ids{4, 3}));
  EXPECT_EQ(tokenizer->encode("aaaa", false), (Ids{4, 4}));
}

TEST(SentencePiece, MergedPiecesKeepMerging) {
  // "▁ab" needs "▁a" first, then "▁a"+"b".
  const auto tokenizer = make(small_vocab(
      {{"\xE2\x96\x81", 0}, {"a", 0}, {"b", 0}, {"\xE2\x96\x81" "a", -2}, {"\xE2\x96\x81" "ab", -3}},
      false));
  ASSERT_TRUE(tokenizer);
  EXPECT_EQ(tokenizer->encode("ab", true), (Ids{1, 7}));
  EXPECT_EQ(tokenizer->encode("ab a", true), (Ids{1, 7, 6}));
  EXPECT_EQ(tokenizer->decode(Ids{1, 7, 6}), "ab a");
  EXPECT_EQ(tokenizer->token_bytes(7), " ab");
  EXPECT_EQ(tokenizer->piece(7), "\xE2\x96\x81" "ab");
}

TEST(SentencePiece, UnknownCharactersUseBytesOrUnk) {
  auto vocab = small_vocab({{"a", 0}}, false);
  vocab.add_space_prefix = false;
  auto tokenizer = make(vocab);
  ASSERT_TRUE(tokenizer);
  // No byte tokens: one unknown token per character not in the vocabulary.
  EXPECT_EQ(tokenizer->encode("a\xC3\xA9" "a", false), (Ids{3, 0, 3}));

  vocab = small_vocab({{"a", 0}}, true);  // "a" is id 259; byte b is id b + 3
  vocab.add_space_prefix = false;
  tokenizer = make(vocab);
  ASSERT_TRUE(tokenizer);
  const Ids ids = tokenizer->encode("a\xC3\xA9" "a", false);
  EXPECT_EQ(ids, (Ids{259, 0xC3 + 3, 0xA9 + 3, 259}));
  EXPECT_EQ(tokenizer->decode(ids), "a\xC3\xA9" "a");
  EXPECT_EQ(tokenizer->token_bytes(0x0A + 3), "\n");
}

TEST(SentencePiece, GuessesTypesWhenAbsent) {
  Vocabulary vocab;
  vocab.pieces = {"<unk>", "<s>", "</s>", "<0x41>", "x"};
  vocab.bos_id = 1;
  vocab.eos_id = 2;
  vocab.unk_id = 0;
  vocab.add_space_prefix = false;
  const auto tokenizer = make(vocab);
  ASSERT_TRUE(tokenizer);
  EXPECT_EQ(tokenizer->token_bytes(3), "A");   // a byte token
  EXPECT_EQ(tokenizer->token_bytes(1), "");    // control
  EXPECT_EQ(tokenizer->encode("xA", false), (Ids{4, 3}));  // "A" via its byte token
  // Control pieces are never matched from their spelling.
  const Ids ids = tokenizer->encode("<s>", false);
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 1), 0);
}

TEST(SentencePiece, RejectsInconsistentVocabularies) {
  Vocabulary empty;
  EXPECT_FALSE(make_sentencepiece_tokenizer(empty));

  auto vocab = small_vocab({{"a", 0}}, false);
  vocab.scores.pop_back();
  auto result = make_sentencepiece_tokenizer(vocab);
  ASSERT_FALSE(result);
  EXPECT_NE(result.error().message.find("scores"), std::string::npos) << result.error().message;

  vocab = small_vocab({{"a", 0}}, false);
  vocab.bos_id = 99;
  EXPECT_FALSE(make_sentencepiece_tokenizer(vocab));

  vocab = small_vocab({{"a", 0}}, false);
  vocab.scores[3] = std::numeric_limits<float>::quiet_NaN();
  EXPECT_FALSE(make_sentencepiece_tokenizer(vocab));

  vocab = small_vocab({{"a", 0}}, false);
  vocab.types[3] = static_cast<TokenType>(42);
  EXPECT_FALSE(make_sentencepiece_tokenizer(vocab));
}

TEST(SentencePiece, AddBosFollowsTheVocabulary) {
  auto vocab = small_vocab({{"a", 0}}, false);
  vocab.add_space_prefix = false;
  vocab.add_bos = false;
  const auto tokenizer = make(vocab);
  ASSERT_TRUE(tokenizer);
  EXPECT_EQ(tokenizer->encode("a", true), (Ids{3}));
}

// --- The real Llama 2 vocabulary ---------------------------------------------

TEST(SentencePieceLlama2, EncodesHelloWorld) {
  CONVEYOR_LLAMA2_TOKENIZER_OR_SKIP(tokenizer);
  EXPECT_EQ(tokenizer.vocab_size(), 32000);
  EXPECT_EQ(tokenizer.bos_id(), 1);
  EXPECT_EQ(tokenizer.eos_id(), 2);
  EXPECT_EQ(tokenizer.encode("Hello world", true), (Ids{1, 15043, 3186}));
  EXPECT_EQ(tokenizer.encode("Hello world", false), (Ids{15043, 3186}));
  EXPECT_EQ(tokenizer.encode("", true), (Ids{1}));
  EXPECT_EQ(tokenizer.piece(15043), "\xE2\x96\x81Hello");
  EXPECT_EQ(tokenizer.piece(1), "<s>");
  EXPECT_EQ(tokenizer.token_bytes(15043), " Hello");
  EXPECT_EQ(tokenizer.token_bytes(1), "");
  EXPECT_EQ(tokenizer.token_bytes(2), "");
  EXPECT_EQ(tokenizer.token_bytes(0x0A + 3), "\n");
  EXPECT_EQ(tokenizer.decode(Ids{1, 15043, 3186, 2}), "Hello world");
}

TEST(SentencePieceLlama2, EmojiFallsBackToBytes) {
  CONVEYOR_LLAMA2_TOKENIZER_OR_SKIP(tokenizer);
  // "▁" (29871) then the four bytes of U+1F999; byte b is token b + 3.
  EXPECT_EQ(tokenizer.encode("\xF0\x9F\xA6\x99", true),
            (Ids{1, 29871, 0xF0 + 3, 0x9F + 3, 0xA6 + 3, 0x99 + 3}));
}

TEST(SentencePieceLlama2, RoundTrips) {
  CONVEYOR_LLAMA2_TOKENIZER_OR_SKIP(tokenizer);
  const std::vector<std::string> texts = {
      "Hello world",
      "The quick brown fox jumps over the lazy dog.",
      "line one\nline two\n\n\tindented\twith tabs",
      "multiple   spaces    here ",
      " leading space",
      "  two leading spaces",
      "trailing newline\n",
      "\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E\xE3\x81\xAE\xE3\x83\x86\xE3\x82\xAD\xE3\x82\xB9\xE3\x83\x88",  // 日本語のテキスト
      "\xE4\xBD\xA0\xE5\xA5\xBD\xEF\xBC\x8C\xE4\xB8\x96\xE7\x95\x8C",  // 你好，世界
      "llama \xF0\x9F\xA6\x99 and \xF0\x9F\x98\x80\xF0\x9F\x91\x8D\xF0\x9F\x8F\xBD",  // emoji
      "caf\xC3\xA9 na\xC3\xAFve \xC3\x85ngstr\xC3\xB6m \xC5\x93uvre",  // accented Latin
      "\xEA\xB0\x80\xEB\x82\x98 \xE1\x83\x90\xE1\x83\x91 \xF0\x90\x8C\xB0",  // Hangul, Georgian, Gothic
      "<s> is not a control token </s>",
      "code: for (int i = 0; i < n; ++i) { x[i] += 1; }",
      "\x01\x02\x7F control bytes",
  };
  for (const std::string& text : texts) {
    const Ids ids = tokenizer.encode(text, true);
    ASSERT_FALSE(ids.empty());
    EXPECT_EQ(ids[0], 1);
    EXPECT_EQ(std::count(ids.begin() + 1, ids.end(), 1), 0) << text;
    EXPECT_EQ(std::count(ids.begin(), ids.end(), 0), 0) << "unknown token in: " << text;
    EXPECT_EQ(tokenizer.decode(ids), text);
  }
}

TEST(SentencePieceLlama2, InvalidUtf8InputDoesNotCrash) {
  CONVEYOR_LLAMA2_TOKENIZER_OR_SKIP(tokenizer);
  const std::string text = "ok\xFF\xC3(\xF0\x9F\xA6";
  const Ids ids = tokenizer.encode(text, true);
  for (int32_t id : ids) ASSERT_TRUE(id >= 0 && id < 32000);
  const std::string decoded = tokenizer.decode(ids);
  EXPECT_TRUE(test::valid_utf8(decoded));
  EXPECT_EQ(decoded, "ok\xEF\xBF\xBD\xEF\xBF\xBD(\xEF\xBF\xBD");
}

TEST(SentencePieceLlama2, DecodeToleratesAnyIds) {
  CONVEYOR_LLAMA2_TOKENIZER_OR_SKIP(tokenizer);
  uint32_t state = 7;
  for (int round = 0; round < 200; ++round) {
    Ids ids;
    for (int i = 0; i < 20; ++i) {
      state = state * 1664525u + 1013904223u;
      ids.push_back(static_cast<int32_t>(state % 32100) - 50);  // some out of range
    }
    ASSERT_TRUE(test::valid_utf8(tokenizer.decode(ids)));
  }
}

// The merge rule written the slow, obvious way (rescan every adjacent pair,
// take the highest score, leftmost on ties), over the vocabulary read straight
// from the file; the fast tokenizer must agree with it.
struct NaiveSpm {
  std::unordered_map<std::string, std::pair<int32_t, float>> pieces;  // encodable only

  static std::optional<NaiveSpm> load(const std::string& path) {
    const std::vector<uint8_t> bytes = test::read_bytes(path);
    NaiveSpm spm;
    size_t at = 4;
    for (int32_t id = 0; id < 32000; ++id) {
      float score;
      int32_t length;
      if (at + 8 > bytes.size()) return std::nullopt;
      std::memcpy(&score, bytes.data() + at, 4);
      std::memcpy(&length, bytes.data() + at + 4, 4);
      at += 8;
      if (length < 0 || at + length > bytes.size()) return std::nullopt;
      std::string piece(reinterpret_cast<const char*>(bytes.data() + at), length);
      at += length;
      if (id >= 3 + 256) {  // skip <unk>, <s>, </s> and the byte tokens
        std::string escaped;
        for (char c : piece) escaped += c == ' ' ? std::string("\xE2\x96\x81") : std::string(1, c);
        spm.pieces.emplace(escaped, std::make_pair(id, score));
      }
    }
    return spm;
  }

  Ids encode(std::string_view text) const {
    std::string s = "\xE2\x96\x81";
    for (char c : text) s += c == ' ' ? std::string("\xE2\x96\x81") : std::string(1, c);
    std::vector<std::string> symbols;
    for (size_t i = 0; i < s.size();) {
      const auto lead = static_cast<uint8_t>(s[i]);
      const size_t n = lead < 0x80 ? 1 : lead < 0xE0 ? 2 : lead < 0xF0 ? 3 : 4;
      symbols.push_back(s.substr(i, n));
      i += n;
    }
    for (;;) {
      size_t best = symbols.size();
      float best_score = 0;
      for (size_t i = 0; i + 1 < symbols.size(); ++i) {
        const auto it = pieces.find(symbols[i] + symbols[i + 1]);
        if (it != pieces.end() && (best == symbols.size() || it->second.second > best_score)) {
          best = i;
          best_score = it->second.second;
        }
      }
      if (best == symbols.size()) break;
      symbols[best] += symbols[best + 1];
      symbols.erase(symbols.begin() + static_cast<ptrdiff_t>(best) + 1);
    }
    Ids ids = {1};
    for (const std::string& symbol : symbols) {
      const auto it = pieces.find(symbol);
      if (it != pieces.end()) {
        ids.push_back(it->second.first);
      } else {
        for (char c : symbol) ids.push_back(static_cast<uint8_t>(c) + 3);
      }
    }
    return ids;
  }
};

TEST(SentencePieceLlama2, AgreesWithANaiveReference) {
  CONVEYOR_LLAMA2_TOKENIZER_OR_SKIP(tokenizer);
  const auto naive = NaiveSpm::load(tokenizer_path);
  ASSERT_TRUE(naive);
  std::vector<std::string> texts = {
      "Hello world", "The quick brown fox jumps over the lazy dog.",
      "  two spaces,   three spaces", "tabs\tand\nnewlines\n\n",
      "unbelievably antidisestablishmentarianism", "aaaaaaaaaaaaaaaaaaaaaaa",
      "\xE6\x97\xA5\xE6\x9C\xAC\xE8\xAA\x9E\xE3\x81\xAE\xE3\x83\x86\xE3\x82\xAD\xE3\x82\xB9\xE3\x83\x88",
      "caf\xC3\xA9 \xF0\x9F\xA6\x99 na\xC3\xAFve",
  };
  // Pseudo-random words from a small alphabet: many competing merges.
  uint32_t state = 3;
  const std::string alphabet = "etaoinshrdlu  ,.\n";
  for (int round = 0; round < 100; ++round) {
    std::string text;
    for (int i = 0; i < 60; ++i) {
      state = state * 1664525u + 1013904223u;
      text += alphabet[(state >> 16) % alphabet.size()];
    }
    texts.push_back(text);
  }
  for (const std::string& text : texts) {
    ASSERT_EQ(tokenizer.encode(text, true), naive->encode(text)) << text;
  }
}

TEST(SentencePieceLlama2, LongInputIsNotQuadratic) {
  CONVEYOR_LLAMA2_TOKENIZER_OR_SKIP(tokenizer);
  std::string text;
  while (text.size() < 20000) {
    text += "Once upon a time, a little llama \xF0\x9F\xA6\x99 found 42 shiny stones.\n";
  }
  const std::string same(20000, 'a');  // one long run of equal-score merges
  for (const std::string& input : std::vector<std::string>{text, same}) {
    const auto start = std::chrono::steady_clock::now();
    const Ids ids = tokenizer.encode(input, true);
    const auto ms = std::chrono::duration<double, std::milli>(
                        std::chrono::steady_clock::now() - start).count();
    RecordProperty("encode_ms", std::to_string(ms));
    std::printf("encoded %zu bytes into %zu tokens in %.1f ms\n", input.size(), ids.size(), ms);
    EXPECT_EQ(tokenizer.decode(ids), input);
  }
}

}  // namespace
}  // namespace conveyor
