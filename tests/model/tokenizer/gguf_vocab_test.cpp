// Tokenizers of real GGUF vocabularies (../shared/models): llama.cpp's prompt
// ids for the reference prompts, special tokens in text, end-of-generation ids
// and the pre-tokenizer key. Each test skips with a message when its file is missing.
#include <gtest/gtest.h>

#include <simdjson.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include "model/formats/gguf_writer.hpp"
#include "model/formats/gguf_llama.hpp"
#include "model/formats/gguf_reader.hpp"
#include "tests/model/tokenizer/shared_gguf_tokenizer.hpp"
#include "tests/shared_models.hpp"

namespace conveyor {
namespace {

namespace fs = std::filesystem;
using Ids = std::vector<int32_t>;

std::string shared(const std::string& name) { return test::shared_model_path(name); }

#define TOKENIZER_OR_SKIP(var, file)                          \
  std::string var##_why;                                      \
  const GgufTokenizer* var##_g = test::shared_gguf_tokenizer(file, var##_why); \
  if (var##_g == nullptr) GTEST_SKIP() << var##_why;          \
  ASSERT_NE(var##_g->tokenizer, nullptr);                     \
  const Tokenizer& var = *var##_g->tokenizer

// The text that `ids` stand for, with added tokens spelled as their pieces so
// that encoding with parse_special can give them back. For SentencePiece the
// space that encoding puts before each stretch of text is taken off again.
std::string text_of(const GgufTokenizer& g, const Ids& ids) {
  const Vocabulary& v = *g.vocabulary;
  const bool spm = g.model == "llama";
  std::string text;
  bool stretch_start = true;
  for (size_t i = 0; i < ids.size(); ++i) {
    const int32_t id = ids[i];
    if (i == 0 && id == v.bos_id && v.add_bos) continue;
    const TokenType type = v.types[id];
    if (type == TokenType::control || type == TokenType::user_defined || type == TokenType::unknown) {
      text += v.pieces[id];
      stretch_start = true;
      continue;
    }
    std::string bytes = g.tokenizer->token_bytes(id);
    if (spm && stretch_start && v.add_space_prefix && !bytes.empty() && bytes[0] == ' ') bytes.erase(0, 1);
    stretch_start = false;
    text += bytes;
  }
  return text;
}

// llama.cpp's ids for the reference prompts (its server tokenizes text with
// BOS where the model adds one and special tokens parsed). The files hold no
// text, so each prompt's text is rebuilt from its ids and must encode back to them.
void expect_reference_prompts_round_trip(const std::string& model, size_t min_prompts) {
  std::string why;
  const GgufTokenizer* g = test::shared_gguf_tokenizer(model + ".gguf", why);
  if (g == nullptr) GTEST_SKIP() << why;
  const std::string path = shared("reference/" + model + ".jsonl");
  if (!fs::exists(path)) GTEST_SKIP() << "needs " << path;
  std::ifstream in(path);
  std::string line;
  simdjson::dom::parser parser;
  size_t prompts = 0;
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    simdjson::dom::element doc;
    ASSERT_EQ(parser.parse(line).get(doc), simdjson::SUCCESS);
    std::string_view text_field;
    Ids ids;
    for (int64_t id : doc["prompt"].get_array()) ids.push_back(int32_t(id));
    const std::string text = doc["text"].get(text_field) == simdjson::SUCCESS
                                 ? std::string(text_field)
                                 : text_of(*g, ids);
    EXPECT_EQ(g->tokenizer->encode(text, EncodeOptions{.add_bos = true, .parse_special = true}), ids)
        << model << " prompt " << prompts << ": " << ::testing::PrintToString(text);
    ++prompts;
  }
  EXPECT_GE(prompts, min_prompts);
}

TEST(GgufVocabulary, Llama3ReferencePromptsEncodeAsLlamaCpp) {
  expect_reference_prompts_round_trip("tiny-llama3-q4_k_m", 7);
}
TEST(GgufVocabulary, QwenReferencePromptsEncodeAsLlamaCpp) {
  expect_reference_prompts_round_trip("tiny-qwen2-q4_k_m", 7);
}
TEST(GgufVocabulary, Llama2ReferencePromptsEncodeAsLlamaCpp) {
  expect_reference_prompts_round_trip("tiny-llama2-q4_0", 8);
}

TEST(GgufVocabulary, Llama3SpecialTokensAndVerbatimContent) {
  TOKENIZER_OR_SKIP(t, "tiny-llama3-q4_k_m.gguf");
  EXPECT_EQ(t_g->vocabulary->pre, "llama-bpe");
  const std::string chat = "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>";
  const Ids parsed = t.encode(chat, EncodeOptions{.parse_special = true});
  EXPECT_EQ(parsed, (Ids{128000, 128006, 882, 128007, 271, 13347, 128009}));
  // Plain text: no control token comes out of the spelling.
  const Ids plain = t.encode(chat, EncodeOptions{});
  EXPECT_EQ(plain.front(), 128000);
  for (size_t i = 1; i < plain.size(); ++i) EXPECT_LT(plain[i], 128000) << i;
  // Message content holding a control token's spelling stays text.
  const std::string content = "say <|eot_id|> now";
  const std::string rendered = "<|start_header_id|>user<|end_header_id|>\n\n" + content + "<|eot_id|>";
  const TextRange verbatim{rendered.size() - content.size() - 10, rendered.size() - 10};
  const Ids ids = t.encode(rendered, EncodeOptions{.parse_special = true, .verbatim = {&verbatim, 1}});
  EXPECT_EQ(std::count(ids.begin(), ids.end(), 128009), 1);
  EXPECT_EQ(ids.back(), 128009);
  EXPECT_EQ(t.decode(ids), "user\n\nsay <|eot_id|> now");
  // End of generation: eos (<|eot_id|>), then <|end_of_text|> by its text.
  EXPECT_EQ(t_g->eos_ids, (Ids{128009, 128001}));
}

TEST(GgufVocabulary, QwenHasNoBosAndUserDefinedTokensAlwaysMatch) {
  TOKENIZER_OR_SKIP(t, "tiny-qwen2-q4_k_m.gguf");
  EXPECT_EQ(t_g->vocabulary->pre, "qwen2");
  EXPECT_EQ(t.bos_id(), -1);
  EXPECT_EQ(t.encode("hi", EncodeOptions{}), (Ids{6023}));
  const std::string text = "<|im_start|>user\n<think>x</think><|im_end|>";
  const Ids parsed = t.encode(text, EncodeOptions{.parse_special = true});
  EXPECT_EQ(parsed, (Ids{151644, 872, 198, 151667, 87, 151668, 151645}));
  // Without parse_special the control tokens are text; <think> is user-defined.
  const Ids plain = t.encode(text, EncodeOptions{});
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 151644), 0);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 151667), 1);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 151668), 1);
  // <|im_end|> (eos), then <|endoftext|> and the fill-in-the-middle separators;
  // not the normal piece "</s>" (128247) that llama.cpp would add.
  EXPECT_EQ(t_g->eos_ids, (Ids{151645, 151643, 151662, 151663, 151664}));
}

TEST(GgufVocabulary, Llama2SentencePieceSpecialTokens) {
  TOKENIZER_OR_SKIP(t, "tiny-llama2-q4_0.gguf");
  const std::string text = "<s>[INST] hi [/INST] ok</s>";
  const Ids parsed = t.encode(text, EncodeOptions{.add_bos = false, .parse_special = true});
  EXPECT_EQ(parsed.front(), 1);
  EXPECT_EQ(parsed.back(), 2);
  EXPECT_EQ(t.decode(parsed), "[INST] hi [/INST] ok");
  // Plain: "<s>" is three pieces of text and decodes back to itself.
  const Ids plain = t.encode(text, EncodeOptions{.add_bos = false});
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 1), 0);
  EXPECT_EQ(std::count(plain.begin(), plain.end(), 2), 0);
  EXPECT_EQ(t.decode(plain), text);
  const TextRange all{0, text.size()};
  EXPECT_EQ(t.encode(text, EncodeOptions{.add_bos = false, .parse_special = true, .verbatim = {&all, 1}}),
            plain);
  EXPECT_EQ(t_g->eos_ids, (Ids{2}));
}

GgufBuilder tiny_bpe_file(const std::string& pre) {
  GgufBuilder b;
  b.add("tokenizer.ggml.model", GgufValue::of_string("gpt2"));
  b.add("tokenizer.ggml.tokens", GgufValue::of_array(GgufArray::of_strings({"a", "b", "ab", "<|x|>"})));
  const std::vector<int32_t> types = {1, 1, 1, 3};
  b.add("tokenizer.ggml.token_type", GgufValue::of_array(GgufArray::of_int32(types)));
  b.add("tokenizer.ggml.merges", GgufValue::of_array(GgufArray::of_strings({"a b"})));
  b.add("tokenizer.ggml.bos_token_id", GgufValue::of_uint32(3));
  if (!pre.empty()) b.add("tokenizer.ggml.pre", GgufValue::of_string(pre));
  return b;
}

Expected<GgufTokenizer> read_tiny(const std::string& pre) {
  auto bytes = tiny_bpe_file(pre).to_bytes();
  if (!bytes) return bytes.error();
  auto file = parse_gguf(*bytes, "tiny.gguf");
  if (!file) return file.error();
  return tokenizer_from_gguf(*file);
}

TEST(GgufVocabulary, UnknownPreTokenizerIsRefused) {
  auto tok = read_tiny("bogus-pre");
  ASSERT_FALSE(tok);
  EXPECT_EQ(tok.error().code, Errc::unsupported);
  EXPECT_NE(tok.error().message.find("tiny.gguf"), std::string::npos) << tok.error().message;
  EXPECT_NE(tok.error().message.find("'bogus-pre'"), std::string::npos) << tok.error().message;
}

TEST(GgufVocabulary, BosDefaultsFollowThePreTokenizer) {
  // No add_bos_token key: Llama 3's pre-tokenizer adds BOS (as llama.cpp), GPT-2's does not.
  auto llama3 = read_tiny("llama-bpe");
  ASSERT_TRUE(llama3) << llama3.error().message;
  EXPECT_EQ(llama3->tokenizer->encode("ab", true), (Ids{3, 2}));
  auto gpt2 = read_tiny("");
  ASSERT_TRUE(gpt2) << gpt2.error().message;
  EXPECT_EQ(gpt2->vocabulary->pre, "");
  EXPECT_EQ(gpt2->tokenizer->encode("ab", true), (Ids{2}));
}

}  // namespace
}  // namespace conveyor
