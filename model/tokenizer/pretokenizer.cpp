#include "model/tokenizer/pretokenizer.hpp"

#include <unicode/bytestream.h>
#include <unicode/normalizer2.h>
#include <unicode/regex.h>
#include <unicode/utf16.h>

#include <algorithm>
#include <optional>

#include "model/tokenizer/utf8.hpp"
#include "model/tokenizer/word_splitters.hpp"

namespace conveyor::tokenizer_detail {

// One expression of a sequence, written as in tokenizer.json with non-ASCII
// characters as \x{...} escapes (\s and \S become White_Space classes when
// compiled), and the hand-written splitter that does the same, if any.
struct Stage {
  Stage(const char* regex) : regex(regex) {}  // NOLINT: the table lists plain expressions
  Stage(const char* regex, WordSplitter builtin) : regex(regex), builtin(builtin) {}
  std::string regex;
  std::optional<WordSplitter> builtin;
};

// What a name stands for.
struct PreTokenizer::Rules {
  std::vector<std::string_view> names;
  std::vector<Stage> stages;
  bool ignore_merges = false;
  bool adds_bos = false;
  bool nfc = false;
};

// Each stage: a compiled expression, or null where a hand-written splitter runs.
struct PreTokenizer::Compiled {
  std::vector<std::unique_ptr<icu::RegexPattern>> patterns;
  std::vector<std::optional<WordSplitter>> builtins;
};

namespace {

// English contractions in either case: tokenizer.json says (?i:'s|'t|...);
// like llama.cpp and transformers.js, only ASCII case variants match.
#define CONTRACTIONS R"((?:'[sS]|'[tT]|'[rR][eE]|'[vV][eE]|'[mM]|'[lL][lL]|'[dD]))"

// GPT-2 (its ByteLevel pre-tokenizer with use_regex).
constexpr const char* kGpt2 =
    R"('s|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+)";
// Llama 3: numbers in groups of up to three digits, a letter run may take one
// leading non-letter, punctuation takes the line breaks after it.
constexpr const char* kLlama3 =
    CONTRACTIONS R"(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Qwen 2: Llama 3's with single digits.
constexpr const char* kQwen2 =
    CONTRACTIONS R"(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+)";
// Words of Mistral's Tekken and OpenAI's GPT-4o patterns: an optional leading
// non-letter, then upper-case letters before lower-case ones (marks count as both).
#define CASED_WORDS                                                            \
  R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]*[\p{Ll}\p{Lm}\p{Lo}\p{M}]+)"
#define UPPER_WORDS                                                            \
  R"([^\r\n\p{L}\p{N}]?[\p{Lu}\p{Lt}\p{Lm}\p{Lo}\p{M}]+[\p{Ll}\p{Lm}\p{Lo}\p{M}]*)"
// Words up to the punctuation that BLOOM-style tokenizers split at.
constexpr const char* kBloom =
    R"( ?[^\(\s\|\.\,\!\?\x{2026}\x{3002}\x{FF0C}\x{3001}\x{0964}\x{06D4}\x{060C}\)]+)";
// Cased letters of DeepSeek LLM's tokenizer (Unicode's Lu, Ll and Lt).
constexpr const char* kDeepseekLetters =
    R"(\s?[A-Za-z\x{B5}\x{C0}-\x{D6}\x{D8}-\x{F6}\x{F8}-\x{1BA}\x{1BC}-\x{1BF}\x{1C4}-\x{293})"
    R"(\x{295}-\x{2AF}\x{370}-\x{373}\x{376}\x{377}\x{37B}-\x{37D}\x{37F}\x{386}\x{388}-\x{38A})"
    R"(\x{38C}\x{38E}-\x{3A1}\x{3A3}-\x{3F5}\x{3F7}-\x{481}\x{48A}-\x{52F}\x{531}-\x{556})"
    R"(\x{10A0}-\x{10C5}\x{13A0}-\x{13F5}\x{13F8}-\x{13FD}\x{1C90}-\x{1CBA}\x{1CBD}-\x{1CBF})"
    R"(\x{1D00}-\x{1D2B}\x{1D6B}-\x{1D77}\x{1D79}-\x{1D9A}\x{1E00}-\x{1F15}\x{1F18}-\x{1F1D})"
    R"(\x{1F20}-\x{1F45}\x{1F48}-\x{1F4D}\x{1F50}-\x{1F57}\x{1F59}\x{1F5B}\x{1F5D})"
    R"(\x{1F5F}-\x{1F7D}\x{1F80}-\x{1FB4}\x{1FB6}-\x{1FBC}\x{1FBE}\x{1FC2}-\x{1FC4})"
    R"(\x{1FC6}-\x{1FCC}\x{1FD0}-\x{1FD3}\x{1FD6}-\x{1FDB}\x{1FE0}-\x{1FEC}\x{1FF2}-\x{1FF4})"
    R"(\x{1FF6}-\x{1FFC}\x{2102}\x{2107}\x{210A}-\x{2113}\x{2115}\x{2119}-\x{211D}\x{2124})"
    R"(\x{2126}\x{2128}\x{212A}-\x{212D}\x{212F}-\x{2134}\x{2139}\x{213C}-\x{213F})"
    R"(\x{2145}-\x{2149}\x{214E}\x{2183}\x{2184}\x{2C00}-\x{2C7B}\x{2C7E}-\x{2CE4})"
    R"(\x{2CEB}-\x{2CEE}\x{2CF2}\x{2CF3}\x{A640}-\x{A66D}\x{A680}-\x{A69B}\x{A722}-\x{A76F})"
    R"(\x{A771}-\x{A787}\x{A78B}-\x{A78E}\x{AB70}-\x{ABBF}\x{FB00}-\x{FB06}\x{FB13}-\x{FB17})"
    R"(\x{FF21}-\x{FF3A}\x{FF41}-\x{FF5A}\x{10400}-\x{1044F}\x{104B0}-\x{104D3})"
    R"(\x{104D8}-\x{104FB}\x{10C80}-\x{10CB2}\x{10CC0}-\x{10CF2}\x{118A0}-\x{118DF})"
    R"(\x{1E900}-\x{1E943}]+)";
constexpr const char* kCjkHangul = R"([\x{4E00}-\x{9FA5}\x{0800}-\x{4E00}\x{AC00}-\x{D7FF}]+)";

// The names and expressions of llama.cpp's llm_tokenizer_bpe (src/llama-vocab.cpp),
// written back to the tokenizer.json originals where llama.cpp had to rewrite
// them for std::regex. Only llama-bpe and qwen2 are compared with Hugging Face
// on a corpus (tests/model/tokenizer/hf_oracle); the others follow llama.cpp.
const std::vector<PreTokenizer::Rules>& rules_table() {
  static const Stage gpt2(kGpt2, WordSplitter::gpt2);
  static const Stage llama3(kLlama3, WordSplitter::llama3);
  static const Stage qwen2(kQwen2, WordSplitter::qwen2);
  static const std::vector<PreTokenizer::Rules> table = {
      {.names = {"gpt-2", "phi-2", "mpt", "olmo", "jais", "exaone4", "trillion",
                 "granite-docling"},
       .stages = {gpt2}},
      {.names = {"llama-bpe", "llama3", "llama-v3", "falcon3", "falcon-h1", "pixtral",
                 "midm-2.0", "lfm2"},
       .stages = {llama3},
       .ignore_merges = true,
       .adds_bos = true},
      {.names = {"dbrx", "smaug-bpe"}, .stages = {llama3}},
      {.names = {"qwen2"}, .stages = {qwen2}, .nfc = true},
      {.names = {"deepseek-r1-qwen", "megrez", "stablelm2", "grok-2"}, .stages = {qwen2}},
      {.names = {"starcoder", "refact", "command-r", "smollm", "codeshell", "exaone",
                 "minerva-7b"},
       .stages = {R"(\p{N})", gpt2}},
      {.names = {"falcon"},
       .stages = {R"([\p{P}\$\+\<\=\>\^\~\|\`]+)", gpt2, "[0-9][0-9][0-9]"}},
      // llama.cpp's choice for files that name no pre-tokenizer (conveyor
      // uses GPT-2's for those); here only when named "default".
      {.names = {"default"},
       .stages = {R"([\p{P}\$\+\<\=\>\^\~\|]+)", gpt2, R"(\p{N}+)", "[0-9][0-9][0-9]"}},
      {.names = {"deepseek-llm"},
       .stages = {R"([\r\n])", kDeepseekLetters,
                  R"(\s?[\!-\/\:-\~\x{FF01}-\x{FF0F}\x{FF1A}-\x{FF5E}\x{2018}-\x{201F}\x{3000}-\x{3002}]+)",
                  R"(\s+\z)",  // tokenizer.json's \s+$: newlines are pieces of their own by now
                  kCjkHangul, R"(\p{N}+)"}},
      {.names = {"deepseek-coder"},
       .stages = {R"([\r\n])", R"(\s?\p{L}+)", R"(\s?\p{P}+)", kCjkHangul, R"(\p{N})"}},
      {.names = {"deepseek-v3"},
       .stages = {R"(\p{N}{1,3})", R"([\x{4E00}-\x{9FA5}\x{3040}-\x{309F}\x{30A0}-\x{30FF}]+)",
                  R"([\!\"\#\$\%\&\'\(\)\*\+\,\-\.\/\:\;\<\=\>\?\@\[\\\]\^\_\`\{\|\}\~][A-Za-z]+)"
                  R"(|[^\r\n\p{L}\p{P}\p{S}]?[\p{L}\p{M}]+| ?[\p{P}\p{S}]+[\r\n]*|\s*[\r\n]+)"
                  R"(|\s+(?!\S)|\s+)"}},
      {.names = {"tekken"},
       .stages = {CASED_WORDS "|" UPPER_WORDS
                  R"(|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)"},
       .ignore_merges = true,
       .adds_bos = true},
      {.names = {"gpt-4o", "llama4"},
       .stages = {CASED_WORDS CONTRACTIONS "?|" UPPER_WORDS CONTRACTIONS
                  R"(?|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+[\r\n/]*|\s*[\r\n]+|\s+(?!\S)|\s+)"}},
      {.names = {"poro-chat", "bloom", "gpt3-finnish"}, .stages = {kBloom}},
      {.names = {"viking"}, .stages = {kBloom, R"(\p{N})"}},
      {.names = {"seed-coder"},
       .stages = {CONTRACTIONS
                  R"(|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}\r\n]+|\s*[\r\n]+|\s+(?!\S)|\s+)"}},
      {.names = {"bailingmoe", "bailingmoe2", "llada-moe"},
       .stages = {R"('(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\r\n\p{L}\p{N}]?+\p{L}+|\p{N})"
                  R"(| ?[^\s\p{L}\p{N}]++[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+)"}},
  };
  return table;
}

#undef CONTRACTIONS
#undef CASED_WORDS
#undef UPPER_WORDS

const PreTokenizer::Rules* find_rules(std::string_view name) {
  if (name.empty()) name = "gpt-2";
  for (const auto& rules : rules_table())
    if (std::find(rules.names.begin(), rules.names.end(), name) != rules.names.end()) return &rules;
  return nullptr;
}

// `pattern` with \s and \S spelled as Unicode White_Space classes.
std::string with_white_space(std::string_view pattern) {
  std::string out;
  for (size_t i = 0; i < pattern.size(); ++i) {
    if (pattern[i] == '\\' && i + 1 < pattern.size()) {
      const char next = pattern[++i];
      if (next == 's') {
        out += R"(\p{White_Space})";
      } else if (next == 'S') {
        out += R"(\P{White_Space})";
      } else {
        out += '\\';
        out += next;
      }
    } else {
      out += pattern[i];
    }
  }
  return out;
}

// Cuts every span of `spans` into the matches of `matcher` and the stretches
// between them, appending to `out`.
void split_spans(icu::RegexMatcher& matcher, const std::vector<Span16>& spans,
                 std::vector<Span16>& out) {
  UErrorCode status = U_ZERO_ERROR;
  for (const Span16& span : spans) {
    matcher.region(span.begin, span.end, status);
    int32_t done = span.begin;
    while (matcher.find()) {
      const int32_t start = matcher.start(status);
      const int32_t end = matcher.end(status);
      if (start == end) continue;
      if (start > done) out.push_back({done, start});
      out.push_back({start, end});
      done = end;
    }
    if (done < span.end) out.push_back({done, span.end});
  }
}

}  // namespace

PreTokenizer::PreTokenizer(const Rules& rules, std::unique_ptr<Compiled> compiled)
    : rules_(rules), compiled_(std::move(compiled)) {}

PreTokenizer::~PreTokenizer() = default;

Expected<std::shared_ptr<const PreTokenizer>> PreTokenizer::create(std::string_view name,
                                                                    bool builtin_splitters) {
  const Rules* rules = find_rules(name);
  if (rules == nullptr) {
    std::string known;
    for (std::string_view n : pretokenizer_names()) known += (known.empty() ? "" : ", ") + std::string(n);
    return make_error(Errc::unsupported, "unknown pre-tokenizer '" + std::string(name) +
                                             "' (tokenizer.ggml.pre); conveyor knows " + known);
  }
  auto compiled = std::make_unique<Compiled>();
  for (const Stage& stage : rules->stages) {
    if (builtin_splitters && stage.builtin) {
      compiled->patterns.emplace_back();
      compiled->builtins.push_back(stage.builtin);
      continue;
    }
    UErrorCode status = U_ZERO_ERROR;
    UParseError where{};
    const icu::UnicodeString source = icu::UnicodeString::fromUTF8(with_white_space(stage.regex));
    std::unique_ptr<icu::RegexPattern> re(icu::RegexPattern::compile(source, 0, where, status));
    if (U_FAILURE(status))
      return make_error(Errc::bad_format, "pre-tokenizer '" + std::string(name) +
                                              "': pattern does not compile at offset " +
                                              std::to_string(where.offset) + ": " +
                                              u_errorName(status));
    compiled->patterns.push_back(std::move(re));
    compiled->builtins.push_back(std::nullopt);
  }
  return std::shared_ptr<const PreTokenizer>(new PreTokenizer(*rules, std::move(compiled)));
}

bool PreTokenizer::ignore_merges() const { return rules_.ignore_merges; }

std::string_view PreTokenizer::normalize(std::string_view text, std::string& storage) const {
  if (!rules_.nfc) return text;
  UErrorCode status = U_ZERO_ERROR;
  const icu::Normalizer2* nfc = icu::Normalizer2::getNFCInstance(status);
  if (U_FAILURE(status)) return text;
  if (utf8::is_valid(text) &&
      nfc->isNormalizedUTF8(icu::StringPiece(text.data(), int32_t(text.size())), status) &&
      U_SUCCESS(status))
    return text;
  // Normalize the well-formed runs; copy ill-formed bytes as they are.
  storage.clear();
  icu::StringByteSink<std::string> sink(&storage);
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = pos;
    while (end < text.size()) {
      const size_t length = utf8::char_length(text, end);
      if (length == 0) break;
      end += length;
    }
    if (end > pos) {
      status = U_ZERO_ERROR;
      nfc->normalizeUTF8(0, icu::StringPiece(text.data() + pos, int32_t(end - pos)), sink,
                         nullptr, status);
      if (U_FAILURE(status)) storage.append(text.substr(pos, end - pos));
    }
    if (end < text.size()) storage.push_back(text[end++]);
    pos = end;
  }
  return storage;
}

void PreTokenizer::split(std::string_view text, std::vector<std::string_view>& pieces) const {
  const size_t n_stages = compiled_->patterns.size();
  std::vector<std::unique_ptr<icu::RegexMatcher>> matchers(n_stages);
  for (size_t i = 0; i < n_stages; ++i) {
    if (compiled_->patterns[i] == nullptr) continue;
    UErrorCode status = U_ZERO_ERROR;
    matchers[i].reset(compiled_->patterns[i]->matcher(status));
    if (U_FAILURE(status) || matchers[i] == nullptr) {  // out of memory: one piece
      pieces.push_back(text);
      return;
    }
  }
  std::vector<char16_t> units;
  std::vector<size_t> offsets;  // [units + 1] byte offset in `text` of each unit
  std::vector<Span16> spans, scratch;
  size_t pos = 0;
  while (pos < text.size()) {
    // The longest well-formed run from `pos`, as UTF-16.
    units.clear();
    offsets.clear();
    size_t end = pos;
    while (end < text.size()) {
      const size_t length = utf8::char_length(text, end);
      if (length == 0) break;
      const uint32_t cp = utf8::decode_char(text, end, length);
      offsets.push_back(end);
      if (cp < 0x10000) {
        units.push_back(char16_t(cp));
      } else {
        units.push_back(char16_t(U16_LEAD(cp)));
        units.push_back(char16_t(U16_TRAIL(cp)));
        offsets.push_back(end);
      }
      end += length;
    }
    if (!units.empty()) {
      offsets.push_back(end);
      const icu::UnicodeString run(false, units.data(), int32_t(units.size()));
      spans.assign(1, {0, int32_t(units.size())});
      for (size_t i = 0; i < n_stages; ++i) {
        scratch.clear();
        if (const auto builtin = compiled_->builtins[i]) {
          for (const Span16& span : spans) split_words(*builtin, units.data(), span.begin, span.end, scratch);
        } else {
          matchers[i]->reset(run);
          split_spans(*matchers[i], spans, scratch);
        }
        spans.swap(scratch);
      }
      for (const Span16& s : spans)
        pieces.push_back(text.substr(offsets[s.begin], offsets[s.end] - offsets[s.begin]));
    }
    if (end < text.size()) pieces.push_back(text.substr(end++, 1));  // an ill-formed byte
    pos = end;
  }
}

std::vector<std::string_view> pretokenizer_names() {
  std::vector<std::string_view> names;
  for (const auto& rules : rules_table()) names.insert(names.end(), rules.names.begin(), rules.names.end());
  return names;
}

bool pretokenizer_adds_bos(std::string_view name) {
  const PreTokenizer::Rules* rules = find_rules(name);
  return rules != nullptr && rules->adds_bos;
}

}  // namespace conveyor::tokenizer_detail
