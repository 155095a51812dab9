// ToolCallStream: the byte-at-a-time reader of tool calls in model output
// (tool_calls.hpp): prose, the families' triggers and the syntax around
// their calls here; the JSON of each call in tool_call_object.hpp. Reading
// one byte at a time is what makes the result the same however the output
// was cut into deltas: every decision depends only on the bytes so far,
// never on where a delta ended.
#include "http/tool_calls.hpp"

#include "http/tool_call_object.hpp"

namespace conveyor::http {
namespace {

using tool_call_detail::CallObjectReader;
using tool_call_detail::ValueScanner;

bool is_space(char c) { return tool_call_detail::is_json_space(c); }
bool is_name_char(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

// The text that opens calls anywhere in the output.
std::string_view trigger_of(ToolCallFormat format) {
  switch (format) {
    case ToolCallFormat::llama3_json: return "<|python_tag|>";
    case ToolCallFormat::hermes: return "<tool_call>";
    case ToolCallFormat::mistral: return kMistralCalls;
  }
  return {};
}

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
  bool by_trigger = false;  // the syntax began with the whole trigger (not Llama's '{', Mistral's bare '[')

  // The call being read.
  CallObjectReader object;
  std::string mistral_name;       // the newer Mistral form's name
  ValueScanner mistral_arguments; // and its arguments
  std::string pending_arguments;  // arguments read before the name
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

void commit(State& s, const std::string& name, ToolCallOutput& out) {
  ToolCallDelta d;
  d.index = s.calls++;
  d.id = s.make_id();
  d.name = name;
  d.first = true;
  d.arguments = std::move(s.pending_arguments);
  s.pending_arguments.clear();
  out.calls.push_back(std::move(d));
  s.committed = true;
  s.committed_since_trigger = true;
  s.raw.clear();
}

void start_object(State& s) {
  s.object.reset();
  s.pending_arguments.clear();
  s.committed = false;
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

// One byte of a call object; false when it cannot be one. `done`: it closed.
bool object_byte(State& s, char c, ToolCallOutput& out, bool& done) {
  const CallObjectReader::Read r = s.object.push(c);
  if (r.step == CallObjectReader::Step::error) return false;
  if (s.committed) emit_arguments(s, r.arguments, out);
  else s.pending_arguments.append(r.arguments);
  if (r.named && !s.committed) commit(s, s.object.name(), out);
  if (r.step != CallObjectReader::Step::done) return true;
  if (!s.committed) return false;  // an object without a name is not a call
  if (!s.object.has_arguments()) emit_arguments(s, "{}", out);
  s.raw.clear();
  done = true;
  return true;
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
      s.mistral_name.assign(1, c);
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
      if (s.close_matched == 0 && is_name_char(c)) {
        s.mistral_name.push_back(c);
        return true;
      }
      if (s.close_matched < kMistralArgs.size() && c == kMistralArgs[s.close_matched]) {
        ++s.close_matched;
        return true;
      }
      if (s.close_matched != 0 && s.close_matched != kMistralArgs.size()) return false;
      if (is_space(c)) return true;
      if (c != '{') return false;
      commit(s, s.mistral_name, out);
      s.mistral_arguments.reset();
      s.mode = Mode::mistral_args;
      return call_byte(s, c, out);
    }
    case Mode::mistral_args: {
      const size_t before = s.mistral_arguments.text().size();
      const ValueScanner::Step step = s.mistral_arguments.push(c);
      if (step == ValueScanner::Step::error || step == ValueScanner::Step::done_unconsumed) return false;
      emit_arguments(s, std::string_view(s.mistral_arguments.text()).substr(before), out);
      if (step == ValueScanner::Step::done) to_content(s, true);
      return true;
    }
    case Mode::content: break;
  }
  return false;
}

// The call syntax begins after `opening` (the trigger, or the leading byte).
void open_calls(State& s, std::string opening) {
  s.by_trigger = !s.trigger.empty() && opening == s.trigger;
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

void ToolCallStream::finish(ToolCallOutput& out, bool cut_short) {
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
  // Cut short after the trigger, it was a call; a bare '{' or '[' may have
  // been a JSON answer, given back as the text it was.
  if (s.committed || (cut_short && s.by_trigger)) s.malformed = true;
  else give_back(s, out);
  to_content(s, false);
}

}  // namespace conveyor::http
