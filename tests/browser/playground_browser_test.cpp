// The playground (GET /, http/playground/) in a real browser: `conveyor
// serve` with an API key on a free port, headless Chromium driven over the
// DevTools protocol (cdp_pipe.hpp). The test acts as a user would, through
// the page's own controls: gives a wrong key then the right one, sends a
// message and sees the reply stream into the DOM, sends a long one and
// presses Stop mid-stream, and sees the engine figures from /metrics. It
// fails on a script error or a Content-Security-Policy violation, and saves
// a screenshot (path printed; under the build folder's Testing/browser/).
//
// The model (models/playground-slow.toml) has random weights and the byte
// tokenizer: its text is noise, but it streams a long request for tens of
// seconds, so Stop lands mid-stream even on a loaded machine.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <thread>

#include "http/ws_subprotocol.hpp"
#include "tests/browser/cdp_pipe.hpp"
#include "tests/http/test_client.hpp"
#include "tests/integration/process.hpp"

namespace conveyor::browser_testing {
namespace {

namespace json = boost::json;
using conveyor::testing::ServeProcess;
using std::chrono::seconds;

const std::string kConveyor = CONVEYOR_BINARY;
const std::string kWorkDir = BROWSER_WORK_DIR;
const std::string kArtifactDir = BROWSER_ARTIFACT_DIR;
constexpr const char* kKey = "sk>>>???";  // base64 would need '+' and '/'
// Every wait is long: a loaded 2-core machine runs the server, the browser
// and the test at once.
constexpr seconds kWait{90};

// One page of the browser, attached with a flat session.
class Page {
 public:
  explicit Page(HeadlessChromium& browser) : browser_(browser) {}

  bool open(const std::string& url, std::string& error) {
    auto target = browser_.call("Target.createTarget", {{"url", "about:blank"}});
    if (!target.ok) return error = target.error, false;
    auto attached = browser_.call("Target.attachToTarget",
                                  {{"targetId", target.result["targetId"]}, {"flatten", true}});
    if (!attached.ok) return error = attached.error, false;
    session_ = json::value_to<std::string>(attached.result["sessionId"]);
    for (const char* domain : {"Runtime.enable", "Log.enable", "Page.enable"}) {
      auto r = browser_.call(domain, {}, session_);
      if (!r.ok) return error = r.error, false;
    }
    auto metrics = browser_.call("Emulation.setDeviceMetricsOverride",
                                 {{"width", 1280}, {"height", 900}, {"deviceScaleFactor", 1}, {"mobile", false}},
                                 session_);
    if (!metrics.ok) return error = metrics.error, false;
    auto nav = browser_.call("Page.navigate", {{"url", url}}, session_);
    if (!nav.ok) return error = nav.error, false;
    if (nav.result.contains("errorText")) return error = json::serialize(nav.result["errorText"]), false;
    return true;
  }

  // The value of a JavaScript expression; a thrown exception fails the test.
  json::value eval(const std::string& expression) {
    auto r = browser_.call("Runtime.evaluate", {{"expression", expression}, {"returnByValue", true}}, session_);
    if (!r.ok) {
      ADD_FAILURE() << "evaluate " << expression << ": " << r.error;
      return nullptr;
    }
    if (r.result.contains("exceptionDetails")) {
      ADD_FAILURE() << "evaluate " << expression << " threw: " << json::serialize(r.result["exceptionDetails"]);
      return nullptr;
    }
    const json::object& result = r.result["result"].as_object();
    return result.contains("value") ? result.at("value") : json::value(nullptr);
  }

  std::string text(const std::string& expression) {
    const json::value v = eval(expression);
    return v.is_string() ? std::string(v.as_string()) : json::serialize(v);
  }

  // Polls `condition` (a JavaScript expression) until it is true; while it
  // throws (the page is still loading), it is not.
  bool wait_for(const std::string& condition, seconds timeout = kWait) {
    const auto deadline = std::chrono::steady_clock::now() + timeout;
    while (std::chrono::steady_clock::now() < deadline) {
      const json::value v = eval("(() => { try { return Boolean(" + condition + "); } catch (e) { return false; } })()");
      if (v.is_bool() && v.as_bool()) return true;
      if (::testing::Test::HasFailure()) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return false;
  }

  // A PNG of the page at `path`; false (and why) when it could not.
  bool screenshot(const std::string& path, std::string& error) {
    auto shot = browser_.call("Page.captureScreenshot", {{"format", "png"}}, session_);
    if (!shot.ok) return error = shot.error, false;
    std::string data(json::value_to<std::string>(shot.result["data"]));
    for (char& c : data) c = c == '+' ? '-' : c == '/' ? '_' : c;  // base64 to base64url
    const auto png = conveyor::http::base64url_decode(data);
    if (!png) return error = "the screenshot is not base64", false;
    std::filesystem::create_directories(std::filesystem::path(path).parent_path());
    std::ofstream(path, std::ios::binary) << *png;
    return true;
  }

 private:
  HeadlessChromium& browser_;
  std::string session_;
};

// A JavaScript string literal of `text` (JSON's quoting is JavaScript's).
std::string js_string(const std::string& text) { return json::serialize(json::value(text)); }

// The DOM's state, for failure messages.
std::string page_state(Page& page) {
  return page.text(
      "JSON.stringify({messages: [...document.querySelectorAll('#messages li')].map(li => "
      "[li.className, li.dataset.state, li.querySelector('.text').textContent.length, "
      "li.querySelector('.note').textContent]), error: document.getElementById('error').textContent, "
      "keyError: document.getElementById('key-error').textContent, "
      "connection: document.getElementById('connection').textContent})");
}

// Types into the composer and presses Send, as a user does.
void send_message(Page& page, const std::string& text, int max_tokens, bool ignore_eos) {
  page.eval("(() => { const $ = (id) => document.getElementById(id);"
            "$('max_tokens').value = '" + std::to_string(max_tokens) + "';"
            "$('ignore_eos').checked = " + (ignore_eos ? "true" : "false") + ";"
            "$('seed').value = '7';"
            "$('prompt').value = " + js_string(text) + ";"
            "$('send').click(); return true; })()");
}

// ServeProcess::wait_ready asks /v1/models, which may need the key: /health does not.
bool wait_healthy(const ServeProcess& server) {
  for (const auto deadline = std::chrono::steady_clock::now() + seconds(120);
       std::chrono::steady_clock::now() < deadline; std::this_thread::sleep_for(std::chrono::milliseconds(200)))
    if (conveyor::http::testing::http_request(server.port(), "GET", "/health").status == 200) return true;
  return false;
}

std::string chromium_or_skip_reason(std::string& reason) {
  const std::string chromium = HeadlessChromium::find_binary();
  if (chromium.empty())
    reason = "chromium is not installed (apt-get install chromium, which tools/bootstrap.sh does; "
             "or set CHROMIUM to a Chrome binary): the playground is not tested in a browser";
  return chromium;
}

const std::string kAssistant = "document.querySelectorAll('#messages li.assistant')";

TEST(PlaygroundBrowser, ChatStreamsStopsAndShowsMetrics) {
  std::string skip;
  const std::string chromium = chromium_or_skip_reason(skip);
  if (chromium.empty()) GTEST_SKIP() << skip;
  std::error_code ec;
  std::filesystem::create_directories(kWorkDir, ec);
  std::filesystem::create_directories(kArtifactDir, ec);
  const std::string profile = kWorkDir + "/chromium-profile";
  std::filesystem::remove_all(profile, ec);

  ServeProcess server(kConveyor,
                      {"--model", "dummy:playground-slow", "--kv-cache-tokens", "16384", "--threads", "1",
                       "--api-key", kKey},
                      kWorkDir + "/serve.log",
                      {"CONVEYOR_CONFIG_DIR=" BROWSER_MODELS_DIR, "OMP_WAIT_POLICY=passive"});
  ASSERT_TRUE(wait_healthy(server)) << "conveyor serve did not answer /health:\n" << server.log_tail();
  std::string error;

  HeadlessChromium browser(chromium, profile, kWorkDir + "/chromium.log");
  auto version = browser.call("Browser.getVersion");
  ASSERT_TRUE(version.ok) << "chromium did not answer: " << version.error << " (its log: " << kWorkDir
                          << "/chromium.log)";
  std::cout << "browser: " << json::value_to<std::string>(version.result["product"]) << "\n";

  Page page(browser);
  ASSERT_TRUE(page.open(server.url() + "/", error)) << error;
  const std::string shot_path = kArtifactDir + "/playground.png";
  auto fail = [&](const std::string& what) {
    std::string shot_error;
    const std::string path = kArtifactDir + "/playground-failure.png";
    page.screenshot(path, shot_error);
    return what + "\nDOM: " + page_state(page) + "\nscreenshot: " + path + "\nserver log: " + server.log_tail(1500);
  };

  // The key: asked for, a wrong one refused, the right one taken.
  ASSERT_TRUE(page.wait_for("!document.getElementById('key-form').hidden")) << fail("the page did not ask for the key");
  page.eval("(() => { document.getElementById('key').value = 'wrong';"
            "document.getElementById('key-form').requestSubmit(); return true; })()");
  ASSERT_TRUE(page.wait_for("document.getElementById('key-error').textContent.includes('did not accept')"))
      << fail("a wrong key was not refused");
  page.eval("(() => { document.getElementById('key').value = " + js_string(kKey) +
            "; document.getElementById('key-form').requestSubmit(); return true; })()");
  ASSERT_TRUE(page.wait_for("document.getElementById('key-form').hidden && !document.getElementById('send').disabled"))
      << fail("the right key was not taken");
  EXPECT_EQ(page.text("document.getElementById('model').textContent"), "dummy:playground-slow");

  // A short reply streams in and ends.
  send_message(page, "Hello there", 24, false);
  ASSERT_TRUE(page.wait_for(kAssistant + ".length === 1 && " + kAssistant + "[0].dataset.state !== 'streaming'"))
      << fail("the first reply did not end");
  EXPECT_EQ(page.text(kAssistant + "[0].dataset.state"), "done") << fail("the first reply");
  EXPECT_GT(page.eval(kAssistant + "[0].querySelector('.text').textContent.length").to_number<int64_t>(), 0);
  EXPECT_EQ(page.text("document.getElementById('connection').textContent"), "connected");

  // A long one: text appears while it streams, then Stop cancels it.
  send_message(page, "Tell me a very long story", 4000, true);
  const std::string second = kAssistant + "[1]";
  ASSERT_TRUE(page.wait_for(kAssistant + ".length === 2 && " + second + ".dataset.state === 'streaming' && " +
                            second + ".querySelector('.text').textContent.length >= 20"))
      << fail("no streamed text appeared for the second message");
  const int64_t seen_while_streaming =
      page.eval(second + ".querySelector('.text').textContent.length").to_number<int64_t>();
  std::cout << "streaming: " << seen_while_streaming << " characters in the DOM before Stop\n";
  EXPECT_FALSE(page.eval("document.getElementById('stop').disabled").as_bool());
  page.eval("(() => { document.getElementById('stop').click(); return true; })()");
  ASSERT_TRUE(page.wait_for(second + ".dataset.state !== 'streaming'")) << fail("Stop did not end the reply");
  EXPECT_EQ(page.text(second + ".dataset.state"), "cancelled") << fail("the stopped reply");
  EXPECT_TRUE(page.text(second + ".querySelector('.note').textContent").starts_with("stopped"));
  EXPECT_GE(page.eval(second + ".querySelector('.text').textContent.length").to_number<int64_t>(),
            seen_while_streaming);
  EXPECT_FALSE(page.eval("document.getElementById('send').disabled").as_bool());

  // The engine's figures, polled from /metrics, count what was generated.
  ASSERT_TRUE(page.wait_for("Number(document.getElementById('m-generated').textContent) > 0"))
      << fail("the engine figures did not show the generated tokens");
  ASSERT_TRUE(page.wait_for("document.getElementById('m-running').textContent === '0'"))
      << fail("the stopped request still runs in the engine");
  EXPECT_TRUE(page.text("document.getElementById('m-kv').textContent").ends_with("%"));

  ASSERT_TRUE(page.screenshot(shot_path, error)) << error;
  std::cout << "screenshot: " << shot_path << "\n";
  RecordProperty("screenshot", shot_path);

  // No script error, nothing the page needs was blocked by its CSP, and
  // nothing it asked for was missing (its icon included; the 401s are the
  // page's own probe of whether the server wants a key).
  for (const json::object& event : browser.events()) {
    const std::string method(event.at("method").as_string());
    const std::string text = json::serialize(event.at("params"));
    EXPECT_NE(method, "Runtime.exceptionThrown") << text;
    if (method == "Log.entryAdded" || method == "Runtime.consoleAPICalled") {
      EXPECT_EQ(text.find("Content Security Policy"), std::string::npos) << text;
      EXPECT_EQ(text.find("status of 404"), std::string::npos) << text;
    }
  }
}

// A model without a tokenizer cannot chat: the server refuses the message,
// and the page shows its error and keeps the refused turn out of the
// conversation.
TEST(PlaygroundBrowser, ShowsTheServersErrorForAModelWithoutATokenizer) {
  std::string skip;
  const std::string chromium = chromium_or_skip_reason(skip);
  if (chromium.empty()) GTEST_SKIP() << skip;
  std::error_code ec;
  std::filesystem::create_directories(kWorkDir, ec);
  const std::string profile = kWorkDir + "/chromium-profile-no-tokenizer";
  std::filesystem::remove_all(profile, ec);
  ServeProcess server(kConveyor, {"--model", "dummy:playground-no-tokenizer", "--threads", "1"},
                      kWorkDir + "/serve-no-tokenizer.log",
                      {"CONVEYOR_CONFIG_DIR=" BROWSER_MODELS_DIR, "OMP_WAIT_POLICY=passive"});
  ASSERT_TRUE(wait_healthy(server)) << "conveyor serve did not answer /health:\n" << server.log_tail();
  HeadlessChromium browser(chromium, profile, kWorkDir + "/chromium-no-tokenizer.log");
  Page page(browser);
  std::string error;
  ASSERT_TRUE(page.open(server.url() + "/", error)) << error;
  ASSERT_TRUE(page.wait_for("!document.getElementById('send').disabled")) << page_state(page);
  EXPECT_TRUE(page.eval("document.getElementById('key-form').hidden").as_bool());  // no key asked
  send_message(page, "Hello", 8, false);
  ASSERT_TRUE(page.wait_for(kAssistant + ".length === 1 && " + kAssistant + "[0].dataset.state !== 'streaming'"))
      << page_state(page);
  EXPECT_EQ(page.text(kAssistant + "[0].dataset.state"), "error");
  EXPECT_NE(page.text(kAssistant + "[0].querySelector('.note').textContent").find("no tokenizer"), std::string::npos)
      << page_state(page);
  EXPECT_EQ(page.text("document.querySelector('#messages li.user .note').textContent"), "not in the conversation");
  EXPECT_FALSE(page.eval("document.getElementById('send').disabled").as_bool());
}

}  // namespace
}  // namespace conveyor::browser_testing
