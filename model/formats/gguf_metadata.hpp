// Typed reads of GGUF metadata with defaults and errors that name the file
// and the key (internal to model/formats).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "model/formats/gguf_reader.hpp"
#include "base/status.hpp"

namespace conveyor::gguf_detail {

// An integer key in [min, max]. Absent: `fallback`, or an error when none.
Expected<int64_t> get_int(const GgufFile& file, std::string_view key,
                          std::optional<int64_t> fallback, int64_t min, int64_t max);
// A float32/float64 key (integers are accepted too).
Expected<double> get_float(const GgufFile& file, std::string_view key,
                           std::optional<double> fallback);
Expected<bool> get_bool(const GgufFile& file, std::string_view key, std::optional<bool> fallback);
Expected<std::string> get_string(const GgufFile& file, std::string_view key,
                                 std::optional<std::string> fallback);
// An array key whose elements are of type `elem` (null when absent and not required).
Expected<const GgufArray*> get_array(const GgufFile& file, std::string_view key,
                                     GgufValueType elem, bool required);

Error metadata_error(const GgufFile& file, std::string_view key, const std::string& problem,
                     Errc code = Errc::bad_format);

}  // namespace conveyor::gguf_detail
