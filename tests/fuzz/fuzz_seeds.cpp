// Writes a small seed corpus for the fuzz targets:
//   fuzz_seeds DIR  ->  DIR/gguf/*, DIR/llama2c/*, DIR/tokenizer/*, DIR/jinja/*,
//                       DIR/jinja_chat/*, DIR/ws/*, DIR/http/ (empty),
//                       DIR/json_schema/*, DIR/regex/*, DIR/gbnf/*
// Seeds are tiny but valid, so mutations start from deep inside the parsers.
// The Jinja seeds are the real templates and conversations of
// tests/template/data (CONVEYOR_TEMPLATE_DATA).
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <string_view>
#include <vector>

#include "model/formats/dummy.hpp"
#include "model/formats/gguf_writer.hpp"

namespace {

using namespace conveyor;

void save(const std::filesystem::path& path, const std::vector<uint8_t>& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
}

Vocabulary small_spm_vocabulary(int32_t n) {
  Vocabulary v;
  v.pieces = {"<unk>", "<s>", "</s>", "<0x0A>", "<0x20>", "<0xE2>", "\xE2\x96\x81"};
  const char* words[] = {"\xE2\x96\x81H", "e", "l", "o", "\xE2\x96\x81w", "r", "d", "ll", "llo",
                         "\xE2\x96\x81He", "\xE2\x96\x81Hello"};
  for (const char* w : words) v.pieces.push_back(w);
  while (int32_t(v.pieces.size()) < n) v.pieces.push_back("x" + std::to_string(v.pieces.size()));
  v.pieces.resize(size_t(n));
  for (size_t i = 0; i < v.pieces.size(); ++i) v.scores.push_back(-float(i));
  v.unk_id = 0;
  v.bos_id = 1;
  v.eos_id = 2;
  return v;
}

LoadedModel tiny_model(int32_t dim, int32_t vocab, bool tied) {
  LoadedModel m;
  ModelConfig& c = m.config;
  c.name = "seed";
  c.dim = dim;
  c.hidden_dim = 2 * dim;
  c.n_layers = 1;
  c.n_heads = 2;
  c.n_kv_heads = 1;
  c.vocab_size = vocab;
  c.context_length = 16;
  c.tied_embeddings = tied;
  m.weights = make_random_weights(c, 1);
  m.eos_ids = {2};
  return m;
}

std::string slurp(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// A string literal's bytes, NULs included.
template <size_t N>
std::string_view literal(const char (&s)[N]) {
  return {s, N - 1};
}

void save_text(const std::filesystem::path& path, std::string_view text) {
  std::ofstream(path, std::ios::binary).write(text.data(), std::streamsize(text.size()));
}

// jinja: each template's source. jinja_chat: each conversation for each
// template (byte 0, in templates.json's order) with varied option bits (byte 1).
void jinja_seeds(const std::filesystem::path& dir) {
  namespace fs = std::filesystem;
  const fs::path data = CONVEYOR_TEMPLATE_DATA;
  std::vector<fs::path> templates, conversations;
  for (const auto& e : fs::directory_iterator(data / "templates")) templates.push_back(e.path());
  for (const auto& e : fs::directory_iterator(data / "conversations")) conversations.push_back(e.path());
  for (const fs::path& t : templates) fs::copy_file(t, dir / "jinja" / t.filename(), fs::copy_options::overwrite_existing);
  const std::string manifest = slurp(data / "templates.json");
  size_t n_templates = 0;
  for (size_t pos = 0; (pos = manifest.find("\"file\"", pos)) != std::string::npos; ++pos) ++n_templates;
  for (size_t t = 0; t < n_templates; ++t) {
    for (size_t c = 0; c < conversations.size(); ++c) {
      const uint8_t flags = uint8_t((c & 1) | 4 | (c % 3 == 0 ? 8 | 16 : 0));
      std::string seed{char(t), char(flags)};
      seed += slurp(conversations[c]);
      save_text(dir / "jinja_chat" / (std::to_string(t) + "_" + conversations[c].stem().string()), seed);
    }
  }
  save_text(dir / "jinja_chat" / "raw", literal("\x01\x05system\x1e" "user <|im_start|>\x1e" "assistant"));
}

// ws: one connection's lines (tests/fuzz/ws_fuzz.cpp): messages, engine
// events, a cancel, a duplicate id, the drain.
void ws_seeds(const std::filesystem::path& dir) {
  save_text(dir / "ws" / "completion", "{\"id\": 1, \"prompt\": \"Once\", \"max_tokens\": 4}\nabcdefghi\x0c\n");
  save_text(dir / "ws" / "chat_n2_logprobs",
            std::string("{\"id\": \"c\", \"messages\": [{\"role\": \"user\", \"content\": \"hi\"}], \"n\": 2, "
            "\"logprobs\": true, \"top_logprobs\": 2, \"return_token_ids\": true}\n") +
            std::string(literal("\x00\x00" "a\x00\x01" "b\x00\x00\x0c\x00\x01\x0d\n")));
  save_text(dir / "ws" / "cancel_and_duplicate",
            "{\"id\": 5, \"prompt\": [1, 2, 3]}\n{\"id\": 5, \"prompt\": \"x\"}\n"
            "{\"id\": \"5\", \"prompt\": [\"a\", \"b\"], \"stop\": [\".\"]}\n"
            "{\"type\": \"cancel\", \"id\": 5}\n" + std::string(literal("\x01\x00\x0f\n")));
  save_text(dir / "ws" / "drain", "{\"id\": 1, \"prompt\": \"a\"}\ndrain\n{\"id\": 2, \"prompt\": \"b\"}\n"
                                  "{\"type\": \"cancel\", \"id\": 1}\n{\"id\": 3\n");
}

// json_schema, regex, gbnf: inputs of the constraint compilers, each
// using several of the features they support (grammar/*.hpp).
void grammar_seeds(const std::filesystem::path& dir) {
  const char* schemas[] = {
      R"({"type": "object", "properties": {"name": {"type": "string", "maxLength": 8}, "age": {"type": "integer",
         "minimum": 0, "maximum": 150}, "tags": {"type": "array", "items": {"enum": ["a", 1, null]}, "maxItems": 3}},
         "required": ["name"], "additionalProperties": false})",
      R"({"$defs": {"node": {"type": "object", "properties": {"v": {"type": "number", "exclusiveMinimum": 0},
         "next": {"anyOf": [{"$ref": "#/$defs/node"}, {"type": "null"}]}}}}, "$ref": "#/$defs/node"})",
      R"({"allOf": [{"properties": {"a": {"const": {"x": [1, 2.5]}}}}, {"required": ["a"],
         "additionalProperties": {"type": "boolean"}}], "oneOf": [{"type": "object"}, {"type": "array",
         "prefixItems": [{"format": "date-time"}, {"format": "uuid"}], "items": false}]})",
      R"({"type": ["string", "null"], "pattern": "^[a-z]+(\\d{2,3})?$"})",
      R"({"items": [{"format": "email"}, {"format": "ipv4"}], "additionalItems": {"type": "integer",
         "maximum": -5}, "minItems": 1})",
      R"({"properties": {"mail": {"format": "email", "pattern": "@x\\.org$", "maxLength": 20},
         "code": {"pattern": "^[A-Z]{2}\\d*$", "minLength": 3, "maxLength": 6}}})",
  };
  const char* regexes[] = {R"(^\d{3}-[A-Z]{2,}(?:x|y)*$)", R"([^\s"\\]+@(\w+\.)+[a-z]{2,6})",
                           R"(\u00e9\x41.?[\b-\u{1F600}]|(a|)*b+?)", R"(a{2}|b{1,}|c{0,3}?)"};
  const char* gbnfs[] = {
      "root ::= greeting (\" \" name)? \"!\"\ngreeting ::= \"hi\" | \"hello\"\nname ::= [A-Z] [a-z]{1,8}\n",
      ("# json\nroot ::= value\nvalue ::= \"{\" ws (pair (\",\" ws pair)*)? \"}\" | [0-9]+ | \"\\\"\" [^\"]* \"\\\"\"\n"
       "pair ::= [a-z]+ \":\" ws value\nws ::= [ \\t\\n]{0,4}\n"),
      "root ::= (\"a\"? x)* .\nx ::= [^\\x00-\\x1F\\u00e9] | \"\\U0001F600\"\n",
      "root ::= <[5]> name <[6]> \"{\" [0-9]* \"}\" (<[5]> name)? !<[7]>*\nname ::= [a-z_]{1,16}\n",
  };
  int n = 0;
  for (const char* s : schemas) save_text(dir / "json_schema" / std::to_string(n++), s);
  for (const char* s : regexes) save_text(dir / "regex" / std::to_string(n++), s);
  for (const char* s : gbnfs) save_text(dir / "gbnf" / std::to_string(n++), s);
}

std::vector<uint8_t> with_prefix(std::vector<uint8_t> prefix, const std::vector<uint8_t>& body) {
  prefix.insert(prefix.end(), body.begin(), body.end());
  return prefix;
}

std::vector<uint8_t> llama2c_checkpoint(const LoadedModel& m) {
  const ModelConfig& c = m.config;
  std::vector<uint8_t> out;
  auto put = [&](const void* p, size_t n) {
    const auto* b = static_cast<const uint8_t*>(p);
    out.insert(out.end(), b, b + n);
  };
  const int32_t header[7] = {c.dim,        c.hidden_dim,
                             c.n_layers,   c.n_heads,
                             c.n_kv_heads, c.tied_embeddings ? c.vocab_size : -c.vocab_size,
                             c.context_length};
  put(header, sizeof header);
  auto tensor = [&](const std::vector<float>& t) { put(t.data(), t.size() * 4); };
  const ModelWeights& w = m.weights;
  tensor(w.token_embedding.values);
  using Part = const std::vector<float>& (*)(const LayerWeights&);
  for (Part part : {+[](const LayerWeights& l) -> const std::vector<float>& { return l.attn_norm; },
                    +[](const LayerWeights& l) -> const std::vector<float>& { return l.wq.values; },
                    +[](const LayerWeights& l) -> const std::vector<float>& { return l.wk.values; },
                    +[](const LayerWeights& l) -> const std::vector<float>& { return l.wv.values; },
                    +[](const LayerWeights& l) -> const std::vector<float>& { return l.wo.values; },
                    +[](const LayerWeights& l) -> const std::vector<float>& { return l.ffn_norm; },
                    +[](const LayerWeights& l) -> const std::vector<float>& { return l.w1.values; },
                    +[](const LayerWeights& l) -> const std::vector<float>& { return l.w2.values; },
                    +[](const LayerWeights& l) -> const std::vector<float>& { return l.w3.values; }})
    for (const LayerWeights& l : w.layers) tensor(part(l));
  tensor(w.final_norm);
  tensor(std::vector<float>(size_t(c.context_length) * c.head_dim(), 0.0f));  // both RoPE tables
  if (!c.tied_embeddings) tensor(w.classifier.values);
  return out;
}

std::vector<uint8_t> llama2c_tokenizer(const Vocabulary& v) {
  std::vector<uint8_t> out(4, 0);
  out[0] = 8;
  for (size_t i = 0; i < v.pieces.size(); ++i) {
    std::string piece = v.pieces[i];
    if (i == 1) piece = "\n<s>\n";
    if (i == 2) piece = "\n</s>\n";
    const float score = v.scores[i];
    const int32_t len = int32_t(piece.size());
    const auto* s = reinterpret_cast<const uint8_t*>(&score);
    const auto* l = reinterpret_cast<const uint8_t*>(&len);
    out.insert(out.end(), s, s + 4);
    out.insert(out.end(), l, l + 4);
    out.insert(out.end(), piece.begin(), piece.end());
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: fuzz_seeds DIR\n");
    return 2;
  }
  const std::filesystem::path dir = argv[1];
  for (const char* sub : {"gguf", "llama2c", "tokenizer", "jinja", "jinja_chat", "ws", "http", "json_schema", "regex",
                          "gbnf"})
    std::filesystem::create_directories(dir / sub);

  LoadedModel spm = tiny_model(8, 24, false);
  spm.vocabulary = small_spm_vocabulary(24);
  spm.tokenizer_model = "llama";
  spm.chat_template = "{{ bos_token }}";
  LoadedModel bytes = tiny_model(8, 258, true);
  bytes.vocabulary = byte_vocabulary(258);
  bytes.tokenizer_model = "gpt2";
  bytes.eos_ids = {257};
  // The same byte vocabulary, split as Llama 3 and Qwen 2 split text.
  const auto bytes_split_as = [](const char* pre) {
    LoadedModel m = tiny_model(8, 258, true);
    m.vocabulary = byte_vocabulary(258);
    m.vocabulary->pre = pre;
    m.tokenizer_model = "gpt2";
    m.eos_ids = {257};
    return m;
  };
  LoadedModel llama3_bytes = bytes_split_as("llama-bpe");
  LoadedModel qwen_bytes = bytes_split_as("qwen2");
  LoadedModel q8 = tiny_model(32, 24, true);
  q8.vocabulary = spm.vocabulary;
  LoadedModel none = tiny_model(8, 16, true);

  struct Seed {
    const char* name;
    const LoadedModel* model;
    GgufFileType type;
  };
  for (const Seed& s : {Seed{"spm_f32.gguf", &spm, GgufFileType::all_f32},
                        Seed{"spm_f16.gguf", &spm, GgufFileType::f16},
                        Seed{"spm_bf16.gguf", &spm, GgufFileType::bf16},
                        Seed{"q8_0.gguf", &q8, GgufFileType::q8_0},
                        Seed{"q4_0.gguf", &q8, GgufFileType::q4_0},
                        Seed{"bytes_gpt2.gguf", &bytes, GgufFileType::f16},
                        Seed{"bytes_llama3.gguf", &llama3_bytes, GgufFileType::f16},
                        Seed{"bytes_qwen2.gguf", &qwen_bytes, GgufFileType::f16},
                        Seed{"no_vocab.gguf", &none, GgufFileType::all_f32}}) {
    GgufWriteOptions options;
    options.file_type = s.type;
    auto b = serialize_gguf(*s.model, options);
    if (!b) {
      std::fprintf(stderr, "%s: %s\n", s.name, b.error().message.c_str());
      return 1;
    }
    save(dir / "gguf" / s.name, *b);
    if (s.model->vocabulary) save(dir / "tokenizer" / (std::string(s.name) + ".tok"), with_prefix({1}, *b));
  }
  save(dir / "llama2c" / "unshared.bin", llama2c_checkpoint(spm));
  save(dir / "llama2c" / "shared.bin", llama2c_checkpoint(none));
  save(dir / "tokenizer" / "llama2c.tok",
       with_prefix({0, 24, 0}, llama2c_tokenizer(*spm.vocabulary)));
  jinja_seeds(dir);
  ws_seeds(dir);
  grammar_seeds(dir);
  std::printf("seeds written to %s\n", dir.c_str());
  return 0;
}
