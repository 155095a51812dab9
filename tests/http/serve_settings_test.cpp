// The table of `conveyor serve`'s settings (http/serve_settings.hpp): the
// flags, the config file's keys and --help are all made from it, so these
// check the table itself.
#include "http/serve_settings.hpp"

#include <gtest/gtest.h>

#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>

namespace conveyor::http {
namespace {

TEST(SettingsTable, FlagsAndKeysAreEachNamedOnce) {
  std::set<std::string> flags, keys;
  for (const Setting& s : serve_settings_table()) {
    ASSERT_TRUE(s.assign && s.show) << s.key;
    if (!s.flag.empty()) {
      EXPECT_TRUE(flags.insert(std::string(s.flag)).second) << s.flag;
    }
    if (!s.key.empty()) {
      EXPECT_TRUE(keys.insert(std::string(s.table) + "." + std::string(s.key)).second) << s.key;
    }
    EXPECT_TRUE(s.table.empty() || s.table == "server" || s.table == "engine") << s.table;
    EXPECT_FALSE(s.flag.empty() && s.key.empty());
  }
  for (const char* flag : {"model", "port", "max-num-seqs", "preemption", "kv-cache-dtype", "log-level"})
    EXPECT_NE(find_setting_by_flag(flag), nullptr) << flag;
  EXPECT_EQ(find_setting_by_flag("no-such-flag"), nullptr);
}

// Each default, written out as a flag, reads back as the same setting: what
// --help shows is what the server runs with.
TEST(SettingsTable, EveryDefaultReadsBackAsAFlag) {
  const ServeSettings defaults;
  for (const Setting& s : serve_settings_table()) {
    if (s.flag.empty()) continue;
    const std::string shown = s.show(defaults);
    ServeSettings read;
    ASSERT_TRUE(apply_flag(s, shown, read)) << s.flag << " " << shown;
    EXPECT_EQ(s.show(read), shown) << s.flag;
    EXPECT_NE(help_text(s).find("(default "), std::string::npos) << s.flag;
  }
}

TEST(SettingsTable, FlagsAreParsedOnceIntoTheirTypes) {
  ServeSettings s;
  for (auto [flag, text] : {std::pair{"device", "cuda:1"}, {"kv-cache-dtype", "f16"}, {"preemption", "cost"},
                            {"admission", "profiled"}, {"batching", "static-padded"}, {"fault-recovery", "fail"},
                            {"log-level", "warn"}, {"log-format", "json"}, {"overlap", "false"},
                            {"max-num-seqs", "64"}, {"kv-cache-memory", "4GiB"}, {"header-timeout", "2.5"},
                            {"speculative", "draft:/models/small.gguf"}})
    ASSERT_TRUE(apply_flag(*find_setting_by_flag(flag), text, s)) << flag;
  EXPECT_EQ(s.engine.device, (DeviceSpec{DeviceKind::cuda, 1}));
  EXPECT_EQ(s.engine.kv_cache_dtype, KvDtype::f16);
  EXPECT_EQ(s.engine.preemption, PreemptionMode::cost);
  EXPECT_EQ(s.engine.admission, AdmissionMode::profiled);
  EXPECT_EQ(s.engine.batching, BatchingMode::static_padded);
  EXPECT_EQ(s.engine.fault_recovery, FaultRecovery::fail);
  EXPECT_EQ(s.server.log_level, LogLevel::warn);
  EXPECT_EQ(s.server.log_format, LogFormat::json);
  EXPECT_FALSE(s.engine.overlap);
  EXPECT_EQ(s.engine.max_num_seqs, 64);
  EXPECT_EQ(s.engine.kv_cache_memory, int64_t(4) << 30);
  EXPECT_EQ(s.server.header_timeout_seconds, 2.5);
  EXPECT_EQ(s.engine.speculative.method, SpeculativeMethod::draft);
  EXPECT_EQ(s.engine.speculative.draft_model, "/models/small.gguf");
  EXPECT_EQ(find_setting_by_flag("speculative")->show(s), "draft:/models/small.gguf");
  ASSERT_TRUE(apply_flag(*find_setting_by_flag("speculative"), "ngram", s));
  EXPECT_EQ(s.engine.speculative.method, SpeculativeMethod::ngram);
  EXPECT_TRUE(s.engine.speculative.draft_model.empty());
}

TEST(SettingsTable, BadFlagsNameTheFlagAndTheProblem) {
  ServeSettings s;
  auto error_of = [&](const char* flag, const char* text) {
    const Status st = apply_flag(*find_setting_by_flag(flag), text, s);
    return st ? std::string() : st.error().message;
  };
  EXPECT_EQ(error_of("device", "tpu"), "--device: must be cpu, cuda or cuda:N, not 'tpu'");
  EXPECT_EQ(error_of("port", "70000"), "--port: must be an integer between 0 and 65535, not 70000");
  EXPECT_EQ(error_of("max-num-seqs", "many"), "--max-num-seqs: 'many' is not an integer");
  EXPECT_EQ(error_of("overlap", "maybe"), "--overlap: must be true or false, not 'maybe'");
  EXPECT_EQ(error_of("header-timeout", "0"), "--header-timeout: must be more than 0 seconds");
  EXPECT_NE(error_of("preemption", "sometimes").find("--preemption: unknown preemption policy 'sometimes'"),
            std::string::npos);
  EXPECT_NE(error_of("kv-cache-memory", "4XB").find("--kv-cache-memory: '4XB' is not a size"), std::string::npos);
}

TEST(SettingsTable, TheConfigFileReadsTheSameTable) {
  ServeSettings s;
  ASSERT_TRUE(parse_serve_config("[engine]\ndevice = \"cuda\"\nbatching = \"static\"\nfault_recovery = \"fail\"\n"
                                 "prefix_caching = false\n[server]\nio_threads = 2\n",
                                 "t.toml", s));
  EXPECT_EQ(s.engine.device.kind, DeviceKind::cuda);
  EXPECT_EQ(s.engine.batching, BatchingMode::static_);
  EXPECT_EQ(s.engine.fault_recovery, FaultRecovery::fail);
  EXPECT_FALSE(s.engine.prefix_caching);
  EXPECT_EQ(s.server.io_threads, 2);
  const Status bad = parse_serve_config("[engine]\nbatching = \"dynamic\"\n", "t.toml", s);
  ASSERT_FALSE(bad);
  EXPECT_NE(bad.error().message.find("t.toml: engine.batching: unknown batching mode 'dynamic'"), std::string::npos)
      << bad.error().message;
  EXPECT_FALSE(parse_serve_config("[engine]\nmax_num_seqs = 1.5\n", "t.toml", s));
  EXPECT_FALSE(parse_serve_config("[server]\nio_threads = 0\n", "t.toml", s));
}

// configs/serve.toml says it holds every key with its default: the table
// keeps it honest.
TEST(SettingsTable, ConfigsServeTomlListsEveryKeyWithItsDefault) {
  const std::string path = std::string(CONVEYOR_SOURCE_DIR) + "/configs/serve.toml";
  std::ifstream in(path);
  ASSERT_TRUE(in) << path;
  std::stringstream text;
  text << in.rdbuf();
  ServeSettings file;
  ASSERT_TRUE(parse_serve_config(text.str(), path, file));
  const ServeSettings defaults;
  for (const Setting& s : serve_settings_table()) {
    if (s.key.empty() || s.key == "shutdown_grace_seconds") continue;  // a replaced key is only named
    const std::regex line("(^|\\n)" + std::string(s.key) + " *=");
    EXPECT_TRUE(std::regex_search(text.str(), line)) << s.key << " is not in " << path;
    EXPECT_EQ(s.show(file), s.show(defaults)) << s.key;
  }
}

}  // namespace
}  // namespace conveyor::http
