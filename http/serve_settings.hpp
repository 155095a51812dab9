// Everything `conveyor serve` is configured with: the model, the server's
// options and the engine's limits and policies; and the one table of its
// settings (serve_settings_table()), from which the flags of `conveyor
// serve` and `conveyor router`, their --help, and the reader of the TOML
// config file (examples in configs/serve*.toml) are all made.
//
//   model = "dummy:llama-15m"          # top level: model, tokenizer
//   [server]  ServerOptions (http/server_options.hpp)
//   [engine]  EngineConfig (engine/engine_config.hpp)
//
// Keys use underscores where the flags use dashes, and a few differ in name
// (the table says which); some keys have no flag and some flags no key. An
// unknown key or table, or a value of the wrong type or out of range, is an
// error naming it (shutdown_grace_seconds, which shutdown_timeout replaced,
// names its successor).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "base/status.hpp"
#include "engine/engine_config.hpp"
#include "http/server_options.hpp"

namespace conveyor::http {

struct ServeSettings {
  std::string model;      // as for `conveyor generate --model` ("": the embedded default)
  std::string tokenizer;  // llama2.c tokenizer file ("": none)
  ServerOptions server;
  EngineConfig engine;
};

// A setting's value as a flag or the config file gives it.
using SettingValue = std::variant<int64_t, double, bool, std::string>;

struct Setting {
  // What a flag's text is read as (a TOML value has its own type).
  enum class Kind : uint8_t { text, integer, number, boolean };
  std::string_view flag;   // without the dashes; "": a config-file key only
  std::string_view table;  // "server", "engine", or "" (the top level)
  std::string_view key;    // in that table; "": a flag only
  Kind kind = Kind::text;
  std::string_view help;
  // Shown in --help in place of the default value ("": the value in ServeSettings{}).
  std::string_view default_text;
  bool router = false;  // `conveyor router` has the flag too
  // Sets the value; the error says what is wrong with it (the caller says where).
  std::function<Status(ServeSettings&, const SettingValue&)> assign;
  // The value as a flag would give it (the default in --help).
  std::function<std::string(const ServeSettings&)> show;
};

// Every setting, in the order --help lists them.
const std::vector<Setting>& serve_settings_table();
// The setting with this flag, or null.
const Setting* find_setting_by_flag(std::string_view flag);

// A flag's text as a value of setting's kind; the error names the flag.
Expected<SettingValue> value_of_flag(const Setting& setting, std::string_view text);
// Applies a flag's text to `settings`; the error starts with "--FLAG: ".
Status apply_flag(const Setting& setting, std::string_view text, ServeSettings& settings);
// help and the default, for --help.
std::string help_text(const Setting& setting);

// Keys present in the file replace the values in `settings`.
Status load_serve_config(const std::string& path, ServeSettings& settings);
// The same from TOML text (`source` names it in messages).
Status parse_serve_config(std::string_view toml_text, const std::string& source, ServeSettings& settings);

// The server options' ranges, whatever set them (file, flags, a program):
// timeouts more than 0, io_threads 1 or more, ws_max_messages_per_second 0
// or more. The error names the flag.
Status validate_server_options(const ServerOptions& options);

}  // namespace conveyor::http
