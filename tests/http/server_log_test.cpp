// The server log's lines: the two formats, their fields, the level names.
#include "http/server_log.hpp"

#include "http/request_record.hpp"

#include <gtest/gtest.h>
#include <spdlog/spdlog.h>

#include <algorithm>
#include <boost/json.hpp>
#include <cstdio>

namespace conveyor::http {
namespace {

namespace json = boost::json;

const LogFields kFields{
    {"conn", uint64_t(7)},       {"route", "/v1/completions"}, {"stream", true},
    {"ttft_ms", 12.3456},        {"error", LogValue()},        {"text", "two words"},
    {"quote", "say \"hi\"\nnow"}, {"rate", 2.0},
};

TEST(ServerLog, JsonLinesHaveEveryFieldInOrder) {
  const std::string payload = format_log_payload(LogFormat::json, LogLevel::warn, "request", kFields);
  // The logger wraps the payload with the time: {"time":"...",PAYLOAD}.
  json::object line = json::parse("{" + payload + "}").as_object();
  EXPECT_EQ(line["level"], "warn");
  EXPECT_EQ(line["msg"], "request");
  EXPECT_EQ(line["conn"], 7);
  EXPECT_EQ(line["route"], "/v1/completions");
  EXPECT_EQ(line["stream"], true);
  EXPECT_NEAR(line["ttft_ms"].to_number<double>(), 12.346, 1e-9);
  EXPECT_TRUE(line["error"].is_null());  // present, without a value
  EXPECT_EQ(line["quote"], "say \"hi\"\nnow");
  EXPECT_EQ(payload.find('\n'), std::string::npos) << "one line per entry";
  EXPECT_TRUE(payload.ends_with(",\"rate\":2")) << payload;  // not 2E0
  EXPECT_LT(payload.find("\"level\""), payload.find("\"msg\""));
  EXPECT_LT(payload.find("\"msg\""), payload.find("\"conn\""));
  EXPECT_LT(payload.find("\"conn\""), payload.find("\"route\""));
}

TEST(ServerLog, TextLinesLeaveOutEmptyFieldsAndQuoteWhatNeedsIt) {
  const std::string payload = format_log_payload(LogFormat::text, LogLevel::info, "request", kFields);
  EXPECT_EQ(payload,
            "info request conn=7 route=/v1/completions stream=true ttft_ms=12.346 text=\"two words\" "
            "quote=\"say \\\"hi\\\"\\nnow\" rate=2");
}

TEST(ServerLog, LevelsAndFormatsByName) {
  for (const char* name : {"trace", "debug", "info", "warn", "error", "off"}) {
    auto level = parse_log_level(name);
    ASSERT_TRUE(level) << name;
    EXPECT_STREQ(to_string(*level), name);
  }
  const auto bad = parse_log_level("warning");
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("trace, debug, info, warn, error or off"), std::string::npos);
  EXPECT_EQ(*parse_log_format("json"), LogFormat::json);
  EXPECT_EQ(*parse_log_format("text"), LogFormat::text);
  EXPECT_FALSE(parse_log_format("JSON"));
}

TEST(ServerLog, RequestLinesWarnOnlyForRealFailures) {
  EXPECT_EQ(request_log_level("POST", "/v1/completions", 200, false), LogLevel::info);
  EXPECT_EQ(request_log_level("POST", "/v1/completions", 400, false), LogLevel::warn);
  EXPECT_EQ(request_log_level("POST", "/v1/completions", 200, true), LogLevel::warn);  // failed mid-stream
  EXPECT_EQ(request_log_level("GET", "/health", 200, false), LogLevel::debug);
  EXPECT_EQ(request_log_level("GET", "/metrics", 200, false), LogLevel::debug);
  EXPECT_EQ(request_log_level("GET", "/health", 503, false), LogLevel::warn);
  // A browser asks for the icon by itself: its 404 is no client's mistake.
  EXPECT_EQ(request_log_level("GET", "/favicon.ico", 404, false), LogLevel::debug);
  EXPECT_EQ(request_log_level("GET", "/nope.ico", 404, false), LogLevel::warn);
}

TEST(ServerLog, TheLevelFilters) {
  const LogLevel level = log_level();
  const LogFormat format = log_format();
  configure_log(LogLevel::warn, LogFormat::json);
  EXPECT_FALSE(log_enabled(LogLevel::info));
  EXPECT_TRUE(log_enabled(LogLevel::warn));
  EXPECT_TRUE(log_enabled(LogLevel::error));
  configure_log(LogLevel::off, LogFormat::text);
  EXPECT_FALSE(log_enabled(LogLevel::error));
  EXPECT_FALSE(log_enabled(LogLevel::off));
  configure_log(level, format);
}

// The engine's own lines (spdlog's calls in the actors) take the server's
// format and level: a JSON log has no line of another shape.
TEST(ServerLog, TheEnginesLinesTakeTheFormatAndLevel) {
  const LogLevel level = log_level();
  const LogFormat format = log_format();
  configure_log(LogLevel::info, LogFormat::json);
  ::testing::internal::CaptureStdout();
  spdlog::info("{} request(s) cancelled: their sink went \"away\"", 4);
  spdlog::debug("not shown");
  std::fflush(stdout);
  const std::string json_out = ::testing::internal::GetCapturedStdout();
  configure_log(LogLevel::off, LogFormat::text);
  ::testing::internal::CaptureStdout();
  spdlog::warn("not shown either");
  std::fflush(stdout);
  const std::string off_out = ::testing::internal::GetCapturedStdout();
  configure_log(level, format);
  ASSERT_EQ(std::count(json_out.begin(), json_out.end(), '\n'), 1) << json_out;
  boost::system::error_code ec;
  const json::value parsed = json::parse(json_out, ec);
  ASSERT_FALSE(ec) << json_out;
  const json::object line = parsed.as_object();
  EXPECT_EQ(line.at("level"), "info");
  EXPECT_EQ(line.at("msg"), "4 request(s) cancelled: their sink went \"away\"");
  EXPECT_TRUE(line.contains("time"));
  EXPECT_EQ(off_out, "");
}

}  // namespace
}  // namespace conveyor::http
