// API keys without a server: the key file's format and its errors, the
// gate's authentication, its per-key limits on a clock the test drives, a
// reload that keeps a key's usage, the token bucket, and the new [server]
// keys of the config file.
#include <gtest/gtest.h>

#include <fstream>

#include "http/api_key_file.hpp"
#include "http/key_gate.hpp"
#include "http/serve_settings.hpp"
#include "http/token_bucket.hpp"

namespace conveyor::http {
namespace {

using Clock = KeyGate::Clock;
using std::chrono::milliseconds;
using std::chrono::seconds;

const char* kTwoKeys = R"(
[[key]]
key = "sk-alpha-123"
name = "team-a"
max_concurrent = 2
tokens_per_minute = 600

[[key]]
key = "sk-beta-456"
)";

std::vector<ApiKeySpec> parse_ok(const std::string& text) {
  auto keys = parse_api_key_file(text, "keys.toml");
  EXPECT_TRUE(keys) << keys.error().message;
  return keys ? *keys : std::vector<ApiKeySpec>{};
}

std::string parse_error(const std::string& text) {
  auto keys = parse_api_key_file(text, "keys.toml");
  EXPECT_FALSE(keys) << text;
  return keys ? "" : keys.error().message;
}

TEST(ApiKeyFile, ParsesKeysNamesAndLimits) {
  const auto keys = parse_ok(kTwoKeys);
  ASSERT_EQ(keys.size(), 2u);
  EXPECT_EQ(keys[0].key, "sk-alpha-123");
  EXPECT_EQ(keys[0].name, "team-a");
  EXPECT_EQ(keys[0].max_concurrent, 2);
  EXPECT_EQ(keys[0].tokens_per_minute, 600);
  EXPECT_EQ(keys[1].name, "key-2");  // the default name counts from 1
  EXPECT_EQ(keys[1].max_concurrent, 0);
  EXPECT_EQ(keys[1].tokens_per_minute, 0);
}

TEST(ApiKeyFile, ErrorsNameTheEntryAndNeverTheKey) {
  struct Case {
    std::string text;
    std::string says;
  };
  const std::vector<Case> cases = {
      {"", "no [[key]] entries"},
      {"[[key]]\nname = \"x\"\n", "'key' is missing"},
      {"[[key]]\nkey = 5\n", "key[0].key must be a string"},
      {"[[key]]\nkey = \"has space\"\n", "printable ASCII without spaces"},
      {"[[key]]\nkey = \"\"\n", "printable ASCII without spaces"},
      {"[[key]]\nkey = \"sk-secret\"\nmax_concurrent = 0\n", "max_concurrent must be an integer of 1 or more"},
      {"[[key]]\nkey = \"sk-secret\"\ntokens_per_minute = \"lots\"\n", "tokens_per_minute must be an integer"},
      {"[[key]]\nkey = \"sk-secret\"\nmax_tokens = 3\n", "unknown field 'max_tokens'"},
      {"[[key]]\nkey = \"sk-secret\"\n[[key]]\nkey = \"sk-secret\"\n", "the same key is given twice"},
      {"[[key]]\nkey = \"sk-secret\"\nname = \"a\"\n[[key]]\nkey = \"sk-other\"\nname = \"a\"\n",
       "the name 'a' is taken"},
      {"keys = 1\n", "unknown key 'keys'"},
      {"[[key]\nkey = \"sk-secret\"\n", "keys.toml"},  // not TOML
  };
  for (const Case& c : cases) {
    const std::string message = parse_error(c.text);
    EXPECT_NE(message.find(c.says), std::string::npos) << message;
    EXPECT_EQ(message.find("sk-secret"), std::string::npos) << "the error shows the key: " << message;
  }
  auto missing = load_api_key_file("/nonexistent/keys.toml");
  ASSERT_FALSE(missing);
  EXPECT_NE(missing.error().message.find("cannot open '/nonexistent/keys.toml'"), std::string::npos);
}

TEST(ApiKeyFile, ApiKeyFlagIsOneMoreKeyWithoutLimits) {
  const std::string path = ::testing::TempDir() + "conveyor_keys_of.toml";
  std::ofstream(path) << kTwoKeys;
  ServerOptions o;
  o.api_key = "sk-flag";
  o.api_key_file = path;
  auto keys = api_keys_of(o);
  ASSERT_TRUE(keys) << keys.error().message;
  ASSERT_EQ(keys->size(), 3u);
  EXPECT_EQ((*keys)[0].name, "--api-key");
  EXPECT_EQ((*keys)[0].max_concurrent, 0);
  o.api_key = "sk-beta-456";  // the same key twice
  EXPECT_FALSE(api_keys_of(o));
  EXPECT_TRUE(api_keys_of(ServerOptions{})->empty());
}

TEST(KeyGate, WithoutKeysEveryonePassesUnlimited) {
  KeyGate gate;
  const auto who = gate.authenticate("");
  EXPECT_TRUE(who.ok);
  EXPECT_EQ(who.key, nullptr);
  EXPECT_TRUE(std::holds_alternative<KeyLease>(gate.admit(who.key, 1 << 20)));
}

TEST(KeyGate, AuthenticatesEachKeyAndOnlyBearerForm) {
  KeyGate gate;
  gate.set_keys(parse_ok(kTwoKeys));
  EXPECT_EQ(gate.size(), 2u);
  EXPECT_TRUE(gate.authenticate("Bearer sk-alpha-123").ok);
  EXPECT_TRUE(gate.authenticate("Bearer sk-beta-456").ok);
  EXPECT_NE(gate.authenticate("Bearer sk-alpha-123").key, gate.authenticate("Bearer sk-beta-456").key);
  EXPECT_TRUE(gate.authenticate("bearer sk-alpha-123").ok);  // the scheme is case-insensitive (RFC 9110)
  for (const char* wrong : {"", "sk-alpha-123", "Bearer sk-alpha-12", "Bearer sk-alpha-1234", "Basic sk-alpha-123",
                            "Bearer ", "Bearer SK-ALPHA-123"})
    EXPECT_FALSE(gate.authenticate(wrong).ok) << wrong;
}

TEST(KeyGate, ConcurrencyLimitRefusesUntilALeaseEnds) {
  KeyGate gate;
  gate.set_keys(parse_ok(kTwoKeys));
  const KeyRef a = gate.authenticate("Bearer sk-alpha-123").key;
  auto first = gate.admit(a, 1);
  auto second = gate.admit(a, 1);
  ASSERT_TRUE(std::holds_alternative<KeyLease>(first));
  ASSERT_TRUE(std::holds_alternative<KeyLease>(second));
  auto third = gate.admit(a, 1);
  ASSERT_TRUE(std::holds_alternative<KeyRefusal>(third));
  const KeyRefusal& no = std::get<KeyRefusal>(third);
  EXPECT_EQ(no.error.status, 429);
  EXPECT_EQ(no.error.type, "rate_limit_error");
  EXPECT_EQ(no.error.code, "concurrency_limit_exceeded");
  EXPECT_NE(no.error.message.find("'team-a'"), std::string::npos) << no.error.message;
  EXPECT_NE(no.error.message.find("max_concurrent"), std::string::npos) << no.error.message;
  EXPECT_EQ(no.retry_after_seconds, 1);
  EXPECT_EQ(no.counted, Refusal::concurrency);
  // The other key has no limits.
  const KeyRef b = gate.authenticate("Bearer sk-beta-456").key;
  std::vector<KeyLease> many;
  for (int i = 0; i < 10; ++i) many.push_back(std::move(std::get<KeyLease>(gate.admit(b, 1000))));
  std::get<KeyLease>(first).release();
  EXPECT_TRUE(std::holds_alternative<KeyLease>(gate.admit(a, 1)));  // a temporary: ends at once
  { KeyLease moved = std::move(std::get<KeyLease>(second)); }       // a moved lease ends once
  auto again = gate.admit(a, 1);
  auto and_again = gate.admit(a, 1);
  EXPECT_TRUE(std::holds_alternative<KeyLease>(again));
  EXPECT_TRUE(std::holds_alternative<KeyLease>(and_again));
  EXPECT_TRUE(std::holds_alternative<KeyRefusal>(gate.admit(a, 1)));
}

TEST(KeyGate, TokensPerMinuteChargesPromptAndGeneratedTokens) {
  KeyGate gate;
  const Clock::time_point t0 = Clock::now();
  gate.set_keys({ApiKeySpec{"k", "rate", 0, 600}}, t0);  // 10 tokens a second, 600 at most
  const KeyRef k = gate.authenticate("Bearer k").key;
  {
    auto lease = gate.admit(k, 500, t0);  // 100 left
    ASSERT_TRUE(std::holds_alternative<KeyLease>(lease));
    std::get<KeyLease>(lease).charge(300);  // generated: 200 in debt
  }
  // The charge used the real clock, a moment after t0: a few tokens back at most.
  auto refused = gate.admit(k, 1, t0 + milliseconds(100));
  ASSERT_TRUE(std::holds_alternative<KeyRefusal>(refused));
  const KeyRefusal& no = std::get<KeyRefusal>(refused);
  EXPECT_EQ(no.error.status, 429);
  EXPECT_EQ(no.error.code, "tokens_per_minute_exceeded");
  EXPECT_NE(no.error.message.find("600 prompt and generated tokens per minute"), std::string::npos)
      << no.error.message;
  EXPECT_EQ(no.counted, Refusal::rate_limit);
  EXPECT_GE(no.retry_after_seconds, 19);  // 200 in debt at 10 a second, and one more
  EXPECT_LE(no.retry_after_seconds, 21);
  EXPECT_TRUE(std::holds_alternative<KeyRefusal>(gate.admit(k, 1, t0 + seconds(15))));
  EXPECT_TRUE(std::holds_alternative<KeyLease>(gate.admit(k, 1, t0 + seconds(25))));
  // A prompt larger than a minute's worth passes on a positive balance, then waits its debt off.
  EXPECT_TRUE(std::holds_alternative<KeyLease>(gate.admit(k, 5000, t0 + seconds(200))));
  EXPECT_TRUE(std::holds_alternative<KeyRefusal>(gate.admit(k, 1, t0 + seconds(600))));
  EXPECT_TRUE(std::holds_alternative<KeyLease>(gate.admit(k, 1, t0 + seconds(700))));
}

TEST(KeyGate, RefundsGiveBackUpToTheBucketsCapacity) {
  KeyGate gate;
  const Clock::time_point t0 = Clock::now();
  gate.set_keys({ApiKeySpec{"k", "rate", 0, 600}}, t0);  // 600 a minute
  const KeyRef k = gate.authenticate("Bearer k").key;
  {
    auto lease = gate.admit(k, 590, t0);  // 10 left
    ASSERT_TRUE(std::holds_alternative<KeyLease>(lease));
    std::get<KeyLease>(lease).refund(5000);  // refused by the engine: back to full, not past it
  }
  // The refund used the real clock, after t0: asking at t0 adds nothing more.
  EXPECT_TRUE(std::holds_alternative<KeyLease>(gate.admit(k, 600, t0)));  // takes all 600
  EXPECT_TRUE(std::holds_alternative<KeyRefusal>(gate.admit(k, 1, t0)));
}

TEST(KeyGate, ReloadKeepsUsageOfKeptKeysAndRevokesRemovedOnes) {
  KeyGate gate;
  gate.set_keys(parse_ok(kTwoKeys));
  const KeyRef a = gate.authenticate("Bearer sk-alpha-123").key;
  const KeyRef b = gate.authenticate("Bearer sk-beta-456").key;
  auto held = gate.admit(a, 1);
  ASSERT_TRUE(std::holds_alternative<KeyLease>(held));
  // team-a now allows one request: the one in flight fills it. Beta is gone.
  gate.set_keys({ApiKeySpec{"sk-alpha-123", "team-a2", 1, 0}});
  EXPECT_EQ(gate.authenticate("Bearer sk-alpha-123").key, a);
  EXPECT_FALSE(gate.authenticate("Bearer sk-beta-456").ok);
  auto refused = gate.admit(a, 1);
  ASSERT_TRUE(std::holds_alternative<KeyRefusal>(refused));
  EXPECT_NE(std::get<KeyRefusal>(refused).error.message.find("'team-a2'"), std::string::npos);
  std::get<KeyLease>(held).release();
  EXPECT_TRUE(std::holds_alternative<KeyLease>(gate.admit(a, 1)));
  // A socket that authenticated with beta before the reload is refused now.
  auto revoked = gate.admit(b, 1);
  ASSERT_TRUE(std::holds_alternative<KeyRefusal>(revoked));
  EXPECT_EQ(std::get<KeyRefusal>(revoked).error.status, 401);
  EXPECT_FALSE(std::get<KeyRefusal>(revoked).counted);
  // Back again: it authenticates anew; the old socket's identity stays revoked.
  gate.set_keys(parse_ok(kTwoKeys));
  EXPECT_TRUE(std::holds_alternative<KeyLease>(gate.admit(gate.authenticate("Bearer sk-beta-456").key, 1)));
  EXPECT_TRUE(std::holds_alternative<KeyRefusal>(gate.admit(b, 1)));
}

TEST(TokenBucket, RefillsToCapacityAndCarriesDebt) {
  const auto t0 = TokenBucket::Clock::now();
  TokenBucket bucket(5, 5, t0);
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(bucket.try_take(1, t0));
  EXPECT_FALSE(bucket.try_take(1, t0));
  EXPECT_TRUE(bucket.try_take(1, t0 + milliseconds(200)));
  EXPECT_DOUBLE_EQ(bucket.level(t0 + seconds(100)), 5);  // never above capacity
  bucket.charge(15, t0 + seconds(100));
  EXPECT_DOUBLE_EQ(bucket.level(t0 + seconds(100)), -10);
  EXPECT_DOUBLE_EQ(bucket.seconds_until(0, t0 + seconds(100)), 2);
  bucket.reconfigure(1, 1, t0 + seconds(103));  // level 5, cut to 1
  EXPECT_DOUBLE_EQ(bucket.level(t0 + seconds(103)), 1);
}

TEST(ServeSettings, LimitKeysAndTheirRanges) {
  ServeSettings s;
  ASSERT_TRUE(parse_serve_config("[server]\napi_key_file = \"/etc/keys.toml\"\nheader_timeout = 2.5\n"
                                 "idle_timeout_seconds = 30\nmax_connections = 64\nws_max_messages_per_second = 0\n",
                                 "t.toml", s));
  EXPECT_EQ(s.server.api_key_file, "/etc/keys.toml");
  EXPECT_EQ(s.server.header_timeout_seconds, 2.5);
  EXPECT_EQ(s.server.idle_timeout_seconds, 30);
  EXPECT_EQ(s.server.max_connections, 64u);
  EXPECT_EQ(s.server.ws_max_messages_per_second, 0);
  for (const char* bad : {"[server]\nheader_timeout = 0\n", "[server]\nidle_timeout_seconds = -1\n",
                          "[server]\nws_max_messages_per_second = -5\n", "[server]\nmax_connections = -1\n",
                          "[server]\nmax_connections = \"many\"\n"}) {
    ServeSettings t;
    EXPECT_FALSE(parse_serve_config(bad, "t.toml", t)) << bad;
  }
  ServerOptions o;
  EXPECT_TRUE(validate_server_options(o));
  o.header_timeout_seconds = 0;
  const Status st = validate_server_options(o);
  ASSERT_FALSE(st);
  EXPECT_NE(st.error().message.find("--header-timeout"), std::string::npos);
}

}  // namespace
}  // namespace conveyor::http
