// The vocabulary of the GGUF format: metadata value types and ggml tensor
// types, with the block geometry needed to size a tensor of any known type.
//
// Reference: ggml/docs/gguf.md and ggml.h in llama.cpp. Numbers are the ones
// stored in files, so these enums must never be renumbered.
#pragma once

#include <cstdint>
#include <string>

namespace conveyor {

// GGUF metadata value types.
enum class GgufValueType : uint32_t {
  uint8 = 0,
  int8 = 1,
  uint16 = 2,
  int16 = 3,
  uint32 = 4,
  int32 = 5,
  float32 = 6,
  boolean = 7,
  string = 8,
  array = 9,
  uint64 = 10,
  int64 = 11,
  float64 = 12,
};

// True for the 13 types above.
bool is_known_value_type(uint32_t type);
// "uint32", "string", ...; "type N" for unknown numbers.
std::string value_type_name(uint32_t type);
// Bytes of one scalar of `type` in a file: 1, 2, 4 or 8; 0 for string and array.
uint32_t scalar_size(GgufValueType type);

// ggml tensor types (ggml_type). Only some are convertible by conveyor; the
// rest are known so a file containing them can still be parsed and sized.
enum class GgmlType : uint32_t {
  F32 = 0,
  F16 = 1,
  Q4_0 = 2,
  Q4_1 = 3,
  Q5_0 = 6,
  Q5_1 = 7,
  Q8_0 = 8,
  Q8_1 = 9,
  Q2_K = 10,
  Q3_K = 11,
  Q4_K = 12,
  Q5_K = 13,
  Q6_K = 14,
  Q8_K = 15,
  IQ2_XXS = 16,
  IQ2_XS = 17,
  IQ3_XXS = 18,
  IQ1_S = 19,
  IQ4_NL = 20,
  IQ3_S = 21,
  IQ2_S = 22,
  IQ4_XS = 23,
  I8 = 24,
  I16 = 25,
  I32 = 26,
  I64 = 27,
  F64 = 28,
  IQ1_M = 29,
  BF16 = 30,
  TQ1_0 = 34,
  TQ2_0 = 35,
  MXFP4 = 39,
};

// A tensor type's storage: `block_size` consecutive elements of a row take
// `type_size` bytes. A row's length must be a multiple of block_size.
struct GgmlTypeTraits {
  const char* name = nullptr;  // "Q8_0"; null for an unknown type number
  uint32_t block_size = 0;
  uint32_t type_size = 0;
};

// Traits of type number `type`; name == nullptr when the number is unknown.
GgmlTypeTraits ggml_type_traits(uint32_t type);
// "Q4_K (12)", or "unknown type 99".
std::string ggml_type_description(uint32_t type);
// True for the types that conveyor decodes to float32 and encodes from it
// (tensor_convert.hpp): F32, F16, BF16, Q8_0, Q4_0, Q4_K, Q5_K, Q6_K.
bool is_convertible_type(GgmlType type);

}  // namespace conveyor
