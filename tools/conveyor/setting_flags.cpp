#include "tools/conveyor/setting_flags.hpp"

namespace conveyor::cli {
namespace {

const char* type_name(http::Setting::Kind kind) {
  switch (kind) {
    case http::Setting::Kind::integer: return "INT";
    case http::Setting::Kind::number: return "NUMBER";
    case http::Setting::Kind::boolean: return "BOOL";
    case http::Setting::Kind::text: return "TEXT";
  }
  return "TEXT";
}

}  // namespace

SettingFlags::SettingFlags(CLI::App* cmd, Which which) {
  for (const http::Setting& s : http::serve_settings_table()) {
    if (s.flag.empty() || (which == Which::router && !s.router)) continue;
    Flag& f = flags_.emplace_back(Flag{&s, std::nullopt});
    cmd->add_option("--" + std::string(s.flag), f.text, http::help_text(s))->type_name(type_name(s.kind));
  }
}

bool SettingFlags::given(std::string_view flag) const {
  for (const Flag& f : flags_)
    if (f.setting->flag == flag) return f.text.has_value();
  return false;
}

Status SettingFlags::apply(http::ServeSettings& settings) const {
  for (const Flag& f : flags_) {
    if (!f.text) continue;
    if (Status st = http::apply_flag(*f.setting, *f.text, settings); !st) return st;
  }
  return Status::ok();
}

}  // namespace conveyor::cli
