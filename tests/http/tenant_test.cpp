// Tenants and policies of a program's own behind the server: each request
// carries its API key's name as its tenant (GenerateRequest::tenant), over
// HTTP and WebSocket, as an admission policy registered by the test and
// named in the engine's config sees it; and --admission / --preemption take
// a registered policy's name.
#include <fstream>
#include <mutex>
#include <set>

#include "actors/policy_registry.hpp"
#include "http/serve_settings.hpp"
#include "tests/http/test_server.hpp"
#include "tests/http/test_util.hpp"

namespace conveyor::http::testing {
namespace {

// The tenants the recording policy was asked about.
struct SeenTenants {
  std::mutex mutex;
  std::set<std::string> tenants;
};
SeenTenants& seen() {
  static SeenTenants s;
  return s;
}

// Conservative admission that notes every candidate's tenant.
admission_actor::behavior_type recording_policy(admission_actor::pointer) {
  auto rule = std::make_shared<ConservativeAdmission>();
  return {
      [rule](admit_atom, const AdmissionQuery& q) {
        {
          std::lock_guard lock(seen().mutex);
          for (const AdmissionCandidate& c : q.candidates) seen().tenants.insert(c.tenant);
        }
        return (*rule)(q);
      },
      [](finished_atom, int32_t) {},
  };
}

void register_once() {
  static const bool registered = [] {
    const Status s = register_admission_policy("test-tenant-recorder", [](caf::actor_system& sys, const EngineConfig&) {
      return sys.spawn(recording_policy);
    });
    EXPECT_TRUE(s) << s.error().message;
    return true;
  }();
  (void)registered;
}

const char* kKeys = R"(
[[key]]
key = "sk-alice"
name = "alice"

[[key]]
key = "sk-bob"
name = "bob"
)";

TEST(Tenants, EachRequestCarriesItsKeysNameToTheAdmissionPolicy) {
  register_once();
  const std::string path = ::testing::TempDir() + "tenant_keys.toml";
  std::ofstream(path) << kKeys;
  ServerOptions options;
  options.api_key_file = path;
  EngineConfig engine = small_engine();
  engine.admission_policy = "test-tenant-recorder";
  TestServer server(engine, options);
  const Response r = http_request(server.port(), "POST", "/v1/completions", R"({"prompt": "x", "max_tokens": 2})",
                                  {{"Authorization", "Bearer sk-alice"}});
  ASSERT_EQ(r.status, 200) << r.body;
  WsClient ws(server.port(), {{"Authorization", "Bearer sk-bob"}});
  ASSERT_TRUE(ws.connected());
  ws.send(body_of({{"id", "b"}, {"prompt", "x"}, {"max_tokens", 2}}));
  for (bool final = false; !final;) {
    auto m = ws.read();
    ASSERT_TRUE(m.has_value());
    final = parse_object(*m)["type"] == "final";
  }
  std::lock_guard lock(seen().mutex);
  EXPECT_EQ(seen().tenants, (std::set<std::string>{"alice", "bob"}));
}

TEST(Tenants, ServeSettingsTakeARegisteredPolicyByName) {
  register_once();
  ServeSettings s;
  const Setting* admission = find_setting_by_flag("admission");
  ASSERT_NE(admission, nullptr);
  ASSERT_TRUE(apply_flag(*admission, "test-tenant-recorder", s));
  EXPECT_EQ(s.engine.admission_policy, "test-tenant-recorder");
  EXPECT_EQ(s.engine.admission, AdmissionMode::watermark);  // the fallback stays
  EXPECT_EQ(admission->show(s), "test-tenant-recorder");
  ASSERT_TRUE(apply_flag(*admission, "profiled", s));
  EXPECT_EQ(s.engine.admission, AdmissionMode::profiled);
  EXPECT_EQ(s.engine.admission_policy, "");
  const Status unknown = apply_flag(*admission, "nope", s);
  ASSERT_FALSE(unknown);
  EXPECT_NE(unknown.error().message.find("--admission"), std::string::npos) << unknown.error().message;
  EXPECT_NE(unknown.error().message.find("test-tenant-recorder"), std::string::npos) << unknown.error().message;
  const Status unknown_preemption = apply_flag(*find_setting_by_flag("preemption"), "nope", s);
  ASSERT_FALSE(unknown_preemption);
  EXPECT_NE(unknown_preemption.error().message.find("recompute, swap, cost"), std::string::npos);
  // In the config file too.
  ServeSettings f;
  ASSERT_TRUE(parse_serve_config("[engine]\nadmission = \"test-tenant-recorder\"\npolicy_timeout_seconds = 0.25\n",
                                 "test.toml", f));
  EXPECT_EQ(f.engine.admission_policy, "test-tenant-recorder");
  EXPECT_DOUBLE_EQ(f.engine.policy_timeout_seconds, 0.25);
  EXPECT_FALSE(apply_flag(*find_setting_by_flag("policy-timeout"), "0", s));
}

}  // namespace
}  // namespace conveyor::http::testing
