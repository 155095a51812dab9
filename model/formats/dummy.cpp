#include "model/formats/dummy.hpp"

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <toml++/toml.h>

#include "model/formats/config_check.hpp"
#include "model/formats/llama2c.hpp"

#ifndef CONVEYOR_SOURCE_DIR
#define CONVEYOR_SOURCE_DIR "."
#endif
#ifndef CONVEYOR_DATA_DIR
#define CONVEYOR_DATA_DIR "/usr/local/share/conveyor"
#endif

namespace conveyor {

namespace {

constexpr int32_t kByteBos = 256;
constexpr int32_t kByteEos = 257;
constexpr int32_t kByteVocab = 258;
constexpr uint64_t kEmbeddedSeed = 0x636f6e7665796f72ULL;  // "conveyor"

Error config_error(const std::string& source, const std::string& problem) {
  return make_error(Errc::bad_format, source + ": " + problem);
}

bool is_plain_name(std::string_view name) {
  if (name.empty() || name.front() == '.' || name.size() > 200) return false;
  for (char ch : name) {
    const bool ok = (ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') ||
                    (ch >= '0' && ch <= '9') || ch == '-' || ch == '_' || ch == '.';
    if (!ok) return false;
  }
  return true;
}

// Reads integer `key` into `out`; absent keys keep `out` unless required.
Status read_int(const toml::table& t, const char* key, int32_t& out, bool required,
                const std::string& source) {
  const toml::node* node = t.get(key);
  if (node == nullptr) {
    if (required) return config_error(source, "missing required field '" + std::string(key) + "'");
    return Status::ok();
  }
  const auto v = node->value_exact<int64_t>();
  if (!v) return config_error(source, "field '" + std::string(key) + "' must be an integer");
  if (*v < INT32_MIN || *v > INT32_MAX)
    return config_error(source, "field '" + std::string(key) + "' is out of range");
  out = int32_t(*v);
  return Status::ok();
}

Status read_float(const toml::table& t, const char* key, float& out, const std::string& source) {
  const toml::node* node = t.get(key);
  if (node == nullptr) return Status::ok();
  if (!node->is_number())
    return config_error(source, "field '" + std::string(key) + "' must be a number");
  out = float(node->value<double>().value_or(0.0));
  return Status::ok();
}

}  // namespace

// UTF-8 of GPT-2's bytes_to_unicode stand-in for byte b: printable Latin-1
// bytes stand for themselves, the other 68 take code points 256, 257, ...
std::string gpt2_byte_piece(int b) {
  int extra = 0;
  auto printable = [](int x) { return (x >= 33 && x <= 126) || (x >= 161 && x <= 172) || x >= 174; };
  for (int x = 0; x < b; ++x) extra += printable(x) ? 0 : 1;
  const uint32_t cp = printable(b) ? uint32_t(b) : uint32_t(256 + extra);
  std::string out;
  if (cp < 0x80) {
    out.push_back(char(cp));
  } else {  // all stand-ins are below U+0800: two bytes
    out.push_back(char(0xC0 | (cp >> 6)));
    out.push_back(char(0x80 | (cp & 0x3F)));
  }
  return out;
}

Vocabulary byte_vocabulary(int32_t vocab_size) {
  Vocabulary v;
  const size_t n = size_t(std::max(vocab_size, kByteVocab));
  v.pieces.reserve(n);
  v.types.reserve(n);
  for (int b = 0; b < 256; ++b) {
    v.pieces.push_back(gpt2_byte_piece(b));
    v.types.push_back(TokenType::normal);
  }
  v.pieces.push_back("<s>");
  v.pieces.push_back("</s>");
  v.types.push_back(TokenType::control);
  v.types.push_back(TokenType::control);
  for (size_t i = v.pieces.size(); i < n; ++i) {
    v.pieces.push_back("<extra_" + std::to_string(i) + ">");
    v.types.push_back(TokenType::unused);
  }
  v.bos_id = kByteBos;
  v.eos_id = kByteEos;
  v.add_bos = true;
  v.add_space_prefix = false;
  return v;
}

Expected<DummyConfig> parse_dummy_config(std::string_view toml_text, const std::string& source,
                                         const std::string& default_name) {
  toml::table t;
  try {
    t = toml::parse(toml_text, source);
  } catch (const toml::parse_error& e) {
    std::ostringstream msg;
    msg << "invalid TOML: " << e.description() << " (line " << e.source().begin.line << ")";
    return config_error(source, msg.str());
  }
  static const char* known[] = {"name",       "dim",        "hidden_dim",      "n_layers",
                                "n_heads",    "n_kv_heads", "vocab_size",      "context_length",
                                "rope_theta", "rms_eps",    "tied_embeddings", "tokenizer"};
  for (const auto& [key, node] : t) {
    bool ok = false;
    for (const char* k : known) ok = ok || key.str() == k;
    if (!ok) return config_error(source, "unknown field '" + std::string(key.str()) + "'");
  }
  DummyConfig out;
  ModelConfig& c = out.model;
  c.name = default_name;
  if (const toml::node* n = t.get("name")) {
    const auto s = n->value_exact<std::string>();
    if (!s) return config_error(source, "field 'name' must be a string");
    c.name = *s;
  }
  for (auto [key, field] : {std::pair{"dim", &c.dim}, std::pair{"hidden_dim", &c.hidden_dim},
                            std::pair{"n_layers", &c.n_layers}, std::pair{"n_heads", &c.n_heads},
                            std::pair{"vocab_size", &c.vocab_size},
                            std::pair{"context_length", &c.context_length}})
    if (Status s = read_int(t, key, *field, true, source); !s) return s.error();
  c.n_kv_heads = c.n_heads;
  if (Status s = read_int(t, "n_kv_heads", c.n_kv_heads, false, source); !s) return s.error();
  if (Status s = read_float(t, "rope_theta", c.rope_theta, source); !s) return s.error();
  if (Status s = read_float(t, "rms_eps", c.rms_eps, source); !s) return s.error();
  if (const toml::node* n = t.get("tied_embeddings")) {
    const auto b = n->value_exact<bool>();
    if (!b) return config_error(source, "field 'tied_embeddings' must be true or false");
    c.tied_embeddings = *b;
  }
  if (const toml::node* n = t.get("tokenizer")) {
    const auto s = n->value_exact<std::string>();
    if (!s || (*s != "bytes" && *s != "none"))
      return config_error(source, "field 'tokenizer' must be \"bytes\" or \"none\"");
    out.tokenizer = *s == "bytes" ? DummyTokenizer::bytes : DummyTokenizer::none;
  }
  c.rope_layout = RopeLayout::adjacent_pairs;
  if (Status s = check_config(c, source); !s) return s.error();
  if (out.tokenizer == DummyTokenizer::bytes && c.vocab_size < kByteVocab)
    return config_error(source, "tokenizer \"bytes\" needs vocab_size >= 258, got " +
                                    std::to_string(c.vocab_size));
  return out;
}

std::vector<std::string> dummy_config_dirs(const LoadOptions& options) {
  std::vector<std::string> dirs = options.config_dirs;
  if (const char* env = std::getenv("CONVEYOR_CONFIG_DIR"); env != nullptr && *env != '\0')
    dirs.emplace_back(env);
  dirs.emplace_back(std::string(CONVEYOR_SOURCE_DIR) + "/configs/models");
  // Installed (`cmake --install`): beside the program (PREFIX/bin/conveyor
  // finds PREFIX/share, wherever PREFIX was moved), then the configured prefix.
  std::error_code ec;
  const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
  if (!ec) dirs.emplace_back((exe.parent_path().parent_path() / "share/conveyor/configs/models").string());
  dirs.emplace_back(std::string(CONVEYOR_DATA_DIR) + "/configs/models");
  return dirs;
}

Expected<LoadedModel> load_dummy(std::string_view name, const LoadOptions& options) {
  const std::string spec = "dummy:" + std::string(name);
  if (!is_plain_name(name))
    return make_error(Errc::invalid_argument,
                      spec + ": NAME must be a plain name (letters, digits, '-', '_', '.'), "
                             "naming configs/models/NAME.toml");
  const std::vector<std::string> dirs = dummy_config_dirs(options);
  std::string path;
  for (const std::string& dir : dirs) {
    const std::string candidate = dir + "/" + std::string(name) + ".toml";
    std::error_code ec;
    if (std::filesystem::is_regular_file(candidate, ec)) {
      path = candidate;
      break;
    }
  }
  if (path.empty()) {
    std::string searched;
    for (const std::string& dir : dirs) searched += (searched.empty() ? "" : ", ") + dir;
    return make_error(Errc::invalid_argument,
                      spec + ": no " + std::string(name) + ".toml in " + searched);
  }
  std::ifstream in(path, std::ios::binary);
  std::stringstream text;
  text << in.rdbuf();
  if (!in) return make_error(Errc::io_error, path + ": cannot read");
  auto config = parse_dummy_config(text.str(), path, std::string(name));
  if (!config) return config.error();

  LoadedModel m;
  m.config = config->model;
  m.weights = make_random_weights(m.config, options.seed);
  m.source = spec + " (" + path + ", seed " + std::to_string(options.seed) + ")";
  if (!options.tokenizer_path.empty()) {
    if (Status s = attach_llama2c_tokenizer(m, options.tokenizer_path); !s) return s.error();
    m.eos_ids = {2};
  } else if (config->tokenizer == DummyTokenizer::bytes) {
    m.tokenizer = std::shared_ptr<const Tokenizer>(make_byte_tokenizer());
    m.vocabulary = byte_vocabulary(m.config.vocab_size);
    m.tokenizer_model = "gpt2";
    m.eos_ids = {kByteEos};
  }
  return m;
}

LoadedModel embedded_default_model() {
  LoadedModel m;
  ModelConfig& c = m.config;
  c.name = "conveyor-tiny";
  c.dim = 64;
  c.hidden_dim = 172;
  c.n_layers = 4;
  c.n_heads = 8;
  c.n_kv_heads = 4;
  c.vocab_size = kByteVocab;
  c.context_length = 512;
  c.rope_theta = 10000.0f;
  c.rms_eps = 1e-5f;
  c.rope_layout = RopeLayout::adjacent_pairs;
  c.tied_embeddings = true;
  m.weights = make_random_weights(c, kEmbeddedSeed);
  m.tokenizer = std::shared_ptr<const Tokenizer>(make_byte_tokenizer());
  m.vocabulary = byte_vocabulary(kByteVocab);
  m.tokenizer_model = "gpt2";
  m.eos_ids = {kByteEos};
  m.source = "embedded default conveyor-tiny";
  return m;
}

}  // namespace conveyor
