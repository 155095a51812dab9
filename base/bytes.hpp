// Byte sizes as people write them and as logs print them, and the memory the
// system has available. Used by the engine (KV capacity), the server and the
// command line.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "base/status.hpp"

namespace conveyor {

// "4GiB", "512MiB", "1.5GB", "4g", "1000000": a non-negative number (decimals
// allowed) and an optional unit, case-insensitive, spaces allowed between:
// B; K, M, G, T (powers of 1000, also KB, MB, GB, TB); Ki, Mi, Gi, Ti
// (powers of 1024, also KiB, MiB, GiB, TiB). A fraction of a byte is
// dropped. The error names what is wrong.
Expected<int64_t> parse_byte_size(std::string_view text);

// 1536 -> "1.5 KiB"; 900 -> "900 B".
std::string format_bytes(int64_t bytes);

// MemAvailable from /proc/meminfo's text, in bytes; nullopt if absent.
std::optional<int64_t> parse_mem_available(std::string_view meminfo);
// The same read from /proc/meminfo now.
std::optional<int64_t> read_mem_available();

}  // namespace conveyor
