#include "http/server_log.hpp"

#include <spdlog/pattern_formatter.h>
#include <spdlog/sinks/stdout_sinks.h>
#include <spdlog/spdlog.h>

#include <atomic>
#include <boost/json.hpp>
#include <cmath>
#include <cstdio>
#include <memory>

namespace conveyor::http {
namespace {

namespace json = boost::json;

constexpr const char* kLevelNames[] = {"trace", "debug", "info", "warn", "error", "off"};

spdlog::level::level_enum to_spdlog(LogLevel level) {
  switch (level) {
    case LogLevel::trace: return spdlog::level::trace;
    case LogLevel::debug: return spdlog::level::debug;
    case LogLevel::info: return spdlog::level::info;
    case LogLevel::warn: return spdlog::level::warn;
    case LogLevel::error: return spdlog::level::err;
    case LogLevel::off: return spdlog::level::off;
  }
  return spdlog::level::info;
}

// The time is spdlog's (taken when the line is logged, in UTC); the rest of
// the line is the payload this file formats, so the two formats differ only
// in the characters around the time.
std::unique_ptr<spdlog::formatter> make_formatter(LogFormat format) {
  const char* pattern = format == LogFormat::json ? "{\"time\":\"%Y-%m-%dT%H:%M:%S.%eZ\",%v}" : "%Y-%m-%dT%H:%M:%S.%eZ %v";
  return std::make_unique<spdlog::pattern_formatter>(pattern, spdlog::pattern_time_type::utc);
}

LogLevel from_spdlog(spdlog::level::level_enum level) {
  switch (level) {
    case spdlog::level::trace: return LogLevel::trace;
    case spdlog::level::debug: return LogLevel::debug;
    case spdlog::level::info: return LogLevel::info;
    case spdlog::level::warn: return LogLevel::warn;
    default: return LogLevel::error;
  }
}

// The engine's lines (written with spdlog's own calls) as the server's:
// the same time, level and format, the message as "msg".
class EngineLineFormatter final : public spdlog::formatter {
 public:
  explicit EngineLineFormatter(LogFormat format) : format_(format), time_(make_formatter(format)) {}
  void format(const spdlog::details::log_msg& msg, spdlog::memory_buf_t& dest) override {
    const std::string payload =
        format_log_payload(format_, from_spdlog(msg.level), std::string_view(msg.payload.data(), msg.payload.size()), {});
    spdlog::details::log_msg line = msg;
    line.payload = payload;
    time_->format(line, dest);
  }
  std::unique_ptr<spdlog::formatter> clone() const override { return std::make_unique<EngineLineFormatter>(format_); }

 private:
  LogFormat format_;
  std::unique_ptr<spdlog::formatter> time_;
};

struct Loggers {
  std::shared_ptr<spdlog::logger> out;     // stdout, filtered by the level
  std::shared_ptr<spdlog::logger> always;  // stderr, never filtered
  std::atomic<LogLevel> level{LogLevel::info};
  std::atomic<LogFormat> format{LogFormat::text};

  Loggers()
      : out(std::make_shared<spdlog::logger>("conveyor", std::make_shared<spdlog::sinks::stdout_sink_mt>())),
        always(std::make_shared<spdlog::logger>("conveyor-always",
                                                std::make_shared<spdlog::sinks::stderr_sink_mt>())) {
    apply(LogLevel::info, LogFormat::text);
    always->set_level(spdlog::level::trace);
  }
  void apply(LogLevel l, LogFormat f) {
    level = l;
    format = f;
    out->set_level(to_spdlog(l));
    out->set_formatter(make_formatter(f));
    always->set_formatter(make_formatter(f));
  }
};

Loggers& loggers() {
  static Loggers instance;
  return instance;
}

// Measures with three decimals at most ("12.5", not Boost.JSON's "1.25E1").
std::string decimal(double value) {
  char buf[48];
  std::snprintf(buf, sizeof buf, "%.3f", value);
  std::string s = buf;
  while (!s.empty() && s.back() == '0') s.pop_back();
  if (!s.empty() && s.back() == '.') s.pop_back();
  return s == "-0" ? "0" : s;
}

bool needs_quotes(std::string_view s) {
  if (s.empty()) return true;
  for (char c : s) {
    if (c == ' ' || c == '"' || c == '=' || c == '\\' || static_cast<unsigned char>(c) < 0x20) return true;
  }
  return false;
}

// Text values: as they are, or JSON-quoted (escapes included) when a reader
// could not tell where they end.
void append_text_value(std::string& out, const LogValue& value) {
  if (const auto* b = std::get_if<bool>(&value)) {
    out += *b ? "true" : "false";
  } else if (const auto* i = std::get_if<int64_t>(&value)) {
    out += std::to_string(*i);
  } else if (const auto* d = std::get_if<double>(&value)) {
    out += decimal(*d);
  } else if (const auto* s = std::get_if<std::string>(&value)) {
    out += needs_quotes(*s) ? json::serialize(json::string(*s)) : *s;
  }
}

json::value json_value(const LogValue& value) {
  if (const auto* b = std::get_if<bool>(&value)) return *b;
  if (const auto* i = std::get_if<int64_t>(&value)) return *i;
  if (const auto* d = std::get_if<double>(&value)) return std::isfinite(*d) ? json::value(*d) : json::value(nullptr);
  if (const auto* s = std::get_if<std::string>(&value)) return json::string(*s);
  return nullptr;
}

void append_json(std::string& out, std::string_view key, const json::value& value) {
  out += json::serialize(json::string(key));
  out += ':';
  out += value.is_double() ? decimal(value.as_double()) : json::serialize(value);
}

// 'name' (built by appending: GCC 12 warns falsely about "'" + std::string).
std::string quoted(std::string_view name) {
  std::string out;
  out.reserve(name.size() + 2);
  out.push_back('\'');
  out.append(name);
  out.push_back('\'');
  return out;
}

}  // namespace

Expected<LogLevel> parse_log_level(std::string_view name) {
  for (size_t i = 0; i < std::size(kLevelNames); ++i) {
    if (name == kLevelNames[i]) return LogLevel(i);
  }
  return make_error(Errc::invalid_argument,
                    quoted(name).append(" is not a log level: trace, debug, info, warn, error or off"));
}

Expected<LogFormat> parse_log_format(std::string_view name) {
  if (name == "text") return LogFormat::text;
  if (name == "json") return LogFormat::json;
  return make_error(Errc::invalid_argument, quoted(name).append(" is not a log format: text or json"));
}

const char* to_string(LogLevel level) { return kLevelNames[size_t(level)]; }

void configure_log(LogLevel level, LogFormat format) {
  loggers().apply(level, format);
  auto engine = std::make_shared<spdlog::logger>("engine", std::make_shared<spdlog::sinks::stdout_sink_mt>());
  engine->set_formatter(std::make_unique<EngineLineFormatter>(format));
  engine->set_level(to_spdlog(level));
  spdlog::set_default_logger(std::move(engine));
}
const char* to_string(LogFormat format) { return format == LogFormat::json ? "json" : "text"; }

LogLevel log_level() { return loggers().level; }
LogFormat log_format() { return loggers().format; }

bool log_enabled(LogLevel level) { return level != LogLevel::off && level >= loggers().level.load(); }

std::string format_log_payload(LogFormat format, LogLevel level, std::string_view message, const LogFields& fields) {
  std::string out;
  if (format == LogFormat::text) {
    out += to_string(level);
    out += ' ';
    out += message;
    for (const LogField& f : fields) {
      if (std::holds_alternative<std::monostate>(f.value)) continue;
      out += ' ';
      out += f.key;
      out += '=';
      append_text_value(out, f.value);
    }
    // One line per entry, whatever a message holds.
    for (char& c : out) {
      if (c == '\n' || c == '\r') c = ' ';
    }
    return out;
  }
  append_json(out, "level", json::string(to_string(level)));
  out += ',';
  append_json(out, "msg", json::string(message));
  for (const LogField& f : fields) {
    out += ',';
    append_json(out, f.key, json_value(f.value));
  }
  return out;
}

void log_line(LogLevel level, std::string_view message, const LogFields& fields) {
  if (!log_enabled(level)) return;
  Loggers& l = loggers();
  l.out->log(to_spdlog(level), "{}", format_log_payload(l.format, level, message, fields));
}

void log_always(LogLevel level, std::string_view message, const LogFields& fields) {
  Loggers& l = loggers();
  l.always->log(to_spdlog(level == LogLevel::off ? LogLevel::error : level), "{}",
                format_log_payload(l.format, level, message, fields));
}

}  // namespace conveyor::http
