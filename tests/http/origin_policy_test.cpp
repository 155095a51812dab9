// What a web page may ask of the server (http/origin_policy.hpp).
#include "http/origin_policy.hpp"

#include <gtest/gtest.h>

namespace conveyor::http {
namespace {

TEST(OriginPolicy, OnlyTheServersOwnAndNamedOriginsPass) {
  const std::vector<std::string> none;
  EXPECT_TRUE(origin_allowed("", "127.0.0.1:8000", none));  // not a page: curl, SDKs
  EXPECT_TRUE(origin_allowed("http://127.0.0.1:8000", "127.0.0.1:8000", none));  // the playground
  EXPECT_TRUE(origin_allowed("HTTP://LocalHost:8000", "localhost:8000", none));
  EXPECT_FALSE(origin_allowed("http://127.0.0.1:9000", "127.0.0.1:8000", none));  // another port is another origin
  EXPECT_FALSE(origin_allowed("https://evil.example", "127.0.0.1:8000", none));
  EXPECT_FALSE(origin_allowed("null", "127.0.0.1:8000", none));  // a sandboxed frame or a file
  const auto named = *parse_allowed_origins(" https://App.example.com , http://localhost:3000/");
  EXPECT_EQ(named, (std::vector<std::string>{"https://app.example.com", "http://localhost:3000"}));
  EXPECT_TRUE(origin_allowed("https://app.example.com", "127.0.0.1:8000", named));
  EXPECT_TRUE(origin_allowed("http://localhost:3000", "127.0.0.1:8000", named));
  EXPECT_FALSE(origin_allowed("https://app.example.com:8443", "127.0.0.1:8000", named));
  const auto any = *parse_allowed_origins("*");
  EXPECT_TRUE(origin_allowed("https://evil.example", "127.0.0.1:8000", any));
  EXPECT_TRUE(origin_allowed("null", "127.0.0.1:8000", any));
}

TEST(OriginPolicy, RefusesWhatIsNotAnOrigin) {
  for (const char* bad : {"example.com", "https://example.com/app", "ftp://example.com", "https://", "http://a b"}) {
    auto r = parse_allowed_origins(bad);
    ASSERT_FALSE(r) << bad;
    EXPECT_NE(r.error().message.find("is not an origin"), std::string::npos) << r.error().message;
  }
  EXPECT_TRUE(parse_allowed_origins("")->empty());
}

TEST(OriginPolicy, CorsIsGrantedToNamedOriginsOnly) {
  const std::vector<std::string> named = {"https://app.example.com"};
  EXPECT_EQ(cors_allow_origin("https://App.Example.com", named), "https://App.Example.com");
  EXPECT_EQ(cors_allow_origin("https://evil.example", named), "");
  EXPECT_EQ(cors_allow_origin("", named), "");
  EXPECT_EQ(cors_allow_origin("http://127.0.0.1:8000", {}), "");  // the server's own page needs none
  const std::vector<std::string> any = {"*"};
  EXPECT_EQ(cors_allow_origin("https://evil.example", any), "*");
}

TEST(OriginPolicy, BodiesMustBeJson) {
  EXPECT_TRUE(json_body_accepted("", ""));  // curl, SDKs
  EXPECT_TRUE(json_body_accepted("application/json", ""));
  EXPECT_TRUE(json_body_accepted("Application/JSON; charset=utf-8", "https://app.example.com"));
  EXPECT_FALSE(json_body_accepted("text/plain;charset=UTF-8", ""));
  EXPECT_FALSE(json_body_accepted("application/x-www-form-urlencoded", ""));
  EXPECT_FALSE(json_body_accepted("multipart/form-data; boundary=x", ""));
  // A page's fetch() with a Blob body of no type needs no preflight.
  EXPECT_FALSE(json_body_accepted("", "https://evil.example"));
  EXPECT_FALSE(json_body_accepted(" ; charset=utf-8", "http://127.0.0.1:8000"));
}

}  // namespace
}  // namespace conveyor::http
