// The agent swarm's real tool calls (examples/agent_swarm.cpp, the default
// --tool-choice required): the tools every agent declares, the check of a
// call against them, the tools themselves (fake and deterministic), and the
// agent whose conversation is OpenAI chat messages.
//
// Each turn asks for a call with tool_choice "required", a named function,
// or "auto" (--tool-choice), one call a turn (parallel_tool_calls false).
// The call that comes back is checked here, not taken on trust: its name
// must be declared (and be the named one), its arguments must parse as a
// JSON object valid under the tool's `parameters` (schema_violation, a
// validator of the schema keywords the tools use). A valid call runs the
// tool; the assistant's tool_calls message and a `role: "tool"` answer join
// the conversation, and the next turn sends it all again. An invalid call
// gets an error as its answer; a text answer (possible with auto) is kept
// and followed by a user message asking for a call.
//
// How a call is asked for and read differs by transport: over HTTP the
// server does it (swarm_http.hpp reads message.tool_calls from the stream's
// deltas); in-process swarm_planner.hpp does it with the server's own
// pieces. This file needs Boost.JSON alone.
#pragma once

#include <algorithm>
#include <boost/json.hpp>
#include <cstdint>
#include <functional>
#include <optional>
#include <regex>
#include <string>
#include <vector>

#include "examples/printable.hpp"
#include "examples/swarm_agent.hpp"

namespace conveyor::examples::swarm {

namespace json = boost::json;

// ---- the tools ----------------------------------------------------------------

// OpenAI's `tools` array. The city's pattern bounds a call's length in
// bytes (an escape-free ASCII name), so --max-tokens 128 holds the longest
// call even on a byte vocabulary.
inline const json::array& tools() {
  static const json::array declared = json::parse(R"([
    {"type": "function", "function": {
      "name": "calc", "description": "Computes a op b.",
      "parameters": {"type": "object", "properties": {
          "op": {"type": "string", "enum": ["+", "-", "*"]},
          "a": {"type": "integer", "minimum": -999, "maximum": 999},
          "b": {"type": "integer", "minimum": -999, "maximum": 999}},
        "required": ["op", "a", "b"], "additionalProperties": false}}},
    {"type": "function", "function": {
      "name": "lookup", "description": "The forecast's daily highs in a city, for 1 to 7 days (default 1).",
      "parameters": {"type": "object", "properties": {
          "city": {"type": "string", "pattern": "^[A-Z][a-z]{1,11}$"},
          "days": {"type": "integer", "minimum": 1, "maximum": 7}},
        "required": ["city"], "additionalProperties": false}}}
  ])").as_array();
  return declared;
}

inline const std::string& tools_json() {
  static const std::string text = json::serialize(tools());
  return text;
}

// The declared tool's parameters schema; null when no tool has that name.
inline const json::value* tool_parameters(std::string_view name) {
  for (const json::value& t : tools()) {
    const json::object& f = t.at("function").as_object();
    if (f.at("name").as_string() == name) return &f.at("parameters");
  }
  return nullptr;
}

// The tools, deterministic: calc computes; lookup makes up daily highs from
// the city's name.
inline json::object run_tool(std::string_view name, const json::object& args) {
  if (name == "calc") {
    const int64_t a = args.at("a").to_number<int64_t>(), b = args.at("b").to_number<int64_t>();
    const std::string_view op = args.at("op").as_string();
    return {{"result", op == "+" ? a + b : op == "-" ? a - b : a * b}};
  }
  const std::string_view city = args.at("city").as_string();
  const int64_t days = args.contains("days") ? args.at("days").to_number<int64_t>() : 1;
  uint32_t h = 2166136261u;  // FNV-1a of the name
  for (unsigned char c : city) h = (h ^ c) * 16777619u;
  json::array highs;
  for (int64_t d = 0; d < days; ++d) highs.push_back(int64_t(5 + (h >> (d * 3)) % 25));
  return {{"city", city}, {"high_c", std::move(highs)}};
}

// ---- checking a call ------------------------------------------------------------

inline bool has_type(const json::value& v, std::string_view type) {
  if (type == "object") return v.is_object();
  if (type == "string") return v.is_string();
  if (type == "boolean") return v.is_bool();
  if (type == "number") return v.is_number();
  if (type == "integer") return v.is_int64() || v.is_uint64() || (v.is_double() && v.as_double() == double(int64_t(v.as_double())));
  return false;
}

// Characters, as JSON Schema counts a string's length: UTF-8 lead bytes.
inline size_t code_points(std::string_view s) {
  size_t n = 0;
  for (unsigned char c : s) n += (c & 0xC0) != 0x80;
  return n;
}

// At most `bytes` of `text`, not cutting a UTF-8 character.
inline std::string_view utf8_prefix(std::string_view text, size_t bytes) {
  if (text.size() <= bytes) return text;
  while (bytes > 0 && (static_cast<unsigned char>(text[bytes]) & 0xC0) == 0x80) --bytes;
  return text.substr(0, bytes);
}

// Why `value` is not valid under `schema` ("" when it is). The keywords the
// tools use are checked: type, enum, properties, required,
// additionalProperties false, minLength, maxLength, pattern (searched, as
// JSON Schema says; ^ and $ anchor), minimum, maximum; description is an
// annotation. Any other keyword is reported as one this does not check, so
// a schema edited past the subset cannot let calls through unchecked.
inline std::string schema_violation(const json::value& schema, const json::value& value, const std::string& at = "#") {
  const json::object& s = schema.as_object();
  for (const auto& [key, rule] : s) {
    static const std::vector<std::string_view> kChecked = {
        "type", "enum", "properties", "required", "additionalProperties", "minLength", "maxLength",
        "pattern", "minimum", "maximum", "description"};
    if (std::find(kChecked.begin(), kChecked.end(), key) == kChecked.end())
      return at + ": keyword '" + std::string(key) + "' is not checked here";
  }
  if (const json::value* type = s.if_contains("type"); type && !has_type(value, type->as_string()))
    return at + ": " + json::serialize(value) + " is not of type " + std::string(type->as_string());
  if (const json::value* choices = s.if_contains("enum")) {
    const json::array& list = choices->as_array();
    if (std::find(list.begin(), list.end(), value) == list.end())
      return at + ": " + json::serialize(value) + " is not one of " + json::serialize(*choices);
  }
  if (value.is_string()) {
    const std::string_view text = value.as_string();
    if (const json::value* n = s.if_contains("minLength"); n && code_points(text) < n->to_number<uint64_t>())
      return at + ": shorter than " + json::serialize(*n) + " characters";
    if (const json::value* n = s.if_contains("maxLength"); n && code_points(text) > n->to_number<uint64_t>())
      return at + ": longer than " + json::serialize(*n) + " characters";
    if (const json::value* p = s.if_contains("pattern");
        p && !std::regex_search(text.begin(), text.end(), std::regex(std::string(p->as_string()))))
      return at + ": \"" + std::string(text) + "\" does not match " + std::string(p->as_string());
  }
  if (value.is_number()) {
    const double x = value.to_number<double>();
    if (const json::value* m = s.if_contains("minimum"); m && x < m->to_number<double>())
      return at + ": " + json::serialize(value) + " is below the minimum " + json::serialize(*m);
    if (const json::value* m = s.if_contains("maximum"); m && x > m->to_number<double>())
      return at + ": " + json::serialize(value) + " is above the maximum " + json::serialize(*m);
  }
  if (value.is_object()) {
    const json::object& o = value.as_object();
    const json::object* properties = s.contains("properties") ? &s.at("properties").as_object() : nullptr;
    const json::value* additional = s.if_contains("additionalProperties");
    for (const auto& [name, member] : o) {
      const std::string where = at + "/" + std::string(name);
      if (const json::value* sub = properties ? properties->if_contains(name) : nullptr) {
        if (std::string why = schema_violation(*sub, member, where); !why.empty()) return why;
      } else if (additional && additional->is_bool() && !additional->as_bool()) {
        return where + ": not a declared property";
      }
    }
    if (const json::value* required = s.if_contains("required")) {
      for (const json::value& name : required->as_array())
        if (!o.contains(name.as_string())) return at + ": the required '" + std::string(name.as_string()) + "' is missing";
    }
  }
  return {};
}

// One call as the model made it.
struct Call {
  std::string id;
  std::string name;
  std::string arguments;  // JSON text, as the API carries it
};

// How one turn asks for a call.
enum class ChoicePolicy { required, named, alternate, automatic };

inline std::optional<ChoicePolicy> parse_choice_policy(std::string_view s) {
  if (s == "required") return ChoicePolicy::required;
  if (s == "named") return ChoicePolicy::named;
  if (s == "alternate") return ChoicePolicy::alternate;
  if (s == "auto") return ChoicePolicy::automatic;
  return std::nullopt;
}

struct TurnChoice {
  std::string label;     // "required" | "named" | "auto": how the figures group turns
  std::string function;  // named: the function
  std::string describe() const { return label == "named" ? "named " + function : label; }
  json::value tool_choice() const {
    if (label != "named") return json::value(label);
    return json::object{{"type", "function"}, {"function", json::object{{"name", function}}}};
  }
};

// alternate: required, then named, then required...; named: lookup and calc
// in turn (agents start on different ones).
inline TurnChoice choice_for(ChoicePolicy policy, int agent, int turn) {
  const std::string function = (agent + turn) % 2 == 0 ? "lookup" : "calc";
  switch (policy) {
    case ChoicePolicy::required: return {"required", ""};
    case ChoicePolicy::automatic: return {"auto", ""};
    case ChoicePolicy::named: return {"named", function};
    case ChoicePolicy::alternate: return turn % 2 == 0 ? TurnChoice{"required", ""} : TurnChoice{"named", function};
  }
  return {"required", ""};
}

// Why the call is not a valid answer to `choice` ("" when it is); `args`
// gets its arguments.
inline std::string call_violation(const Call& call, const TurnChoice& choice, json::object& args) {
  const json::value* parameters = tool_parameters(call.name);
  if (!parameters) return "'" + call.name + "' is not a declared tool";
  if (choice.label == "named" && call.name != choice.function)
    return "tool_choice named '" + choice.function + "', the call is '" + call.name + "'";
  json::error_code ec;
  json::value parsed = json::parse(call.arguments, ec);
  if (ec) return "arguments are not JSON (" + ec.message() + "): " + call.arguments;
  if (!parsed.is_object()) return "arguments are not an object: " + call.arguments;
  if (std::string why = schema_violation(*parameters, parsed); !why.empty()) return why;
  args = std::move(parsed.as_object());
  return {};
}

// ---- the agent --------------------------------------------------------------------

enum class Verdict { valid, invalid, text };

struct TurnOutcome {
  std::string choice;  // TurnChoice::label
  Verdict verdict;
};

// One agent that calls tools: its conversation is chat messages.
class ToolAgent : public Agent {
 public:
  ToolAgent(int index, int turns, ChoicePolicy policy, const std::string& system)
      : Agent(index, turns), policy_(policy) {
    messages_.push_back(json::object{{"role", "system"}, {"content", system}});
    messages_.push_back(json::object{{"role", "user"}, {"content", task(index)}});
  }

  static std::string task(int index) {
    return "Agent " + std::to_string(index) + ": plan a trip. Check the weather and add up the costs.";
  }

  const json::array& messages() const { return messages_; }
  TurnChoice choice() const { return choice_for(policy_, index(), turns_done()); }
  const std::vector<TurnOutcome>& outcomes() const { return outcomes_; }

  // The turn ended with these calls (none: the model answered `content`).
  void finish_turn(const TurnRecord& record, const std::vector<Call>& calls, const std::string& content) {
    const TurnChoice asked = choice();
    if (calls.empty()) {
      outcomes_.push_back({asked.label, Verdict::text});
      record_turn(record, asked.describe() + ", " + std::to_string(record.tokens) + " tokens -> text \"" +
                              printable(utf8_prefix(content, 60)) + "\"");
      messages_.push_back(json::object{{"role", "assistant"}, {"content", content}});
      messages_.push_back(json::object{{"role", "user"}, {"content", "Call one of your tools."}});
      return;
    }
    json::array tool_calls, answers;
    std::string line = asked.describe() + ", " + std::to_string(record.tokens) + " tokens ->";
    bool valid = true;
    for (const Call& call : calls) {
      json::object args;
      std::string why = call_violation(call, asked, args);
      if (why.empty() && calls.size() > 1) why = std::to_string(calls.size()) + " calls, where one was asked for";
      const json::object answer = why.empty() ? run_tool(call.name, args) : json::object{{"error", why}};
      // Valid arguments are JSON, which escapes control characters itself.
      line += " " + printable(call.name) + "(" + (why.empty() ? call.arguments : printable(call.arguments)) +
              ") = " + json::serialize(answer) + (why.empty() ? " (valid)" : " (INVALID: " + why + ")");
      valid = valid && why.empty();
      tool_calls.push_back(json::object{
          {"id", call.id},
          {"type", "function"},
          {"function", json::object{{"name", call.name}, {"arguments", call.arguments}}}});
      answers.push_back(json::object{{"role", "tool"}, {"tool_call_id", call.id}, {"content", json::serialize(answer)}});
    }
    outcomes_.push_back({asked.label, valid ? Verdict::valid : Verdict::invalid});
    record_turn(record, std::move(line));
    messages_.push_back(json::object{{"role", "assistant"}, {"content", nullptr}, {"tool_calls", std::move(tool_calls)}});
    for (json::value& a : answers) messages_.push_back(std::move(a));
  }

 private:
  ChoicePolicy policy_;
  json::array messages_;
  std::vector<TurnOutcome> outcomes_;
};

// ---- the figures -------------------------------------------------------------------

// Turns by how they were asked for: valid calls, invalid ones, text answers.
struct CallShare {
  int turns = 0, valid = 0, invalid = 0, text = 0;
  double valid_pct() const { return turns ? 100.0 * valid / turns : 0.0; }
};

inline std::vector<std::pair<std::string, CallShare>> call_shares(const std::vector<std::unique_ptr<Agent>>& agents) {
  std::vector<std::pair<std::string, CallShare>> out;
  for (const auto& a : agents) {
    const auto* agent = dynamic_cast<const ToolAgent*>(a.get());
    if (!agent) continue;
    for (const TurnOutcome& o : agent->outcomes()) {
      auto it = std::find_if(out.begin(), out.end(), [&](const auto& p) { return p.first == o.choice; });
      if (it == out.end()) it = out.insert(out.end(), {o.choice, CallShare{}});
      CallShare& c = it->second;
      ++c.turns;
      (o.verdict == Verdict::valid ? c.valid : o.verdict == Verdict::invalid ? c.invalid : c.text)++;
    }
  }
  return out;
}

// "valid tool calls, tool_choice required: 64 of 64 turns (100.0%); 0 invalid, 0 answered in text"
inline void print_call_shares(const std::vector<std::unique_ptr<Agent>>& agents, const std::string& transport) {
  for (const auto& [choice, c] : call_shares(agents)) {
    std::printf("valid tool calls (%s), tool_choice %s: %d of %d turns (%.1f%%); %d invalid, %d answered in text\n",
                transport.c_str(), choice.c_str(), c.valid, c.turns, c.valid_pct(), c.invalid, c.text);
  }
}

// The same as flat figures (what `conveyor bench --report` tabulates):
// valid_call_pct_required, valid_calls_required, invalid_calls_required,
// text_answers_required, tool_turns_required, and so on per tool_choice.
inline json::object call_share_figures(const std::vector<std::unique_ptr<Agent>>& agents) {
  json::object out;
  for (const auto& [choice, c] : call_shares(agents)) {
    out["valid_call_pct_" + choice] = c.valid_pct();
    out["valid_calls_" + choice] = c.valid;
    out["invalid_calls_" + choice] = c.invalid;
    out["text_answers_" + choice] = c.text;
    out["tool_turns_" + choice] = c.turns;
  }
  return out;
}

// ---- fitting the conversation in the context -------------------------------------------

// The prompt tokens of `messages` with the tools, as the model's chat
// template renders them (in-process the template, over HTTP the server's
// /v1/chat/completions/render); nullopt and `error` on failure.
using PromptCounter = std::function<std::optional<int>(const json::array& messages, std::string& error)>;

struct SharedPrompt {
  std::string system;  // the system message's text
  int first_tokens = 0;  // agent 0's first prompt (system text, tools, task)
  int turn_tokens = 0;   // the most a turn adds to the prompt (measured, see below)
  std::string error;     // set when nothing fits
};

// The longest system text (in whole rules) for which agent 0's first
// prompt stays within `target` tokens and within what `turns` turns of
// `max_tokens` leave of `context`. A turn's room is measured: the prompt a
// worst-case turn adds (the longest call of either tool and its answer, or,
// with auto, a text answer of max_tokens and the request for a call that
// follows it).
inline SharedPrompt fit_system_prompt(const PromptCounter& count, ChoicePolicy policy, int context, int turns,
                                      int max_tokens, int target) {
  SharedPrompt out;
  auto first = [](int rules) {
    return json::array{json::object{{"role", "system"}, {"content", system_text(rules)}},
                       json::object{{"role", "user"}, {"content", ToolAgent::task(0)}}};
  };
  const std::optional<int> base = count(first(0), out.error);
  if (!base) return out;
  int turn = 0;
  const std::vector<Call> longest = {{"call_0", "calc", R"({"op": "*", "a": -999, "b": -999})"},
                                     {"call_0", "lookup", R"({"city": "Abcdefghijkl", "days": 7})"}};
  for (const Call& call : longest) {
    ToolAgent probe(0, turns + 1, ChoicePolicy::required, system_text(0));
    probe.finish_turn(TurnRecord{}, {call}, "");
    const std::optional<int> n = count(probe.messages(), out.error);
    if (!n) return out;
    turn = std::max(turn, *n - *base);
  }
  if (policy == ChoicePolicy::automatic) {
    ToolAgent text(0, turns + 1, policy, system_text(0));
    text.finish_turn(TurnRecord{}, {}, "");
    const std::optional<int> n = count(text.messages(), out.error);
    if (!n) return out;
    turn = std::max(turn, *n - *base + max_tokens);
  }
  out.turn_tokens = turn;
  // Later agents' tasks name longer indices: a few tokens of margin.
  const int room = context - (turns - 1) * turn - max_tokens - 8;
  if (room < *base) {
    out.error = "the model's context (" + std::to_string(context) + ") is too short for " + std::to_string(turns) +
                " turns of up to " + std::to_string(turn) + " tokens each, after a first prompt of " +
                std::to_string(*base) + ": ask for fewer --turns or a smaller --max-tokens";
    return out;
  }
  target = std::min(target, room);
  // Doubling, then halving: the most rules whose prompt fits.
  int fits = 0, first_tokens = *base, over = 1;
  for (;; over *= 2) {
    const std::optional<int> m = count(first(over), out.error);
    if (!m) return out;
    if (*m > target) break;
    fits = over;
    first_tokens = *m;
  }
  while (over - fits > 1) {
    const int mid = (fits + over) / 2;
    const std::optional<int> m = count(first(mid), out.error);
    if (!m) return out;
    (*m > target ? over : fits) = mid;
    if (*m <= target) first_tokens = *m;
  }
  out.system = system_text(fits);
  out.first_tokens = first_tokens;
  return out;
}

}  // namespace conveyor::examples::swarm
