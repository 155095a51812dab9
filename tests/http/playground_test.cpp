// The browser playground as HTTP sees it (http/playground/): the page and
// its assets with their headers, ETag revalidation, no key needed for them;
// and the API key a browser's WebSocket carries as a subprotocol
// (http/ws_subprotocol.hpp). The page in a real browser: tests/browser/.
#include <gtest/gtest.h>

#include "http/playground/assets.hpp"
#include "http/playground/page_response.hpp"
#include "http/routes.hpp"
#include "http/ws_subprotocol.hpp"
#include "tests/http/test_server.hpp"
#include "tests/http/test_util.hpp"

namespace conveyor::http::testing {
namespace {

TEST(PlaygroundAssets, EveryFileIsEmbeddedWithItsType) {
  ASSERT_EQ(playground_assets().size(), 4u);
  const PlaygroundAsset* page = find_playground_asset("/");
  ASSERT_NE(page, nullptr);
  EXPECT_EQ(page->content_type, "text/html; charset=utf-8");
  EXPECT_TRUE(page->body.starts_with("<!doctype html>"));
  EXPECT_NE(page->body.find("<script src=\"/playground.js\" defer></script>"), std::string_view::npos);
  const PlaygroundAsset* js = find_playground_asset("/playground.js");
  ASSERT_NE(js, nullptr);
  EXPECT_EQ(js->content_type, "text/javascript; charset=utf-8");
  EXPECT_NE(js->body.find("conveyor.key."), std::string_view::npos);
  EXPECT_EQ(find_playground_asset("/playground.css")->content_type, "text/css; charset=utf-8");
  EXPECT_EQ(find_playground_asset("/favicon.svg")->content_type, "image/svg+xml; charset=utf-8");
  EXPECT_NE(page->body.find("<link rel=\"icon\" href=\"/favicon.svg\""), std::string_view::npos);
  EXPECT_EQ(find_playground_asset("/index.html"), nullptr);
  for (const PlaygroundAsset& a : playground_assets()) {
    EXPECT_EQ(a.etag.size(), 18u) << a.path;  // 16 hex digits, quoted
    std::string body(a.body);  // SVG's namespace is a name, not an address to fetch
    if (const size_t ns = body.find("xmlns=\"http://www.w3.org/2000/svg\""); ns != std::string::npos) body.erase(ns, 34);
    EXPECT_EQ(body.find("http://"), std::string::npos) << a.path << ": no outside assets";
    EXPECT_EQ(a.body.find("https://"), std::string_view::npos) << a.path << ": no outside assets";
  }
}

TEST(PlaygroundAssets, RoutesNeedNoKey) {
  for (const char* path : {"/", "/playground.js", "/playground.css?x", "/favicon.svg"}) {
    EXPECT_EQ(match_route("GET", path).route, Route::page) << path;
    EXPECT_FALSE(match_route("GET", path).needs_key) << path;
  }
  EXPECT_EQ(match_route("POST", "/").route, Route::wrong_method);
  EXPECT_EQ(match_route("GET", "/playground").route, Route::not_found);
}

TEST(PlaygroundAssets, EtagMatching) {
  EXPECT_TRUE(etag_matches("\"abc\"", "\"abc\""));
  EXPECT_TRUE(etag_matches("W/\"abc\"", "\"abc\""));
  EXPECT_TRUE(etag_matches("\"x\", \"abc\"", "\"abc\""));
  EXPECT_TRUE(etag_matches("*", "\"abc\""));
  EXPECT_FALSE(etag_matches("", "\"abc\""));
  EXPECT_FALSE(etag_matches("\"abd\"", "\"abc\""));
  EXPECT_FALSE(etag_matches("abc", "\"abc\""));
}

TEST(WsSubprotocol, CarriesAnyKeyInBase64url) {
  EXPECT_EQ(base64url_decode("c2VjcmV0"), "secret");
  EXPECT_EQ(base64url_decode("c2VjcmV0MQ"), "secret1");        // unpadded
  EXPECT_EQ(base64url_decode("c2VjcmV0MQ=="), "secret1");      // padded
  EXPECT_EQ(base64url_decode("-_8"), std::string("\xfb\xff", 2));
  EXPECT_FALSE(base64url_decode("c2Vj+mV0"));                  // '+' is base64, not base64url
  EXPECT_FALSE(base64url_decode("c"));                         // no whole byte
  EXPECT_EQ(ws_protocol_key("conveyor.v1, conveyor.key.c2VjcmV0"), "secret");
  EXPECT_EQ(ws_protocol_key("conveyor.key.c2VjcmV0,conveyor.v1"), "secret");
  EXPECT_FALSE(ws_protocol_key("conveyor.v1"));
  EXPECT_FALSE(ws_protocol_key("conveyor.v1, conveyor.key.***"));
  EXPECT_TRUE(ws_offers_protocol("chat, conveyor.v1", "conveyor.v1"));
  EXPECT_FALSE(ws_offers_protocol("conveyor.v10", "conveyor.v1"));
}

// "sk>>>???": base64url "c2s-Pj4_Pz8", which base64 writes "c2s+Pj4/Pz8=" (not a subprotocol name).
constexpr const char* kKey = "sk>>>???";
constexpr const char* kKeyProtocol = "conveyor.key.c2s-Pj4_Pz8";

ServerOptions with_key() {
  ServerOptions options;
  options.api_key = kKey;
  return options;
}

TEST(PlaygroundServer, ServesThePageWithoutAKey) {
  TestServer server(small_engine(), with_key());
  const Response page = http_request(server.port(), "GET", "/");
  ASSERT_EQ(page.status, 200) << page.body;
  EXPECT_EQ(page.headers.at("content-type"), "text/html; charset=utf-8");
  EXPECT_EQ(page.headers.at("content-security-policy"), kPlaygroundCsp);
  EXPECT_EQ(page.headers.at("cache-control"), "no-cache");
  EXPECT_EQ(page.headers.at("x-content-type-options"), "nosniff");
  EXPECT_EQ(page.headers.at("etag"), find_playground_asset("/")->etag);
  EXPECT_EQ(page.body, find_playground_asset("/")->body);
  const Response js = http_request(server.port(), "GET", "/playground.js?v=1");
  ASSERT_EQ(js.status, 200);
  EXPECT_EQ(js.headers.at("content-type"), "text/javascript; charset=utf-8");
  EXPECT_EQ(http_request(server.port(), "GET", "/playground.css").headers.at("content-type"),
            "text/css; charset=utf-8");
  // The API around it still needs the key.
  EXPECT_EQ(http_request(server.port(), "GET", "/v1/models").status, 401);
  EXPECT_EQ(http_request(server.port(), "POST", "/").status, 405);
  EXPECT_EQ(http_request(server.port(), "GET", "/playground.html").status, 404);
}

TEST(PlaygroundServer, RevalidatesByEtag) {
  TestServer server;
  const std::string etag(find_playground_asset("/playground.js")->etag);
  const Response same = http_request(server.port(), "GET", "/playground.js", "", {{"If-None-Match", etag}});
  EXPECT_EQ(same.status, 304);
  EXPECT_TRUE(same.body.empty());
  EXPECT_EQ(same.headers.at("etag"), etag);
  const Response other = http_request(server.port(), "GET", "/playground.js", "", {{"If-None-Match", "\"0\""}});
  EXPECT_EQ(other.status, 200);
  EXPECT_FALSE(other.body.empty());
}

TEST(PlaygroundServer, WebSocketTakesTheKeyAsASubprotocol) {
  TestServer server(small_engine(), with_key());
  WsClient keyed(server.port(), {{"Sec-WebSocket-Protocol", std::string("conveyor.v1, ") + kKeyProtocol}});
  ASSERT_TRUE(keyed.connected());
  keyed.send(R"({"id": 1, "prompt": "Hi", "max_tokens": 2})");
  bool final_seen = false;
  while (auto m = keyed.read()) {
    const auto event = parse_object(*m);
    ASSERT_NE(event.at("type"), "error") << *m;
    if (event.at("type") == "final") {
      final_seen = true;
      break;
    }
  }
  EXPECT_TRUE(final_seen);

  WsClient wrong(server.port(), {{"Sec-WebSocket-Protocol", "conveyor.v1, conveyor.key.d3Jvbmc"}});
  EXPECT_FALSE(wrong.connected());
  EXPECT_EQ(wrong.upgrade_status(), 401);
  WsClient none(server.port(), {{"Sec-WebSocket-Protocol", "conveyor.v1"}});
  EXPECT_EQ(none.upgrade_status(), 401);
}

// A browser fails a handshake that answers none of the subprotocols it
// offered; the answer must be conveyor.v1, never the one with the key.
TEST(PlaygroundServer, HandshakeAnswersConveyorV1) {
  TestServer server(small_engine(), with_key());
  RawClient raw(server.port());
  ASSERT_TRUE(raw.send(std::string("GET /v1/ws HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\n"
                                   "Connection: Upgrade\r\nSec-WebSocket-Version: 13\r\n"
                                   "Sec-WebSocket-Key: dGhlIHNhbXBsZSBub25jZQ==\r\n"
                                   "Sec-WebSocket-Protocol: conveyor.v1, ") +
                       kKeyProtocol + "\r\n\r\n"));
  ASSERT_TRUE(raw.read_until("\r\n\r\n"));
  const std::string head = raw.received();
  EXPECT_NE(head.find("HTTP/1.1 101"), std::string::npos) << head;
  EXPECT_NE(head.find("Sec-WebSocket-Protocol: conveyor.v1\r\n"), std::string::npos) << head;
  EXPECT_EQ(head.find("conveyor.key."), std::string::npos) << head;
}

}  // namespace
}  // namespace conveyor::http::testing
