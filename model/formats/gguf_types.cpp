#include "model/formats/gguf_types.hpp"

#include <array>

namespace conveyor {

bool is_known_value_type(uint32_t type) { return type <= uint32_t(GgufValueType::float64); }

std::string value_type_name(uint32_t type) {
  static constexpr std::array<const char*, 13> names = {
      "uint8", "int8", "uint16", "int16", "uint32", "int32",  "float32",
      "bool",  "string", "array", "uint64", "int64", "float64"};
  if (type < names.size()) return names[type];
  return "type " + std::to_string(type);
}

uint32_t scalar_size(GgufValueType type) {
  switch (type) {
    case GgufValueType::uint8:
    case GgufValueType::int8:
    case GgufValueType::boolean:
      return 1;
    case GgufValueType::uint16:
    case GgufValueType::int16:
      return 2;
    case GgufValueType::uint32:
    case GgufValueType::int32:
    case GgufValueType::float32:
      return 4;
    case GgufValueType::uint64:
    case GgufValueType::int64:
    case GgufValueType::float64:
      return 8;
    case GgufValueType::string:
    case GgufValueType::array:
      return 0;
  }
  return 0;
}

GgmlTypeTraits ggml_type_traits(uint32_t type) {
  switch (GgmlType(type)) {
    case GgmlType::F32: return {"F32", 1, 4};
    case GgmlType::F16: return {"F16", 1, 2};
    case GgmlType::Q4_0: return {"Q4_0", 32, 18};
    case GgmlType::Q4_1: return {"Q4_1", 32, 20};
    case GgmlType::Q5_0: return {"Q5_0", 32, 22};
    case GgmlType::Q5_1: return {"Q5_1", 32, 24};
    case GgmlType::Q8_0: return {"Q8_0", 32, 34};
    case GgmlType::Q8_1: return {"Q8_1", 32, 36};
    case GgmlType::Q2_K: return {"Q2_K", 256, 84};
    case GgmlType::Q3_K: return {"Q3_K", 256, 110};
    case GgmlType::Q4_K: return {"Q4_K", 256, 144};
    case GgmlType::Q5_K: return {"Q5_K", 256, 176};
    case GgmlType::Q6_K: return {"Q6_K", 256, 210};
    case GgmlType::Q8_K: return {"Q8_K", 256, 292};
    case GgmlType::IQ2_XXS: return {"IQ2_XXS", 256, 66};
    case GgmlType::IQ2_XS: return {"IQ2_XS", 256, 74};
    case GgmlType::IQ3_XXS: return {"IQ3_XXS", 256, 98};
    case GgmlType::IQ1_S: return {"IQ1_S", 256, 50};
    case GgmlType::IQ4_NL: return {"IQ4_NL", 32, 18};
    case GgmlType::IQ3_S: return {"IQ3_S", 256, 110};
    case GgmlType::IQ2_S: return {"IQ2_S", 256, 82};
    case GgmlType::IQ4_XS: return {"IQ4_XS", 256, 136};
    case GgmlType::I8: return {"I8", 1, 1};
    case GgmlType::I16: return {"I16", 1, 2};
    case GgmlType::I32: return {"I32", 1, 4};
    case GgmlType::I64: return {"I64", 1, 8};
    case GgmlType::F64: return {"F64", 1, 8};
    case GgmlType::IQ1_M: return {"IQ1_M", 256, 56};
    case GgmlType::BF16: return {"BF16", 1, 2};
    case GgmlType::TQ1_0: return {"TQ1_0", 256, 54};
    case GgmlType::TQ2_0: return {"TQ2_0", 256, 66};
    case GgmlType::MXFP4: return {"MXFP4", 32, 17};
  }
  return {};
}

std::string ggml_type_description(uint32_t type) {
  const GgmlTypeTraits traits = ggml_type_traits(type);
  if (traits.name == nullptr) return "unknown type " + std::to_string(type);
  return std::string(traits.name) + " (" + std::to_string(type) + ")";
}

bool is_convertible_type(GgmlType type) {
  switch (type) {
    case GgmlType::F32:
    case GgmlType::F16:
    case GgmlType::BF16:
    case GgmlType::Q8_0:
    case GgmlType::Q4_0:
    case GgmlType::Q4_K:
    case GgmlType::Q5_K:
    case GgmlType::Q6_K:
      return true;
    default:
      return false;
  }
}

}  // namespace conveyor
