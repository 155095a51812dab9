#include "http/serve_settings.hpp"

#include <charconv>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <toml++/toml.h>

#include "actors/policy_names.hpp"
#include "base/bytes.hpp"
#include "http/origin_policy.hpp"
#include "http/server_log.hpp"

namespace conveyor::http {
namespace {

using Kind = Setting::Kind;

Status must_be(const std::string& want) { return make_error(Errc::invalid_argument, "must be " + want); }

std::string show_number(double v) {
  std::ostringstream s;
  s << v;
  return s.str();
}

// The field a setting sets, reached from ServeSettings (const or not).
#define FIELD(path) [](auto& s) -> auto& { return s.path; }

// The setting's own parts; the builders below add how it reads and shows.
struct Names {
  std::string_view flag, table, key, help, default_text = {};
  bool router = false;
};

Setting with(const Names& n, Kind kind) {
  Setting s;
  s.flag = n.flag;
  s.table = n.table;
  s.key = n.key;
  s.kind = kind;
  s.help = n.help;
  s.default_text = n.default_text;
  s.router = n.router;
  return s;
}

template <class Field>
Setting text(const Names& n, Field field) {
  Setting s = with(n, Kind::text);
  s.assign = [field](ServeSettings& st, const SettingValue& v) -> Status {
    const auto* str = std::get_if<std::string>(&v);
    if (str == nullptr) return must_be("a string");
    field(st) = *str;
    return Status::ok();
  };
  s.show = [field](const ServeSettings& st) { return std::string(field(st)); };
  return s;
}

// An integer in [lo, hi].
template <class Field>
Setting integer(const Names& n, Field field, int64_t lo, int64_t hi) {
  Setting s = with(n, Kind::integer);
  s.assign = [field, lo, hi](ServeSettings& st, const SettingValue& v) -> Status {
    const auto* i = std::get_if<int64_t>(&v);
    if (i == nullptr) return must_be("an integer");
    if (*i < lo || *i > hi)
      return must_be("an integer between " + std::to_string(lo) + " and " + std::to_string(hi) + ", not " +
                     std::to_string(*i));
    field(st) = static_cast<std::remove_reference_t<decltype(field(st))>>(*i);
    return Status::ok();
  };
  s.show = [field](const ServeSettings& st) { return std::to_string(field(st)); };
  return s;
}

// A number (an integer converts) that `ok` accepts; `want` says which.
template <class Field, class Ok>
Setting number(const Names& n, Field field, Ok ok, const char* want) {
  Setting s = with(n, Kind::number);
  s.assign = [field, ok, want](ServeSettings& st, const SettingValue& v) -> Status {
    double d;
    if (const auto* i = std::get_if<int64_t>(&v)) d = double(*i);
    else if (const auto* x = std::get_if<double>(&v)) d = *x;
    else return must_be(want);
    if (!ok(d)) return must_be(want);
    field(st) = d;
    return Status::ok();
  };
  s.show = [field](const ServeSettings& st) { return show_number(field(st)); };
  return s;
}

const auto any_number = [](double d) { return d == d; };
const auto non_negative = [](double d) { return d >= 0; };  // also refuses NaN
const auto positive = [](double d) { return d > 0 && d <= 1e9; };

template <class Field>
Setting boolean(const Names& n, Field field) {
  Setting s = with(n, Kind::boolean);
  s.assign = [field](ServeSettings& st, const SettingValue& v) -> Status {
    const auto* b = std::get_if<bool>(&v);
    if (b == nullptr) return must_be("true or false");
    field(st) = *b;
    return Status::ok();
  };
  s.show = [field](const ServeSettings& st) { return std::string(field(st) ? "true" : "false"); };
  return s;
}

// One of a set of names, parsed once here into the field's type.
template <class Field, class Parse>
Setting choice(const Names& n, Field field, Parse parse) {
  Setting s = with(n, Kind::text);
  s.assign = [field, parse](ServeSettings& st, const SettingValue& v) -> Status {
    const auto* str = std::get_if<std::string>(&v);
    if (str == nullptr) return must_be("a string");
    auto parsed = parse(*str);
    if (!parsed) return parsed.error();
    field(st) = std::move(parsed).value();
    return Status::ok();
  };
  s.show = [field](const ServeSettings& st) {
    using conveyor::to_string;  // the engine's enums; http's by argument-dependent lookup
    return std::string(to_string(field(st)));
  };
  return s;
}

// `--speculative`: the method, and a draft model's file with draft:FILE.
Setting speculative_choice(const Names& n) {
  Setting s = with(n, Kind::text);
  s.assign = [](ServeSettings& st, const SettingValue& v) -> Status {
    const auto* str = std::get_if<std::string>(&v);
    if (str == nullptr) return must_be("a string");
    auto parsed = parse_speculative(*str);
    if (!parsed) return parsed.error();
    st.engine.speculative.method = parsed->method;
    st.engine.speculative.draft_model = std::move(parsed->draft_model);
    return Status::ok();
  };
  s.show = [](const ServeSettings& st) {
    const SpeculativeConfig& c = st.engine.speculative;
    return to_string(SpeculativeChoice{c.method, c.draft_model});
  };
  return s;
}

// A policy: a built-in mode, set in `mode` (with `name` cleared), or the name
// of one a program registered (actors/policy_names.hpp), set in `name`; the
// mode stays as the fallback of a registered policy that fails.
template <class ModeField, class NameField, class Parse>
Setting policy(const Names& n, const char* kind, ModeField mode, NameField name, Parse parse,
               bool (*registered)(std::string_view), std::vector<std::string> (*names)()) {
  Setting s = with(n, Kind::text);
  s.assign = [kind, mode, name, parse, registered, names](ServeSettings& st, const SettingValue& v) -> Status {
    const auto* str = std::get_if<std::string>(&v);
    if (str == nullptr) return must_be("a string");
    if (auto builtin = parse(*str)) {
      mode(st) = *builtin;
      name(st).clear();
      return Status::ok();
    }
    if (!registered(*str)) {
      std::string choices;
      for (const std::string& c : names()) choices += (choices.empty() ? "" : ", ") + c;
      return make_error(Errc::invalid_argument,
                        "unknown " + std::string(kind) + " policy '" + *str + "' (expected one of " + choices + ")");
    }
    name(st) = *str;
    return Status::ok();
  };
  s.show = [mode, name](const ServeSettings& st) {
    return name(st).empty() ? std::string(conveyor::to_string(mode(st))) : name(st);
  };
  return s;
}

// Bytes: an integer, or a size such as "4GiB" (base/bytes.hpp).
template <class Field>
Setting byte_size(const Names& n, Field field) {
  Setting s = with(n, Kind::text);
  s.assign = [field](ServeSettings& st, const SettingValue& v) -> Status {
    if (const auto* i = std::get_if<int64_t>(&v)) {
      if (*i < 0) return must_be("0 or more bytes");
      field(st) = *i;
      return Status::ok();
    }
    const auto* str = std::get_if<std::string>(&v);
    if (str == nullptr) return must_be("a size such as \"4GiB\" or a number of bytes");
    auto bytes = parse_byte_size(*str);
    if (!bytes) return bytes.error();
    field(st) = *bytes;
    return Status::ok();
  };
  s.show = [field](const ServeSettings& st) { return std::to_string(field(st)); };
  return s;
}

// A comma-separated list of origins (http/origin_policy.hpp).
template <class Field>
Setting origins(const Names& n, Field field) {
  Setting s = with(n, Kind::text);
  s.assign = [field](ServeSettings& st, const SettingValue& v) -> Status {
    const auto* str = std::get_if<std::string>(&v);
    if (str == nullptr) return must_be("a comma-separated list of origins");
    auto parsed = parse_allowed_origins(*str);
    if (!parsed) return parsed.error();
    field(st) = std::move(parsed).value();
    return Status::ok();
  };
  s.show = [field](const ServeSettings& st) {
    std::string out;
    for (const std::string& o : field(st)) out += (out.empty() ? "" : ",") + o;
    return out;
  };
  return s;
}

// A key that another replaced: naming it is an error that names the new one.
Setting replaced(const Names& n, std::string_view by) {
  Setting s = with(n, Kind::text);
  s.assign = [by](ServeSettings&, const SettingValue&) -> Status {
    return make_error(Errc::invalid_argument, "was replaced by " + std::string(by));
  };
  s.show = [](const ServeSettings&) { return std::string(); };
  return s;
}

constexpr int64_t kInt32Max = std::numeric_limits<int32_t>::max();
constexpr int64_t kInt64Max = std::numeric_limits<int64_t>::max();

std::vector<Setting> make_table() {
  std::vector<Setting> t;
  // The top level.
  t.push_back(text({"model", "", "model", "GGUF file, llama2.c checkpoint, or dummy:NAME",
                    "the embedded tiny model", true},
                   FIELD(model)));
  t.push_back(text({"tokenizer", "", "tokenizer", "llama2.c tokenizer file (for llama2.c checkpoints)", "none",
                    true},
                   FIELD(tokenizer)));
  // [server]
  t.push_back(text({"host", "server", "host", "address to listen on", "", true}, FIELD(server.host)));
  t.push_back(integer({"port", "server", "port", "port to listen on (0: any free port)", "", true},
                      FIELD(server.port), 0, 65535));
  t.push_back(text({"api-key", "server", "api_key", "require 'Authorization: Bearer KEY' on /v1/*", "none", true},
                   FIELD(server.api_key)));
  t.push_back(text({"api-key-file", "server", "api_key_file",
                    "TOML file of API keys, each with optional max_concurrent and tokens_per_minute limits "
                    "(see README); read again on SIGHUP",
                    "none", true},
                   FIELD(server.api_key_file)));
  t.push_back(origins({"allowed-origins", "server", "allowed_origins",
                       "web page origins besides the server's own that may open /v1/ws and get CORS: "
                       "https://app.example.com,http://localhost:3000, or *",
                       "none", true},
                      FIELD(server.allowed_origins)));
  t.push_back(text({"served-model-name", "server", "served_model_name", "the model name clients use", "--model",
                    true},
                   FIELD(server.served_model_name)));
  t.push_back(text({"chat-template", "server", "chat_template",
                    "auto | plain | llama2 | chatml | FILE (Jinja); auto: the model's own template", "", true},
                   FIELD(server.chat_template)));
  t.push_back(choice({"tool-call-parser", "server", "tool_call_parser",
                      "auto | llama3_json | hermes | mistral: how the model writes tool calls; auto: as its chat "
                      "template shows",
                      "", true},
                     FIELD(server.tool_call_parser), parse_tool_call_parser));
  t.push_back(choice({"pooling", "server", "pooling",
                      "last | mean: how /v1/embeddings pools an input's final hidden states (the last "
                      "token's, or the mean of all)"},
                     FIELD(server.pooling), parse_pooling));
  t.push_back(integer({"max-body-bytes", "server", "max_body_bytes", "largest request body, in bytes"},
                      FIELD(server.max_body_bytes), 1, kInt64Max));
  t.push_back(integer({"max-output-bytes", "server", "max_output_bytes",
                       "unsent output per connection, in bytes, before its request is cancelled"},
                      FIELD(server.max_output_bytes), 1, kInt64Max));
  t.push_back(number({"header-timeout", "server", "header_timeout",
                      "seconds a connection has to send a complete request header"},
                     FIELD(server.header_timeout_seconds), positive, "more than 0 seconds"));
  t.push_back(number({"idle-timeout", "server", "idle_timeout_seconds",
                      "seconds a keep-alive connection may wait for its next request, or a body or a write may "
                      "stall"},
                     FIELD(server.idle_timeout_seconds), positive, "more than 0 seconds"));
  t.push_back(integer({"max-connections", "server", "max_connections",
                       "open connections; past it new ones get 503 and are closed (0: no cap)"},
                      FIELD(server.max_connections), 0, kInt64Max));
  t.push_back(integer({"ws-max-messages-per-second", "server", "ws_max_messages_per_second",
                       "messages a WebSocket client may send per second; past it an error event, then the "
                       "socket is closed (0: no limit)"},
                      FIELD(server.ws_max_messages_per_second), 0, kInt32Max));
  t.push_back(number({"responses-ttl", "server", "responses_ttl",
                      "seconds a stored response (POST /v1/responses with store) is kept for GET and "
                      "previous_response_id"},
                     FIELD(server.responses_ttl_seconds), positive, "more than 0 seconds"));
  t.push_back(integer({"responses-max", "server", "responses_max",
                       "stored responses kept at most; past it the oldest go (0: none is stored)"},
                      FIELD(server.responses_max), 0, kInt64Max));
  t.push_back(byte_size({"responses-max-bytes", "server", "responses_max_bytes",
                         "bytes all stored responses (and their conversations) hold at most: 64MiB, ..."},
                        FIELD(server.responses_max_bytes)));
  t.push_back(byte_size({"grammar-cache-max-bytes", "server", "grammar_cache_max_bytes",
                         "bytes the compiled grammars kept for reuse (their token masks) hold at most; past it "
                         "the least recently used go: 512MiB, ..."},
                        FIELD(server.grammar_cache_max_bytes)));
  t.push_back(integer({"", "server", "io_threads", "Asio threads"}, FIELD(server.io_threads), 1, 1024));
  t.push_back(number({"shutdown-timeout", "server", "shutdown_timeout",
                      "seconds that running requests may take to finish after SIGTERM (or a first SIGINT) "
                      "before they are cancelled",
                      "", true},
                     FIELD(server.shutdown_timeout_seconds), non_negative, "a number of seconds, 0 or more"));
  t.push_back(replaced({"", "server", "shutdown_grace_seconds", ""}, "server.shutdown_timeout"));
  t.push_back(choice({"log-level", "server", "log_level", "trace | debug | info | warn | error | off", "", true},
                     FIELD(server.log_level), parse_log_level));
  t.push_back(choice({"log-format", "server", "log_format", "text | json: json writes one object per line", "",
                      true},
                     FIELD(server.log_format), parse_log_format));
  t.push_back(number({"log-stats-interval", "server", "log_stats_interval",
                      "seconds between engine summary lines in the log (0: none)"},
                     FIELD(server.log_stats_interval_seconds), non_negative, "a number of seconds, 0 or more"));
  // [engine]
  t.push_back(choice({"device", "engine", "device", "cpu | cuda | cuda:N: the backend that runs the model"},
                     FIELD(engine.device), parse_device));
  t.push_back(integer({"block-size", "engine", "block_size", "tokens per KV block, a power of two"},
                      FIELD(engine.block_size), 1, 1024));
  t.push_back(integer({"kv-cache-tokens", "engine", "kv_cache_tokens", "KV cache capacity in tokens",
                       "sized from memory, see --kv-cache-memory"},
                      FIELD(engine.kv_cache_tokens), 0, kInt64Max));
  t.push_back(byte_size({"kv-cache-memory", "engine", "kv_cache_memory",
                         "KV cache capacity in bytes: 4GiB, 512MiB, 1.5GB, ...",
                         "--kv-cache-memory-fraction of the memory available after the weights load"},
                        FIELD(engine.kv_cache_memory)));
  t.push_back(number({"kv-cache-memory-fraction", "engine", "kv_cache_memory_fraction",
                      "on the CPU: share of the available memory the KV cache takes when neither capacity "
                      "flag is given"},
                     FIELD(engine.kv_cache_memory_fraction), any_number, "a number"));
  t.push_back(number({"gpu-memory-utilization", "engine", "gpu_memory_utilization",
                      "with --device cuda: the share of the GPU's memory this server may hold; the KV cache "
                      "gets what the weights and workspace leave of it"},
                     FIELD(engine.gpu_memory_utilization), any_number, "a number"));
  t.push_back(choice({"kv-cache-dtype", "engine", "kv_cache_dtype",
                      "f32 | f16 | bf16 | q8_0 | auto: the KV cache's element type (auto: on CUDA bf16; on the "
                      "CPU bf16 where it has AVX512-BF16, else f16). q8_0 (heads of a multiple of 32) "
                      "keeps 8-bit values with a scale per 32, about half the bytes of f16"},
                     FIELD(engine.kv_cache_dtype), parse_kv_cache_dtype));
  t.push_back(integer({"swap-space-tokens", "engine", "swap_space_tokens", "host swap capacity in tokens"},
                      FIELD(engine.swap_space_tokens), 0, kInt64Max));
  t.push_back(integer({"max-num-seqs", "engine", "max_num_seqs", "running sequences at once"},
                      FIELD(engine.max_num_seqs), 1, kInt32Max));
  t.push_back(integer({"max-batched-tokens", "engine", "max_batched_tokens", "tokens per iteration"},
                      FIELD(engine.max_batched_tokens), 1, kInt32Max));
  t.push_back(integer({"prefill-chunk", "engine", "prefill_chunk",
                       "longest prefill span per sequence per iteration"},
                      FIELD(engine.prefill_chunk), 1, kInt32Max));
  t.push_back(number({"target-itl-ms", "engine", "target_itl_ms",
                      "inter-token gap to aim for, ms (0: off): iteration budgets and prefill chunks are sized "
                      "from the measured step costs; the two settings above stay upper bounds"},
                     FIELD(engine.target_itl_ms), any_number, "a number"));
  t.push_back(policy({"preemption", "engine", "preemption",
                      "recompute | swap | cost, or a policy the program registered (the built-in "
                      "recompute stands in if it fails or answers late)"},
                     "preemption", FIELD(engine.preemption), FIELD(engine.preemption_policy), parse_preemption_mode,
                     has_preemption_policy, preemption_policy_names));
  t.push_back(policy({"admission", "engine", "admission",
                      "conservative | watermark | profiled, or a policy the program registered (the built-in "
                      "watermark stands in if it fails or answers late)"},
                     "admission", FIELD(engine.admission), FIELD(engine.admission_policy), parse_admission_mode,
                     has_admission_policy, admission_policy_names));
  t.push_back(number({"policy-timeout", "engine", "policy_timeout_seconds",
                      "seconds the scheduler waits for a policy's answer before the built-in stands in"},
                     FIELD(engine.policy_timeout_seconds), positive, "a number of seconds more than 0"));
  t.push_back(choice({"batching", "engine", "batching",
                      "continuous | static | static-padded (static-padded keeps a finished request's row "
                      "computing until its batch ends)"},
                     FIELD(engine.batching), parse_batching_mode));
  t.push_back(choice({"scheduling-policy", "engine", "scheduling_policy",
                      "fcfs | priority (vLLM's: a lower `priority` runs sooner and preempts running "
                      "requests of a higher one; under fcfs `priority` must be 0)"},
                     FIELD(engine.scheduling_policy), parse_scheduling_policy));
  t.push_back(boolean({"overlap", "engine", "overlap", "true | false: plan the next step while one runs"},
                      FIELD(engine.overlap)));
  t.push_back(speculative_choice({"speculative", "engine", "speculative",
                                   "none | ngram | suffix | draft:FILE: speculative decoding (ngram: drafts from "
                                   "earlier occurrences of the last tokens in the prompt and output; suffix: in "
                                   "recent requests' too; draft: a small model with the same vocabulary, a GGUF "
                                   "file, CPU only; verified in one step; output unchanged)"}));
  t.push_back(integer({"speculative-tokens", "engine", "speculative_tokens",
                       "the most drafts a sequence verifies per step (vLLM's num_speculative_tokens)"},
                      FIELD(engine.speculative.num_tokens), 0, 16));
  t.push_back(integer({"speculative-ngram-min", "engine", "speculative_ngram_min",
                       "the shortest suffix the ngram proposer matches"},
                      FIELD(engine.speculative.ngram_min), 1, 16));
  t.push_back(integer({"speculative-ngram-max", "engine", "speculative_ngram_max",
                       "the longest suffix the ngram proposer matches"},
                      FIELD(engine.speculative.ngram_max), 1, 16));
  t.push_back(integer({"speculative-disable-batch", "engine", "speculative_disable_batch",
                       "no drafts while more sequences than this decode in one step"},
                      FIELD(engine.speculative.disable_batch), 1, kInt32Max));
  t.push_back(boolean({"jump-forward", "engine", "jump_forward",
                       "true | false: under a grammar, the bytes it forces next are verified as drafts in one "
                       "step (CPU)"},
                      FIELD(engine.speculative.jump_forward)));
  t.push_back(boolean({"", "engine", "prefix_caching", "reuse the KV blocks of identical prompt prefixes"},
                      FIELD(engine.prefix_caching)));
  t.push_back(boolean({"prefix-wait", "engine", "prefix_wait",
                       "true | false: a request whose leading blocks another request is still computing waits "
                       "for them and reuses them, rather than computing them too"},
                      FIELD(engine.prefix_wait)));
  t.push_back(number({"", "engine", "session_ttl_seconds", "how long a session's KV blocks are kept"},
                     FIELD(engine.session_ttl_seconds), any_number, "a number"));
  t.push_back(number({"", "engine", "session_max_share", "the share of the KV blocks sessions may keep"},
                     FIELD(engine.session_max_share), any_number, "a number"));
  t.push_back(number({"", "engine", "aging_interval_seconds",
                      "under --scheduling-policy priority, a request gains one level per interval (0: no aging)"},
                     FIELD(engine.aging_interval_seconds), any_number, "a number"));
  t.push_back(integer({"max-waiting", "engine", "max_waiting", "waiting-queue bound; past it requests get 429"},
                      FIELD(engine.max_waiting), 0, kInt32Max));
  t.push_back(choice({"fault-recovery", "engine", "fault_recovery",
                      "recompute | fail: after an engine fault the engine restarts, and running requests are "
                      "recomputed from their tokens so far or end with a 500"},
                     FIELD(engine.fault_recovery), parse_fault_recovery));
  t.push_back(integer({"max-fault-retries", "engine", "max_fault_retries",
                       "engine restarts a request may go through before it ends with a 500"},
                      FIELD(engine.max_fault_retries), 0, kInt32Max));
  t.push_back(integer({"threads", "engine", "threads", "compute threads (0: all cores)"}, FIELD(engine.threads),
                      0, kMaxThreads));
  return t;
}

#undef FIELD

}  // namespace

const std::vector<Setting>& serve_settings_table() {
  static const std::vector<Setting> table = make_table();
  return table;
}

const Setting* find_setting_by_flag(std::string_view flag) {
  for (const Setting& s : serve_settings_table())
    if (!s.flag.empty() && s.flag == flag) return &s;
  return nullptr;
}

Expected<SettingValue> value_of_flag(const Setting& s, std::string_view text) {
  const std::string where = "--" + std::string(s.flag) + ": ";
  switch (s.kind) {
    case Kind::text: return SettingValue(std::string(text));
    case Kind::integer: {
      int64_t v = 0;
      const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
      if (text.empty() || ec != std::errc() || end != text.data() + text.size())
        return make_error(Errc::invalid_argument, where + "'" + std::string(text) + "' is not an integer");
      return SettingValue(v);
    }
    case Kind::number: {
      const std::string str(text);
      char* end = nullptr;
      const double v = std::strtod(str.c_str(), &end);
      if (str.empty() || end != str.c_str() + str.size())
        return make_error(Errc::invalid_argument, where + "'" + str + "' is not a number");
      return SettingValue(v);
    }
    case Kind::boolean:
      if (text == "true" || text == "1" || text == "on" || text == "yes") return SettingValue(true);
      if (text == "false" || text == "0" || text == "off" || text == "no") return SettingValue(false);
      return make_error(Errc::invalid_argument, where + "must be true or false, not '" + std::string(text) + "'");
  }
  return make_error(Errc::internal, where + "unknown kind");
}

Status apply_flag(const Setting& s, std::string_view text, ServeSettings& settings) {
  auto value = value_of_flag(s, text);
  if (!value) return value.error();
  if (Status st = s.assign(settings, *value); !st)
    return make_error(Errc::invalid_argument, "--" + std::string(s.flag) + ": " + st.error().message);
  return Status::ok();
}

std::string help_text(const Setting& s) {
  std::string def(s.default_text);
  if (def.empty()) def = s.show(ServeSettings{});
  return std::string(s.help) + " (default " + def + ")";
}

namespace {

// A TOML value as a setting's value.
Expected<SettingValue> value_of_node(const toml::node& n) {
  if (const auto* v = n.as_integer()) return SettingValue(int64_t(v->get()));
  if (const auto* v = n.as_floating_point()) return SettingValue(double(v->get()));
  if (const auto* v = n.as_boolean()) return SettingValue(bool(v->get()));
  if (const auto* v = n.as_string()) return SettingValue(std::string(v->get()));
  return make_error(Errc::invalid_argument, "must be a string, a number or true or false");
}

}  // namespace

Status parse_serve_config(std::string_view toml_text, const std::string& source, ServeSettings& s) {
  toml::table root;
  try {
    root = toml::parse(toml_text, source);
  } catch (const toml::parse_error& e) {
    std::ostringstream msg;
    msg << source << ": " << e.description() << " (line " << e.source().begin.line << ")";
    return make_error(Errc::invalid_argument, msg.str());
  }
  auto fail = [&](const std::string& where, const std::string& why) {
    return make_error(Errc::invalid_argument, source + ": " + where + ": " + why);
  };
  auto set = [&](std::string_view table, std::string_view key, const toml::node& node,
                 const std::string& where) -> Status {
    for (const Setting& setting : serve_settings_table()) {
      if (setting.table != table || setting.key != key) continue;
      auto value = value_of_node(node);
      if (!value) return fail(where, value.error().message);
      if (Status st = setting.assign(s, *value); !st) return fail(where, st.error().message);
      return Status::ok();
    }
    return make_error(Errc::invalid_argument, source + ": unknown key '" + where + "'");
  };
  for (const auto& [key, node] : root) {
    const std::string name(key.str());
    if (name == "server" || name == "engine") {
      if (!node.is_table()) return fail(name, "must be a table");
      for (const auto& [inner, value] : *node.as_table()) {
        const std::string inner_name(inner.str());
        if (Status st = set(name, inner_name, value, name + "." + inner_name); !st) return st;
      }
      continue;
    }
    if (Status st = set("", name, node, name); !st) return st;
  }
  if (Status st = validate_server_options(s.server); !st)
    return make_error(Errc::invalid_argument, source + ": " + st.error().message);
  return Status::ok();
}

Status validate_server_options(const ServerOptions& o) {
  auto in_range = [](double v) { return v > 0 && v <= 1e9; };  // also refuses NaN
  if (!in_range(o.header_timeout_seconds))
    return make_error(Errc::invalid_argument, "--header-timeout (header_timeout) must be more than 0 seconds");
  if (!in_range(o.idle_timeout_seconds))
    return make_error(Errc::invalid_argument, "--idle-timeout (idle_timeout_seconds) must be more than 0 seconds");
  // Some programs take an empty host for every interface, others for the
  // default: neither is guessed.
  if (o.host.empty())
    return make_error(Errc::invalid_argument,
                      "--host (host) is empty: give 127.0.0.1 (this machine only, the default) or 0.0.0.0 "
                      "(every interface)");
  if (o.io_threads < 1) return make_error(Errc::invalid_argument, "io_threads must be 1 or more");
  if (o.ws_max_messages_per_second < 0)
    return make_error(Errc::invalid_argument,
                      "--ws-max-messages-per-second (ws_max_messages_per_second) must be 0 (no limit) or more");
  return Status::ok();
}

Status load_serve_config(const std::string& path, ServeSettings& settings) {
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec))
    return make_error(Errc::invalid_argument, "--config: '" + path + "' is a directory, not a TOML file");
  std::ifstream in(path);
  if (!in) return make_error(Errc::io_error, "--config: cannot open '" + path + "'");
  std::stringstream text;
  text << in.rdbuf();
  return parse_serve_config(text.str(), path, settings);
}

}  // namespace conveyor::http
