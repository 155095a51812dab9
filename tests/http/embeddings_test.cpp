// POST /v1/embeddings end to end, on a server in front of the embedded
// default model: the response's shape and units, the four forms of `input`
// agreeing with each other, base64 against float, the --pooling setting,
// every refusal (400 naming the problem, 401, 404, 405, 429), and that an
// embedding does not disturb completions running beside it. That the
// vectors are the right ones is backends/cpu/embedding_test.cpp's
// comparison with llama.cpp.
#include <cmath>
#include <cstring>
#include <fstream>
#include <thread>

#include "http/embeddings.hpp"
#include "tests/http/test_server.hpp"
#include "tests/http/test_util.hpp"

namespace conveyor::http::testing {
namespace {

namespace json = boost::json;

using Vectors = std::vector<std::vector<float>>;

Response post(uint16_t port, const json::object& body, const Headers& headers = {}) {
  return http_request(port, "POST", "/v1/embeddings", body_of(body), headers);
}

// The vectors of a 200 response in index order, checking its shape.
Vectors vectors_of(const Response& r, size_t count) {
  EXPECT_EQ(r.status, 200) << r.body;
  json::object o = parse_object(r.body);
  EXPECT_EQ(o["object"], "list");
  Vectors out;
  const json::array& data = o["data"].as_array();
  EXPECT_EQ(data.size(), count) << r.body;
  for (size_t i = 0; i < data.size(); ++i) {
    const json::object& d = data[i].as_object();
    EXPECT_EQ(d.at("object"), "embedding");
    EXPECT_EQ(d.at("index").to_number<int64_t>(), int64_t(i));
    std::vector<float> v;
    for (const json::value& x : d.at("embedding").as_array()) v.push_back(float(x.to_number<double>()));
    out.push_back(std::move(v));
  }
  return out;
}

double norm(const std::vector<float>& v) {
  double s = 0;
  for (float x : v) s += double(x) * x;
  return std::sqrt(s);
}

double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  EXPECT_EQ(a.size(), b.size());
  double d = 0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) d = std::max(d, double(std::fabs(a[i] - b[i])));
  return d;
}

class Embeddings : public ::testing::Test {
 protected:
  static void SetUpTestSuite() { server_ = new TestServer(); }
  static void TearDownTestSuite() { delete server_; }
  static uint16_t port() { return server_->port(); }
  static TestServer* server_;
};
TestServer* Embeddings::server_ = nullptr;

TEST_F(Embeddings, OneTextGivesOneUnitVectorAndItsUsage) {
  const Response r = post(port(), {{"input", "The food was delicious"}, {"model", server_->model_name()}});
  const Vectors v = vectors_of(r, 1);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_GT(v[0].size(), 1u);
  EXPECT_NEAR(norm(v[0]), 1.0, 1e-5);
  json::object o = parse_object(r.body);
  EXPECT_EQ(o["model"], server_->model_name().c_str());
  const int64_t tokens = int64_t(server_->encode("The food was delicious").size());
  EXPECT_EQ(o["usage"].at("prompt_tokens").to_number<int64_t>(), tokens);
  EXPECT_EQ(o["usage"].at("total_tokens").to_number<int64_t>(), tokens);
  EXPECT_EQ(r.headers.at("content-type"), "application/json");
}

// A text, the same text in a list, its token ids (as the server tokenizes
// it, BOS included) and those ids in a list are one input four ways; a batch
// gives each input the vector it gets alone, in order.
TEST_F(Embeddings, TheFourFormsOfInputAgreeAndBatchesKeepOrder) {
  const std::vector<std::string> texts = {"alpha", "a longer input, of several words", "z"};
  const std::vector<int32_t> ids = server_->encode(texts[1]);
  const std::vector<float> text = vectors_of(post(port(), {{"input", texts[1]}}), 1).at(0);
  const std::vector<float> listed = vectors_of(post(port(), {{"input", json::array{json::string(texts[1])}}}), 1).at(0);
  const std::vector<float> as_ids = vectors_of(post(port(), {{"input", ids_json(ids)}}), 1).at(0);
  const std::vector<float> as_id_lists = vectors_of(post(port(), {{"input", json::array{ids_json(ids)}}}), 1).at(0);
  EXPECT_EQ(listed, text);
  EXPECT_EQ(as_ids, text);
  EXPECT_EQ(as_id_lists, text);

  json::array batch;
  for (const std::string& t : texts) batch.emplace_back(json::string(t));
  const Response r = post(port(), {{"input", batch}});
  const Vectors together = vectors_of(r, texts.size());
  ASSERT_EQ(together.size(), texts.size());
  int64_t tokens = 0;
  for (size_t i = 0; i < texts.size(); ++i) {
    tokens += int64_t(server_->encode(texts[i]).size());
    const std::vector<float> alone = vectors_of(post(port(), {{"input", texts[i]}}), 1).at(0);
    EXPECT_LT(max_abs_diff(together[i], alone), 1e-6) << i;
  }
  EXPECT_EQ(parse_object(r.body)["usage"].at("prompt_tokens").to_number<int64_t>(), tokens);
  EXPECT_GT(max_abs_diff(together[0], together[1]), 1e-3);  // different inputs, different vectors
}

TEST_F(Embeddings, Base64IsTheLittleEndianFloatsOfTheFloatVector) {
  const std::vector<float> floats = vectors_of(post(port(), {{"input", "bytes"}}), 1).at(0);
  const Response r = post(port(), {{"input", "bytes"}, {"encoding_format", "base64"}});
  ASSERT_EQ(r.status, 200) << r.body;
  json::object o = parse_object(r.body);
  const std::string b64(o["data"].as_array()[0].at("embedding").as_string());
  // Decode it here (the server only encodes).
  std::string bytes;
  uint32_t acc = 0;
  int bits = 0;
  for (char c : b64) {
    if (c == '=') break;
    const char* alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
    acc = acc << 6 | uint32_t(std::strchr(alphabet, c) - alphabet);
    bits += 6;
    if (bits >= 8) bytes += char((acc >> (bits -= 8)) & 0xff);
  }
  ASSERT_EQ(bytes.size(), floats.size() * 4);
  for (size_t i = 0; i < floats.size(); ++i) {
    uint32_t u = 0;
    for (int b = 0; b < 4; ++b) u |= uint32_t(uint8_t(bytes[4 * i + size_t(b)])) << (8 * b);
    float f;
    std::memcpy(&f, &u, 4);
    EXPECT_EQ(f, floats[i]) << i;
  }
  EXPECT_EQ(base64_encode("Man"), "TWFu");
  EXPECT_EQ(base64_encode("Ma"), "TWE=");
  EXPECT_EQ(base64_encode("M"), "TQ==");
  EXPECT_EQ(base64_encode(""), "");
}

// --pooling mean: a one-token input pools to the same vector either way (the
// mean of one state is that state); a longer one does not.
TEST_F(Embeddings, PoolingMeanDiffersFromLastExceptOnOneToken) {
  ServerOptions options;
  options.pooling = Pooling::mean;
  TestServer mean_server(small_engine(), options);
  const json::array one = {7};
  EXPECT_EQ(vectors_of(post(mean_server.port(), {{"input", one}}), 1).at(0),
            vectors_of(post(port(), {{"input", one}}), 1).at(0));
  const json::object longer = {{"input", "several tokens long"}};
  const std::vector<float> mean = vectors_of(post(mean_server.port(), longer), 1).at(0);
  EXPECT_NEAR(norm(mean), 1.0, 1e-5);
  EXPECT_GT(max_abs_diff(mean, vectors_of(post(port(), longer), 1).at(0)), 1e-3);
}

void expect_400(const Response& r, const std::string& param, const std::string& words) {
  ASSERT_EQ(r.status, 400) << r.body;
  json::object e = error_of(r);
  EXPECT_EQ(e["type"], "invalid_request_error");
  if (param.empty())
    EXPECT_TRUE(e["param"].is_null()) << r.body;
  else
    EXPECT_EQ(e["param"], param.c_str()) << r.body;
  EXPECT_NE(std::string(e["message"].as_string()).find(words), std::string::npos) << r.body;
}

TEST_F(Embeddings, BadRequestsAre400sNamingTheProblem) {
  const int32_t ctx = server_->context_length();
  expect_400(post(port(), {{"input", ""}}), "input", "'input' is an empty string");
  expect_400(post(port(), {{"input", json::array{}}}), "input", "'input' is an empty array");
  expect_400(post(port(), {{"input", json::array{"ok", ""}}}), "input", "input[1] is an empty string");
  expect_400(post(port(), {{"input", json::array{json::array{1, 2}, json::array{}}}}), "input",
             "input[1] is an empty list of token ids");
  expect_400(post(port(), {{"input", json::array{1, -2}}}), "input", "token ids in [0,");
  expect_400(post(port(), {{"input", json::array{1, 1000000}}}), "input", "token ids in [0,");
  expect_400(post(port(), {{"input", json::array{"text", json::array{1}}}}), "input", "all of one kind");
  expect_400(post(port(), {{"input", 5}}), "input", "must be a string, an array of strings");
  expect_400(post(port(), {{"model", server_->model_name()}}), "input", "'input' is required");
  json::array many;
  for (size_t i = 0; i <= kMaxEmbeddingInputs; ++i) many.emplace_back(json::string("a"));
  expect_400(post(port(), {{"input", many}}), "input", "at most 2048");
  // The whole context is allowed (nothing is generated after it); one more token is not.
  EXPECT_EQ(post(port(), {{"input", ids_json(std::vector<int32_t>(size_t(ctx), 65))}}).status, 200);
  const Response long_one = post(port(), {{"input", ids_json(std::vector<int32_t>(size_t(ctx) + 1, 65))}});
  expect_400(long_one, "input", "the model's context is");
  EXPECT_EQ(error_of(long_one)["code"], "context_length_exceeded");
  expect_400(post(port(), {{"input", "x"}, {"encoding_format", "hex"}}), "encoding_format", "\"float\" or \"base64\"");
  expect_400(post(port(), {{"input", "x"}, {"dimensions", 3}}), "dimensions", "cannot be shortened");
  expect_400(post(port(), {{"input", "x"}, {"temperature", 1}}), "temperature",
             "unrecognized request field 'temperature'");
  expect_400(post(port(), {{"input", "x"}, {"user", 5}}), "user", "'user' must be a string");
  expect_400(http_request(port(), "POST", "/v1/embeddings", "{\"input\": "), "", "not valid JSON");
  // What is accepted alongside: the model's own dim, a user, "float".
  const size_t dim = vectors_of(post(port(), {{"input", "x"}}), 1).at(0).size();
  EXPECT_EQ(post(port(), {{"input", "x"}, {"dimensions", int64_t(dim)}, {"user", "u-1"}, {"encoding_format", "float"}})
                .status,
            200);
}

TEST_F(Embeddings, WrongModelIs404AndGetIs405) {
  const Response r = post(port(), {{"input", "x"}, {"model", "not-this-one"}});
  ASSERT_EQ(r.status, 404) << r.body;
  EXPECT_EQ(error_of(r)["code"], "model_not_found");
  const Response get = http_request(port(), "GET", "/v1/embeddings");
  EXPECT_EQ(get.status, 405);
  EXPECT_EQ(get.headers.at("allow"), "POST");
}

// Completions streaming while embeddings are computed: each gets the answer
// it gets alone (the embedder shares the weights, not the scratch or the KV).
TEST_F(Embeddings, CompletionsBesideEmbeddingsAreUndisturbed) {
  const std::vector<int32_t> prompt = server_->encode("Once upon a time");
  const std::vector<int32_t> want = server_->engine_greedy(prompt, 40, true);
  const std::vector<float> alone = vectors_of(post(port(), {{"input", "beside"}}), 1).at(0);
  std::thread completions([&] {
    for (int i = 0; i < 3; ++i) {
      const Response r = http_request(port(), "POST", "/v1/completions",
                                      body_of({{"prompt", ids_json(prompt)}, {"max_tokens", 40}, {"temperature", 0},
                                               {"ignore_eos", true}, {"return_token_ids", true}}));
      ASSERT_EQ(r.status, 200) << r.body;
      EXPECT_EQ(ids_of(parse_object(r.body)["choices"].as_array()[0].at("token_ids")), want);
    }
  });
  for (int i = 0; i < 10; ++i) EXPECT_EQ(vectors_of(post(port(), {{"input", "beside"}}), 1).at(0), alone);
  completions.join();
}

Headers bearer(const std::string& key) { return {{"Authorization", "Bearer " + key}}; }

TEST(EmbeddingKeys, TheKeyAndItsLimitsApply) {
  const std::string path = ::testing::TempDir() + "embeddings_keys.toml";
  std::ofstream(path) << "[[key]]\nkey = \"sk-embed\"\nname = \"metered\"\ntokens_per_minute = 40\n";
  ServerOptions options;
  options.api_key_file = path;
  TestServer server(small_engine(), options);
  const json::object sixty = {{"input", ids_json(std::vector<int32_t>(60, 65))}};
  EXPECT_EQ(post(server.port(), sixty).status, 401);
  EXPECT_EQ(post(server.port(), sixty, bearer("sk-wrong")).status, 401);
  ASSERT_EQ(post(server.port(), sixty, bearer("sk-embed")).status, 200);
  // 60 input tokens overdrew 40 a minute: the next request waits.
  const Response r = post(server.port(), {{"input", "x"}}, bearer("sk-embed"));
  ASSERT_EQ(r.status, 429) << r.body;
  EXPECT_EQ(error_of(r)["code"], "tokens_per_minute_exceeded");
}

}  // namespace
}  // namespace conveyor::http::testing
