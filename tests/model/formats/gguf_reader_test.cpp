#include "model/formats/gguf_reader.hpp"

#include <gtest/gtest.h>

#include <cstring>

#include "model/formats/gguf_writer.hpp"
#include "tests/model/formats/formats_test_util.hpp"

namespace conveyor {
namespace {

GgufArray nested_strings() {
  GgufArray inner1 = GgufArray::of_strings({"a", "bc"});
  GgufArray inner2 = GgufArray::of_strings({});
  GgufArray outer;
  outer.elem_type = GgufValueType::array;
  outer.arrays = {inner1, inner2};
  GgufArray top;
  top.elem_type = GgufValueType::array;
  top.arrays = {outer};
  return top;
}

TEST(GgufReader, EveryValueTypeRoundTrips) {
  GgufBuilder b;
  b.add("u8", GgufValue::of_scalar(GgufValueType::uint8, 200));
  b.add("i8", GgufValue::of_scalar(GgufValueType::int8, 0xfe));  // -2
  b.add("u16", GgufValue::of_scalar(GgufValueType::uint16, 60000));
  b.add("i16", GgufValue::of_scalar(GgufValueType::int16, 0x8000));  // -32768
  b.add("u32", GgufValue::of_uint32(4000000000u));
  b.add("i32", GgufValue::of_int32(-7));
  b.add("f32", GgufValue::of_float32(0.25f));
  b.add("bool", GgufValue::of_bool(true));
  b.add("str", GgufValue::of_string("héllo"));
  b.add("u64", GgufValue::of_uint64(~0ULL));
  b.add("i64", GgufValue::of_scalar(GgufValueType::int64, uint64_t(-5)));
  double pi = 3.14159;
  uint64_t pi_bits;
  std::memcpy(&pi_bits, &pi, 8);
  b.add("f64", GgufValue::of_scalar(GgufValueType::float64, pi_bits));
  const float floats[] = {1.5f, -2.5f};
  b.add("arr.f32", GgufValue::of_array(GgufArray::of_float32(floats)));
  const uint64_t shorts[] = {1, 0xffff};
  b.add("arr.i16", GgufValue::of_array(GgufArray::of_scalars(GgufValueType::int16, shorts)));
  const uint64_t bools[] = {1, 0, 1};
  b.add("arr.bool", GgufValue::of_array(GgufArray::of_scalars(GgufValueType::boolean, bools)));
  b.add("arr.empty", GgufValue::of_array(GgufArray::of_strings({})));
  b.add("arr.nested", GgufValue::of_array(nested_strings()));
  const std::vector<float> t(64, 0.5f);
  b.add_tensor("t.f16", {32, 2}, GgmlType::F16, t);
  b.add_raw_tensor("t.q2k", {256}, uint32_t(GgmlType::Q2_K), std::vector<uint8_t>(84, 7));

  auto bytes = b.to_bytes();
  ASSERT_TRUE(bytes) << bytes.error().message;
  auto f = parse_gguf(*bytes, "mem.gguf");
  ASSERT_TRUE(f) << f.error().message;
  EXPECT_EQ(f->version, 3u);
  ASSERT_EQ(f->metadata.size(), 17u);
  EXPECT_EQ(f->find("u8")->as_int(), 200);
  EXPECT_EQ(f->find("i8")->as_int(), -2);
  EXPECT_EQ(f->find("u16")->as_int(), 60000);
  EXPECT_EQ(f->find("i16")->as_int(), -32768);
  EXPECT_EQ(f->find("u32")->as_int(), 4000000000LL);
  EXPECT_EQ(f->find("i32")->as_int(), -7);
  EXPECT_EQ(f->find("f32")->as_float(), 0.25);
  EXPECT_EQ(f->find("f32")->as_int(), std::nullopt);
  EXPECT_EQ(f->find("bool")->as_bool(), true);
  EXPECT_EQ(*f->find("str")->as_string(), "héllo");
  EXPECT_EQ(f->find("u64")->as_int(), std::nullopt);  // above INT64_MAX
  EXPECT_EQ(f->find("u64")->bits, ~0ULL);
  EXPECT_EQ(f->find("i64")->as_int(), -5);
  EXPECT_DOUBLE_EQ(*f->find("f64")->as_float(), pi);
  const GgufArray* af = f->find("arr.f32")->as_array();
  ASSERT_NE(af, nullptr);
  EXPECT_EQ(af->size(), 2u);
  EXPECT_EQ(af->float_at(1), -2.5);
  EXPECT_EQ(f->find("arr.i16")->as_array()->int_at(1), -1);
  EXPECT_EQ(f->find("arr.bool")->as_array()->size(), 3u);
  EXPECT_EQ(f->find("arr.empty")->as_array()->size(), 0u);
  const GgufArray* nested = f->find("arr.nested")->as_array();
  ASSERT_EQ(nested->size(), 1u);
  ASSERT_EQ(nested->arrays[0].arrays.size(), 2u);
  EXPECT_EQ(nested->arrays[0].arrays[0].strings[1], "bc");
  EXPECT_EQ(*f->find("arr.nested"), GgufValue::of_array(nested_strings()));

  ASSERT_EQ(f->tensors.size(), 2u);
  const GgufTensorInfo* t16 = f->find_tensor("t.f16");
  ASSERT_NE(t16, nullptr);
  EXPECT_EQ(t16->dims, (std::vector<uint64_t>{32, 2}));
  EXPECT_EQ(t16->n_elements, 64u);
  EXPECT_EQ(t16->data.size(), 128u);
  auto values = tensor_to_f32(*f, *t16);
  ASSERT_TRUE(values);
  EXPECT_EQ(*values, t);
  const GgufTensorInfo* q2k = f->find_tensor("t.q2k");
  ASSERT_NE(q2k, nullptr);
  EXPECT_EQ(q2k->data.size(), 84u);
  EXPECT_EQ(q2k->data[0], 7);
  EXPECT_EQ((f->data_offset + q2k->offset) % 32, 0u);
  auto unsupported = tensor_to_f32(*f, *q2k);
  ASSERT_FALSE(unsupported);
  EXPECT_EQ(unsupported.error().code, Errc::unsupported);
  EXPECT_NE(unsupported.error().message.find("Q2_K (10)"), std::string::npos);
  EXPECT_NE(unsupported.error().message.find("mem.gguf"), std::string::npos);
}

TEST(GgufReader, HonoursAlignmentAndVersion2) {
  GgufBuilder b(256);
  b.version = 2;
  b.add("general.alignment", GgufValue::of_uint32(256));
  const std::vector<float> a(3, 1.0f), c(5, 2.0f);
  b.add_tensor("a", {3}, GgmlType::F32, a);
  b.add_tensor("c", {5}, GgmlType::F32, c);
  auto bytes = b.to_bytes();
  ASSERT_TRUE(bytes);
  auto f = parse_gguf(*bytes, "aligned.gguf");
  ASSERT_TRUE(f) << f.error().message;
  EXPECT_EQ(f->version, 2u);
  EXPECT_EQ(f->alignment, 256u);
  EXPECT_EQ(f->data_offset % 256, 0u);
  EXPECT_EQ(f->find_tensor("c")->offset, 256u);
  EXPECT_EQ(*tensor_to_f32(*f, *f->find_tensor("c")), c);
}

TEST(GgufReader, ReadsSharedFile) {
  CONVEYOR_REQUIRE_MODEL(path, "tiny-random-llama-q8_0.gguf");
  auto f = read_gguf(path);
  ASSERT_TRUE(f) << f.error().message;
  EXPECT_EQ(f->version, 3u);
  EXPECT_EQ(f->alignment, 32u);
  EXPECT_EQ(f->tensors.size(), 21u);
  EXPECT_EQ(f->metadata.size(), 21u);
  EXPECT_EQ(*f->find("general.architecture")->as_string(), "llama");
  EXPECT_EQ(f->find("tokenizer.ggml.tokens")->as_array()->size(), 32000u);
  EXPECT_EQ(f->find("tokenizer.ggml.tokens")->as_array()->strings[1], "<s>");
  const GgufTensorInfo* q = f->find_tensor("blk.0.attn_q.weight");
  ASSERT_NE(q, nullptr);
  EXPECT_EQ(q->dims, (std::vector<uint64_t>{64, 64}));
  EXPECT_EQ(q->type, uint32_t(GgmlType::Q8_0));
  EXPECT_EQ(q->data.size(), 64u * 64 / 32 * 34);
  const GgufTensorInfo* norm = f->find_tensor("output_norm.weight");
  EXPECT_EQ(norm->type, uint32_t(GgmlType::F32));
}

}  // namespace
}  // namespace conveyor
