// The lines of a `conveyor serve --log-format json` log, each parsed: every
// line must be one JSON object (a line that is not fails the test).
#pragma once

#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <string>
#include <vector>

namespace conveyor::testing {

inline std::vector<boost::json::object> json_log_lines(const std::string& log) {
  std::vector<boost::json::object> lines;
  size_t pos = 0;
  while (pos < log.size()) {
    size_t end = log.find('\n', pos);
    if (end == std::string::npos) end = log.size();
    const std::string line = log.substr(pos, end - pos);
    pos = end + 1;
    if (line.empty()) continue;
    boost::system::error_code ec;
    boost::json::value v = boost::json::parse(line, ec);
    if (ec || !v.is_object()) {
      ADD_FAILURE() << "a log line that is not a JSON object: " << line;
      continue;
    }
    lines.push_back(v.as_object());
  }
  return lines;
}

// The lines whose "msg" is `message`.
inline std::vector<boost::json::object> lines_with_msg(const std::vector<boost::json::object>& lines,
                                                       const std::string& message) {
  std::vector<boost::json::object> out;
  for (const auto& l : lines) {
    if (l.contains("msg") && l.at("msg").is_string() && l.at("msg").as_string() == message) out.push_back(l);
  }
  return out;
}

// The access line of the request with this id (an empty object if none).
inline boost::json::object access_line(const std::vector<boost::json::object>& lines, const std::string& request_id) {
  for (const auto& l : lines_with_msg(lines, "request")) {
    const auto* id = l.if_contains("request_id");
    if (id && id->is_string() && id->as_string() == request_id) return l;
  }
  ADD_FAILURE() << "no access line for request " << request_id;
  return {};
}

}  // namespace conveyor::testing
