#include "http/tool_call_object.hpp"

namespace conveyor::http::tool_call_detail {

bool is_json_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

ValueScanner::Step ValueScanner::push(char c) {
  switch (kind_) {
    case Kind::none:
      if (is_json_space(c)) return Step::more;
      if (c == '}' || c == ']' || c == ',' || c == ':') return Step::error;
      text_.push_back(c);
      if (c == '"') kind_ = Kind::string;
      else if (c == '{' || c == '[') kind_ = Kind::container, depth_ = 1;
      else kind_ = Kind::scalar;
      return Step::more;
    case Kind::string:
      text_.push_back(c);
      if (escape_) escape_ = false;
      else if (c == '\\') escape_ = true;
      else if (c == '"') return Step::done;
      return Step::more;
    case Kind::container:
      if (in_string_) {
        text_.push_back(c);
        if (escape_) escape_ = false;
        else if (c == '\\') escape_ = true;
        else if (c == '"') in_string_ = false;
        return Step::more;
      }
      if (is_json_space(c)) return Step::more;
      text_.push_back(c);
      if (c == '"') in_string_ = true;
      else if (c == '{' || c == '[') ++depth_;
      else if ((c == '}' || c == ']') && --depth_ == 0) return Step::done;
      return Step::more;
    case Kind::scalar:
      if (is_json_space(c) || c == ',' || c == '}' || c == ']') return Step::done_unconsumed;
      text_.push_back(c);
      return Step::more;
  }
  return Step::error;
}

namespace {

CallObjectReader::Read with_step(CallObjectReader::Step step) {
  CallObjectReader::Read r;
  r.step = step;
  return r;
}
CallObjectReader::Read failed() { return with_step(CallObjectReader::Step::error); }
CallObjectReader::Read closed() { return with_step(CallObjectReader::Step::done); }

}  // namespace

CallObjectReader::Read CallObjectReader::end_value(Read r) {
  where_ = Where::after_value;
  if (value_is_arguments_) has_arguments_ = true;
  if (!value_is_name_) return r;
  const std::string& text = value_.text();
  // Names are letters, digits, '_' and '-': an escape cannot be one of ours.
  if (!value_.is_string() || text.size() < 3 || text.find('\\') != std::string::npos) return failed();
  name_ = text.substr(1, text.size() - 2);
  r.named = true;
  return r;
}

CallObjectReader::Read CallObjectReader::push(char c) {
  switch (where_) {
    case Where::open:
      if (is_json_space(c)) return {};
      if (c != '{') return failed();
      where_ = Where::key;
      return {};
    case Where::key:
      if (is_json_space(c)) return {};
      if (c == '}') return closed();
      if (c != '"') return failed();
      key_.clear();
      where_ = Where::in_key;
      return {};
    case Where::in_key:
      if (key_escape_) {
        key_escape_ = false;
        key_.push_back(c);
      } else if (c == '\\') {
        key_escape_ = true;
      } else if (c == '"') {
        where_ = Where::colon;
      } else {
        key_.push_back(c);
      }
      return {};
    case Where::colon:
      if (is_json_space(c)) return {};
      if (c != ':') return failed();
      value_.reset();
      value_is_name_ = key_ == "name";
      value_is_arguments_ = key_ == "arguments" || key_ == "parameters";
      where_ = Where::value;
      return {};
    case Where::value: {
      const size_t before = value_.text().size();
      const ValueScanner::Step step = value_.push(c);
      if (step == ValueScanner::Step::error) return failed();
      // Arguments are an object (OpenAI's are an object's JSON text).
      if (value_is_arguments_ && before == 0 && !value_.text().empty() && value_.text()[0] != '{') return failed();
      if (step == ValueScanner::Step::done_unconsumed) {  // the byte after a number: read it again
        const Read ended = end_value({});
        if (ended.step == Step::error) return ended;
        return push(c);
      }
      Read r;
      if (value_is_arguments_) r.arguments = std::string_view(value_.text()).substr(before);
      return step == ValueScanner::Step::done ? end_value(r) : r;
    }
    case Where::after_value:
      if (is_json_space(c)) return {};
      if (c == ',') {
        where_ = Where::key;
        return {};
      }
      if (c == '}') return closed();
      return failed();
  }
  return failed();
}

}  // namespace conveyor::http::tool_call_detail
