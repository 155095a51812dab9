// The JSON of one tool call, read a byte at a time for ToolCallStream
// (tool_call_parser.cpp): where a JSON value ends and its text without the
// whitespace outside strings (ValueScanner), and a call object's name and
// arguments (CallObjectReader). Internal to http/.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace conveyor::http::tool_call_detail {

bool is_json_space(char c);

// One JSON value. It checks only what it needs to find the value's end (a
// container's brackets, a string's quotes and escapes).
class ValueScanner {
 public:
  enum class Step : uint8_t {
    more,             // the value goes on
    done,             // this byte ended it
    done_unconsumed,  // the value (a number, true, ...) ended before this byte
    error,            // no value starts with this byte
  };

  void reset() { *this = ValueScanner(); }
  Step push(char c);
  // The value's bytes so far, without whitespace outside strings.
  const std::string& text() const { return text_; }
  bool is_string() const { return kind_ == Kind::string; }

 private:
  enum class Kind : uint8_t { none, string, container, scalar };
  Kind kind_ = Kind::none;
  int depth_ = 0;
  bool in_string_ = false;
  bool escape_ = false;
  std::string text_;
};

// {"name": "f", "arguments" | "parameters": ARGS}, whitespace anywhere,
// keys in any order, other keys ("type", "id") skipped. ARGS must be an
// object: any other value is an error where it starts.
class CallObjectReader {
 public:
  enum class Step : uint8_t { more, done, error };
  struct Read {
    Step step = Step::more;
    std::string_view arguments;  // what this byte added to the arguments' compact text
    bool named = false;          // this byte closed the name: name() holds it
  };

  void reset() { *this = CallObjectReader(); }
  // done: the object closed (with or without a name: the caller decides);
  // error: this is not a call object (or a name that is not a plain string).
  Read push(char c);
  const std::string& name() const { return name_; }
  bool has_arguments() const { return has_arguments_; }

 private:
  enum class Where : uint8_t { open, key, in_key, colon, value, after_value };
  Read end_value(Read r);

  Where where_ = Where::open;
  std::string key_;
  bool key_escape_ = false;
  bool value_is_name_ = false, value_is_arguments_ = false;
  ValueScanner value_;
  std::string name_;
  bool has_arguments_ = false;
};

}  // namespace conveyor::http::tool_call_detail
