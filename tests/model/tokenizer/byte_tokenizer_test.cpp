#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "model/tokenizer/tokenizer.hpp"

namespace conveyor {
namespace {

TEST(ByteTokenizer, EncodesBytesAfterBos) {
  const auto tokenizer = make_byte_tokenizer();
  EXPECT_EQ(tokenizer->vocab_size(), 258);
  EXPECT_EQ(tokenizer->bos_id(), 256);
  EXPECT_EQ(tokenizer->eos_id(), 257);
  EXPECT_EQ(tokenizer->encode("Hi\xC3\xA9", true), (std::vector<int32_t>{256, 72, 105, 0xC3, 0xA9}));
  EXPECT_EQ(tokenizer->encode("", false), std::vector<int32_t>{});
}

TEST(ByteTokenizer, RoundTripsAndDropsSpecials) {
  const auto tokenizer = make_byte_tokenizer();
  const std::string text = " leading space\n\ttabs, caf\xC3\xA9, \xF0\x9F\xA6\x99";
  std::vector<int32_t> ids = tokenizer->encode(text, true);
  ids.push_back(257);
  EXPECT_EQ(tokenizer->decode(ids), text);
  EXPECT_EQ(tokenizer->token_bytes(256), "");
  EXPECT_EQ(tokenizer->token_bytes(0x41), "A");
  EXPECT_EQ(tokenizer->token_bytes(-1), "");
  EXPECT_EQ(tokenizer->token_bytes(258), "");
  EXPECT_EQ(tokenizer->piece(0x0A), "<0x0A>");
  EXPECT_EQ(tokenizer->piece(256), "<s>");
}

// BOS and EOS are control tokens: read from their pieces where special
// tokens are parsed (a chat template's bos_token), bytes elsewhere.
TEST(ByteTokenizer, ParsesItsControlTokensWhenAsked) {
  const auto tokenizer = make_byte_tokenizer();
  EXPECT_TRUE(tokenizer->is_special(256));
  EXPECT_TRUE(tokenizer->is_special(257));
  EXPECT_FALSE(tokenizer->is_special('<'));
  EXPECT_EQ(tokenizer->encode("<s>Hi</s>", EncodeOptions{.add_bos = false, .parse_special = true}),
            (std::vector<int32_t>{256, 'H', 'i', 257}));
  EXPECT_EQ(tokenizer->encode("<s>", EncodeOptions{.add_bos = false}), (std::vector<int32_t>{'<', 's', '>'}));
  EXPECT_EQ(tokenizer->encode("<s", EncodeOptions{.add_bos = false, .parse_special = true}),
            (std::vector<int32_t>{'<', 's'}));
}

TEST(ByteTokenizer, DecodeReplacesInvalidBytes) {
  const auto tokenizer = make_byte_tokenizer();
  const std::vector<int32_t> ids = {0x61, 0xFF, 0x62, 0xF0, 0x9F};
  EXPECT_EQ(tokenizer->decode(ids), "a\xEF\xBF\xBD" "b\xEF\xBF\xBD");
}

}  // namespace
}  // namespace conveyor
