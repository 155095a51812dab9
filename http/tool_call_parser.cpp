// ToolCallStream: the byte-at-a-time reader of tool calls in model output
// (tool_calls.hpp). Reading one byte at a time is what makes the result the
// same however the output was cut into deltas: every decision depends only on
// the bytes so far, never on where a delta ended.
#include "http/tool_calls.hpp"

namespace conveyor::http {
namespace {

bool is_space(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }
bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

// The text that opens calls anywhere in the output.
std::string_view trigger_of(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::llama3_json: return "<|python_tag|>";
    case ToolCallFormat::hermes: return "<tool_call>";
    case ToolCallFormat::mistral: return "[TOOL_CALLS]";
  }
  return {};
}

// One JSON value, read a byte at a time; whitespace outside strings is
// dropped from what it keeps.
class ValueScanner {
 public:
  enum class Step { more, done, done_unconsumed, error };

  void reset() { *this = ValueScanner(); }
  // The value's bytes so far, compact.
  std::string& text() { return text_; }
  bool is_string() const { return kind_ == Kind::string; }

  Step push(char c) {
    switch (kind_) {
      case Kind::none:
        if (is_space(c)) return Step::more;
        text_.push_back(c);
        if (c == '"') kind_ = Kind::string;
        else if (c == '{' || c == '[') kind_ = Kind::container, depth_ = 1;
        else if (c == '}' || c == ']' || c == ',' || c == ':') return Step::error;
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
        if (is_space(c)) return Step::more;
        text_.push_back(c);
        if (c == '"') in_string_ = true;
        else if (c == '{' || c == '[') ++depth_;
        else if (c == '}' || c == ']') {
          if (--depth_ == 0) return Step::done;
        }
        return Step::more;
      case Kind::scalar:
        if (is_space(c) || c == ',' || c == '}' || c == ']') return Step::done_unconsumed;
        text_.push_back(c);
        return Step::more;
    }
    return Step::error;
  }

 private:
  enum class Kind : uint8_t { none, string, container, scalar };
  Kind kind_ = Kind::none;
  int depth_ = 0;
  bool in_string_ = false;
  bool escape_ = false;
  std::string text_;
};

}  // namespace

struct ToolCallStream::State {
  enum class Mode : uint8_t {
    content,       // prose; watching for the trigger
    object,        // inside a call's {...}
    hermes_close,  // after a Hermes call's object: whitespace, then </tool_call>
    llama_next,    // after a Llama call: ';' or whitespace, then another '{' or prose
    mistral_open,  // after [TOOL_CALLS]: '[' (a list) or a name (the newer form)
    mistral_next,  // in a Mistral list, after a call: ',' or ']'
    mistral_name,  // the newer form: the name, then [ARGS] (often dropped by decoding) and the object
    mistral_args,  // the newer form: the arguments' value
  };
  // Where a call object is: before '{', between keys, inside a key, before
  // ':', inside a value, after a value.
  enum class Obj : uint8_t { open, key, in_key, colon, value, after_value };

  ToolCallFormat format;
  IdMaker make_id;
  std::string_view trigger;
  Mode mode = Mode::content;

  // Content: held-back whitespace (while nothing was said since the start or
  // the last call) and the trigger's prefix that the text ends with.
  std::string held_space;
  std::string partial;
  bool leading_partial = false;  // `partial` began the answer
  bool segment_empty = true;
  bool at_start = true;

  // The bytes of call syntax since the trigger (or the last call that got a
  // name): given back as content when what follows is not a call.
  std::string raw;
  bool committed_since_trigger = false;

  // The call being read.
  Obj obj = Obj::open;
  std::string key;
  bool key_escape = false;
  ValueScanner value;
  enum class Sink : uint8_t { name, arguments, skip } sink = Sink::skip;
  std::string name;
  std::string pending_arguments;  // arguments read before the name
  bool has_arguments = false;
  bool committed = false;         // this call's first fragment went out
  size_t close_matched = 0;       // hermes_close: bytes of </tool_call> matched; mistral_name: of [ARGS]

  int32_t calls = 0;
  bool malformed = false;         // some call was cut short or broke the format
};

ToolCallStream::ToolCallStream(ToolCallFormat format, IdMaker make_id) : s_(std::make_unique<State>()) {
  s_->format = format;
  s_->make_id = make_id ? std::move(make_id) : IdMaker([format] { return make_tool_call_id(format); });
  s_->trigger = trigger_of(format);
}

ToolCallStream::ToolCallStream(ToolCallStream&&) noexcept = default;
ToolCallStream& ToolCallStream::operator=(ToolCallStream&&) noexcept = default;
ToolCallStream::~ToolCallStream() = default;

int32_t ToolCallStream::calls_started() const { return s_->calls; }
bool ToolCallStream::calls_complete() const { return !s_->malformed; }

namespace {

using State = ToolCallStream::State;

void say(State& s, std::string_view text, ToolCallOutput& out) {
  if (text.empty()) return;
  out.content.append(text);
  s.segment_empty = false;
}

// Arguments of the current call, to its latest fragment.
void emit_arguments(State& s, std::string_view piece, ToolCallOutput& out) {
  if (piece.empty()) return;
  if (out.calls.empty() || out.calls.back().index != s.calls - 1) {
    ToolCallDelta d;
    d.index = s.calls - 1;
    out.calls.push_back(std::move(d));
  }
  out.calls.back().arguments.append(piece);
}

void commit(State& s, ToolCallOutput& out) {
  ToolCallDelta d;
  d.index = s.calls++;
  d.id = s.make_id();
  d.name = s.name;
  d.first = true;
  d.arguments = std::move(s.pending_arguments);
  s.pending_arguments.clear();
  out.calls.push_back(std::move(d));
  s.committed = true;
  s.committed_since_trigger = true;
  s.raw.clear();
}

void start_object(State& s) {
  s.obj = State::Obj::open;
  s.name.clear();
  s.pending_arguments.clear();
  s.has_arguments = false;
  s.committed = false;
  s.value.reset();
}

// Back to prose. After a call, nothing was said yet in the new segment.
void to_content(State& s, bool after_call) {
  s.mode = State::Mode::content;
  s.raw.clear();
  s.committed_since_trigger = false;
  s.segment_empty = after_call;
}

// What was read is not (or no longer) a call: its bytes become content.
void give_back(State& s, ToolCallOutput& out) {
  if (s.committed_since_trigger || s.committed) s.malformed = true;
  std::string raw = std::move(s.raw);
  to_content(s, false);
  say(s, raw, out);
}

// The object of a call ended.
bool end_object(State& s, ToolCallOutput& out) {
  if (!s.committed) {
    if (s.name.empty()) return false;
    commit(s, out);
  }
  if (!s.has_arguments) emit_arguments(s, "{}", out);
  s.raw.clear();
  return true;
}

void begin_value(State& s) {
  s.value.reset();
  if (s.key == "name") s.sink = State::Sink::name;
  else if (s.key == "arguments" || s.key == "parameters") s.sink = State::Sink::arguments;
  else s.sink = State::Sink::skip;
}

// The value of the current key ended (its text is in s.value).
bool end_value(State& s, ToolCallOutput& out) {
  std::string& text = s.value.text();
  if (s.sink == State::Sink::name) {
    if (!s.value.is_string() || text.size() < 2 || text.find('\\') != std::string::npos) return false;
    s.name = text.substr(1, text.size() - 2);
    if (s.name.empty()) return false;
    if (!s.committed) commit(s, out);
  } else if (s.sink == State::Sink::arguments) {
    s.has_arguments = true;
  }
  return true;
}

// One byte of a call object. Returns false when it cannot be one.
bool object_byte(State& s, char c, ToolCallOutput& out, bool& object_done) {
  using Obj = State::Obj;
  switch (s.obj) {
    case Obj::open:
      if (is_space(c)) return true;
      if (c != '{') return false;
      s.obj = Obj::key;
      return true;
    case Obj::key:
      if (is_space(c)) return true;
      if (c == '}') {
        object_done = true;
        return end_object(s, out);
      }
      if (c != '"') return false;
      s.key.clear();
      s.obj = Obj::in_key;
      return true;
    case Obj::in_key:
      if (s.key_escape) {
        s.key_escape = false;
        s.key.push_back(c);
      } else if (c == '\\') {
        s.key_escape = true;
      } else if (c == '"') {
        s.obj = Obj::colon;
      } else {
        s.key.push_back(c);
      }
      return true;
    case Obj::colon:
      if (is_space(c)) return true;
      if (c != ':') return false;
      begin_value(s);
      s.obj = Obj::value;
      return true;
    case Obj::value: {
      const size_t before = s.value.text().size();
      const ValueScanner::Step step = s.value.push(c);
      if (step == ValueScanner::Step::error) return false;
      if (s.sink == State::Sink::arguments && step != ValueScanner::Step::done_unconsumed) {
        const std::string_view added = std::string_view(s.value.text()).substr(before);
        if (s.committed) emit_arguments(s, added, out);
        else s.pending_arguments.append(added);
      }
      if (step == ValueScanner::Step::more) return true;
      if (!end_value(s, out)) return false;
      s.obj = Obj::after_value;
      if (step == ValueScanner::Step::done) return true;
      return object_byte(s, c, out, object_done);  // the byte that ended a number
    }
    case Obj::after_value:
      if (is_space(c)) return true;
      if (c == ',') {
        s.obj = Obj::key;
        return true;
      }
      if (c == '}') {
        object_done = true;
        return end_object(s, out);
      }
      return false;
  }
  return false;
}

void content_byte(State& s, char c, ToolCallOutput& out);

// One byte while a call's syntax is being read; false: not a call.
bool call_byte(State& s, char c, ToolCallOutput& out) {
  using Mode = State::Mode;
  switch (s.mode) {
    case Mode::object: {
      bool done = false;
      if (!object_byte(s, c, out, done)) return false;
      if (!done) return true;
      switch (s.format) {
        case ToolCallFormat::hermes: s.mode = Mode::hermes_close, s.close_matched = 0; break;
        case ToolCallFormat::llama3_json: s.mode = Mode::llama_next; break;
        case ToolCallFormat::mistral: s.mode = Mode::mistral_next; break;
      }
      return true;
    }
    case Mode::hermes_close: {
      static constexpr std::string_view kClose = "</tool_call>";
      if (s.close_matched == 0 && is_space(c)) return true;
      if (c != kClose[s.close_matched]) return false;
      if (++s.close_matched == kClose.size()) to_content(s, true);
      return true;
    }
    case Mode::llama_next:
      if (is_space(c) || c == ';') return true;
      if (c == '{') {
        s.mode = Mode::object;
        start_object(s);
        s.committed_since_trigger = true;  // earlier calls of this answer stand
        return call_byte(s, c, out);
      }
      to_content(s, true);
      content_byte(s, c, out);
      return true;
    case Mode::mistral_open:
      if (is_space(c)) return true;
      if (c == '[') {
        s.mode = Mode::object;
        start_object(s);
        return true;
      }
      if (!is_name_char(c)) return false;
      start_object(s);
      s.name.push_back(c);
      s.close_matched = 0;
      s.mode = Mode::mistral_name;
      return true;
    case Mode::mistral_next:
      if (is_space(c)) return true;
      if (c == ',') {
        s.mode = Mode::object;
        start_object(s);
        return true;
      }
      if (c == ']') {
        to_content(s, true);
        return true;
      }
      return false;
    case Mode::mistral_name: {
      static constexpr std::string_view kArgs = "[ARGS]";
      if (s.close_matched == 0 && is_name_char(c)) {
        s.name.push_back(c);
        return true;
      }
      if (s.close_matched < kArgs.size() && c == kArgs[s.close_matched]) {
        ++s.close_matched;
        return true;
      }
      if (s.close_matched != 0 && s.close_matched != kArgs.size()) return false;
      if (is_space(c)) return true;
      if (c != '{') return false;
      commit(s, out);
      s.sink = State::Sink::arguments;
      s.value.reset();
      s.mode = Mode::mistral_args;
      return call_byte(s, c, out);
    }
    case Mode::mistral_args: {
      const size_t before = s.value.text().size();
      const ValueScanner::Step step = s.value.push(c);
      if (step == ValueScanner::Step::error || step == ValueScanner::Step::done_unconsumed) return false;
      emit_arguments(s, std::string_view(s.value.text()).substr(before), out);
      if (step == ValueScanner::Step::done) {
        s.has_arguments = true;
        to_content(s, true);
      }
      return true;
    }
    case Mode::content: break;
  }
  return false;
}

// The call syntax begins after `opening` (the trigger, or the leading byte).
void open_calls(State& s, std::string opening) {
  s.raw = std::move(s.held_space) + std::move(opening);
  s.held_space.clear();
  s.partial.clear();
  s.committed_since_trigger = false;
  start_object(s);
  s.mode = s.format == ToolCallFormat::mistral ? State::Mode::mistral_open : State::Mode::object;
}

void content_byte(State& s, char c, ToolCallOutput& out) {
  if (s.partial.empty() && s.segment_empty && is_space(c)) {
    s.held_space.push_back(c);
    return;
  }
  const bool first = s.at_start;
  s.at_start = false;
  // Llama 3.1 answers a call with a bare JSON object (its <|python_tag|> is a
  // control token, which decoding drops).
  if (first && c == '{' && s.format == ToolCallFormat::llama3_json) {
    open_calls(s, {});
    s.raw.push_back(c);
    call_byte(s, c, out);
    return;
  }
  // A Mistral answer that opens with '[' and then '{' is the list of calls
  // whose [TOOL_CALLS] decoding dropped; "[T..." may still be the trigger.
  if (s.partial == "[" && s.leading_partial && s.format == ToolCallFormat::mistral && (c == '{' || is_space(c))) {
    open_calls(s, "[");
    s.mode = State::Mode::object;
    s.raw.push_back(c);
    if (!call_byte(s, c, out)) give_back(s, out);
    return;
  }
  if (s.partial.empty()) s.leading_partial = first;
  s.partial.push_back(c);
  if (s.trigger.starts_with(s.partial)) {
    if (s.partial.size() == s.trigger.size()) open_calls(s, std::move(s.partial));
    return;
  }
  // The longest end of the held text that may still begin the trigger stays.
  size_t keep = s.partial.size() - 1;
  while (keep > 0 && !s.trigger.starts_with(std::string_view(s.partial).substr(s.partial.size() - keep))) --keep;
  say(s, s.held_space, out);
  s.held_space.clear();
  say(s, std::string_view(s.partial).substr(0, s.partial.size() - keep), out);
  s.partial.erase(0, s.partial.size() - keep);
}

}  // namespace

void ToolCallStream::feed(std::string_view text, ToolCallOutput& out) {
  State& s = *s_;
  for (char c : text) {
    if (s.mode == State::Mode::content) {
      content_byte(s, c, out);
      continue;
    }
    s.raw.push_back(c);
    if (!call_byte(s, c, out)) give_back(s, out);
  }
}

void ToolCallStream::finish(ToolCallOutput& out) {
  State& s = *s_;
  using Mode = State::Mode;
  switch (s.mode) {
    case Mode::content:
      if (s.calls == 0 || !s.partial.empty()) say(s, s.held_space, out);
      say(s, s.partial, out);
      s.held_space.clear();
      s.partial.clear();
      return;
    case Mode::hermes_close:  // a model that ends after the object without the closing tag
    case Mode::llama_next:
    case Mode::mistral_next:  // a list cut short after a whole call
      to_content(s, true);
      return;
    default:
      break;
  }
  // Inside a call's syntax: a call cut short, or text that never became one.
  if (s.committed) s.malformed = true;
  else give_back(s, out);
  to_content(s, false);
}

}  // namespace conveyor::http
