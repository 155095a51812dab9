// Small helpers shared by the server tests: JSON in and out (Boost.JSON),
// reading one value from /metrics, waiting for a condition.
#pragma once

#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <chrono>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "tests/http/test_client.hpp"

namespace conveyor::http::testing {

inline boost::json::object parse_object(const std::string& text) {
  boost::json::error_code ec;
  boost::json::value v = boost::json::parse(text, ec);
  if (ec || !v.is_object()) {
    ADD_FAILURE() << "not a JSON object: " << text;
    return {};
  }
  return v.as_object();
}

inline std::vector<int32_t> ids_of(const boost::json::value& v) {
  std::vector<int32_t> out;
  for (const auto& x : v.as_array()) out.push_back(int32_t(x.to_number<int64_t>()));
  return out;
}

inline boost::json::array ids_json(const std::vector<int32_t>& ids) {
  boost::json::array a;
  for (int32_t id : ids) a.emplace_back(id);
  return a;
}

inline std::string body_of(const boost::json::object& o) { return boost::json::serialize(o); }

// The value of the first sample of `name` (with its labels, if any) in /metrics; -1 if absent.
inline double metric(uint16_t port, const std::string& name_and_labels) {
  const Response r = http_request(port, "GET", "/metrics");
  const std::string key = name_and_labels + " ";
  for (size_t pos = 0; pos < r.body.size();) {
    size_t end = r.body.find('\n', pos);
    if (end == std::string::npos) end = r.body.size();
    if (r.body.compare(pos, key.size(), key) == 0) return std::stod(r.body.substr(pos + key.size(), end - pos - key.size()));
    pos = end + 1;
  }
  return -1;
}

inline bool eventually(const std::function<bool()>& condition,
                       std::chrono::milliseconds timeout = std::chrono::milliseconds(5000)) {
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (std::chrono::steady_clock::now() < deadline) {
    if (condition()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  return condition();
}

// The error object of an OpenAI-style error body, checked for its four fields.
inline boost::json::object error_of(const Response& r) {
  boost::json::object body = parse_object(r.body);
  EXPECT_TRUE(body.contains("error")) << r.body;
  if (!body.contains("error")) return {};
  boost::json::object e = body["error"].as_object();
  for (const char* field : {"message", "type", "param", "code"}) EXPECT_TRUE(e.contains(field)) << field;
  EXPECT_TRUE(e["message"].is_string());
  return e;
}

}  // namespace conveyor::http::testing
