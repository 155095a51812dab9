// The flags of http::serve_settings_table() on a `conveyor` subcommand:
// `serve` registers all of them, `router` those the table marks for it. A
// given flag is kept as text until apply(), which reads it into the
// settings after a config file's values, in the table's order.
#pragma once

#include <CLI/CLI.hpp>
#include <deque>
#include <optional>
#include <string>
#include <string_view>

#include "http/serve_settings.hpp"

namespace conveyor::cli {

class SettingFlags {
 public:
  enum class Which : uint8_t { serve, router };
  SettingFlags(CLI::App* cmd, Which which);

  bool given(std::string_view flag) const;
  // Reads every given flag into `settings`; the error names the flag.
  Status apply(http::ServeSettings& settings) const;

 private:
  struct Flag {
    const http::Setting* setting;
    std::optional<std::string> text;
  };
  std::deque<Flag> flags_;  // CLI11 keeps pointers to the texts
};

}  // namespace conveyor::cli
