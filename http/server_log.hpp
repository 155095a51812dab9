// The server's log: one process-wide logger (spdlog underneath) that writes
// each line to stdout as text or as one JSON object, past a level filter.
//
//   configure_log(LogLevel::info, LogFormat::json);        // once, at start-up
//   log_line(LogLevel::info, "request", {{"status", 200}, {"route", "/v1/completions"}});
//
// A line is a time (UTC), a level, a message and fields, in that order:
//   text  2025-05-04T10:00:00.123Z info request status=200 route=/v1/completions
//   json  {"time":"2025-05-04T10:00:00.123Z","level":"info","msg":"request","status":200,"route":"/v1/completions"}
// A JSON line has every field it was given, a field without a value as null,
// so that its keys do not depend on what happened; a text line leaves such
// fields out and quotes values that hold spaces, quotes or '='.
//
// Until configure_log() is called: info, text (what an embedding program gets).
//
// Thread-safety: log_line(), log_always() and log_enabled() from any thread;
// configure_log() before other threads log (at start-up).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "base/status.hpp"

namespace conveyor::http {

enum class LogLevel : uint8_t { trace, debug, info, warn, error, off };
enum class LogFormat : uint8_t { text, json };

// "trace" | "debug" | "info" | "warn" | "error" | "off"; anything else is an error naming the choices.
Expected<LogLevel> parse_log_level(std::string_view name);
// "text" | "json".
Expected<LogFormat> parse_log_format(std::string_view name);
const char* to_string(LogLevel level);
const char* to_string(LogFormat format);

// A field's value: none (null), a flag, a count, a measure or text.
using LogValue = std::variant<std::monostate, bool, int64_t, double, std::string>;

struct LogField {
  LogField(std::string_view k, LogValue v) : key(k), value(std::move(v)) {}
  LogField(std::string_view k, std::monostate) : key(k) {}
  LogField(std::string_view k, bool v) : key(k), value(v) {}
  LogField(std::string_view k, int v) : key(k), value(int64_t(v)) {}
  LogField(std::string_view k, int64_t v) : key(k), value(v) {}
  LogField(std::string_view k, uint64_t v) : key(k), value(int64_t(v)) {}
  LogField(std::string_view k, double v) : key(k), value(v) {}
  LogField(std::string_view k, std::string v) : key(k), value(std::move(v)) {}
  LogField(std::string_view k, std::string_view v) : key(k), value(std::string(v)) {}
  LogField(std::string_view k, const char* v) : key(k), value(std::string(v)) {}

  std::string_view key;
  LogValue value;
};
using LogFields = std::vector<LogField>;

// Sets the level and format; the engine's own lines (spdlog's default
// logger, which the actors and backends write to) then take them too, on
// stdout.
void configure_log(LogLevel level, LogFormat format);
LogLevel log_level();
LogFormat log_format();
// Whether a line of `level` would be written (to skip building costly fields).
bool log_enabled(LogLevel level);

void log_line(LogLevel level, std::string_view message, const LogFields& fields = {});
inline void log_info(std::string_view message, const LogFields& fields = {}) {
  log_line(LogLevel::info, message, fields);
}
inline void log_warn(std::string_view message, const LogFields& fields = {}) {
  log_line(LogLevel::warn, message, fields);
}
// Written to stderr whatever the level, even "off": a failure that ends the
// program must say why.
void log_always(LogLevel level, std::string_view message, const LogFields& fields = {});

// What follows the time on a line of `format` (tests, and the logger itself).
std::string format_log_payload(LogFormat format, LogLevel level, std::string_view message, const LogFields& fields);

}  // namespace conveyor::http
