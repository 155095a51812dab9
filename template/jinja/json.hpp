// JSON in and out: the render context arrives as Boost.JSON values, and the
// `tojson` filter is Hugging Face's json.dumps(x, ensure_ascii=False,
// indent=None, separators=None, sort_keys=False).
#pragma once

#include <optional>
#include <string>

#include <boost/json/value.hpp>

#include "template/jinja/value.hpp"

namespace conveyor::jinja {

// A JSON value as a template value; with `is_data` every string (and key) is
// marked as caller data. Nesting deeper than kMaxDepth is an error.
Value from_json(const boost::json::value& v, bool is_data);

struct JsonFormat {
  std::optional<std::string> indent;  // json.dumps' indent as a string of spaces (or the given string)
  std::string item_separator = ", ";  // ", " without indent, "," with it
  std::string key_separator = ": ";
  bool sort_keys = false;
  bool ensure_ascii = false;
};

// json.dumps(v); the result is data as a whole when any string in v was.
Str to_json(const Value& v, const JsonFormat& format);

}  // namespace conveyor::jinja
