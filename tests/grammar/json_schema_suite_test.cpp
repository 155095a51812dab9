// The official JSON Schema Test Suite (Debian's json-schema-test-suite
// package) through the schema compiler and the matcher: every instance of
// every test case, written three ways (compact, one space after ':' and ',',
// indented), must be accepted by the compiled grammar exactly when the suite
// says it is valid. The Earley recognizer must agree with the matcher.
//
// The package ships drafts 3 to 7 (no 2020-12 yet): draft 7 is read, and
// draft2020-12 instead when a newer package provides it. Files of keywords
// the compiler refuses are checked to be refused, naming the keyword. The
// few cases that cannot match by design are listed in kExclusions with why.
#include <gtest/gtest.h>

#include <boost/json.hpp>
#include <charconv>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <set>

#include "grammar/json_schema.hpp"
#include "grammar/json_syntax.hpp"
#include "grammar/matcher.hpp"
#include "tests/grammar/earley.hpp"

namespace conveyor::grammar {
namespace {

namespace fs = std::filesystem;
namespace json = boost::json;

const fs::path kSuite = "/usr/share/json-schema-test-suite/tests";

// Files of keywords the compiler supports (draft 7 names; optional/format
// for the formats it enforces).
const std::vector<std::string> kSupported = {
    "additionalItems.json", "additionalProperties.json", "allOf.json",     "anyOf.json",
    "boolean_schema.json",  "const.json",                "default.json",   "definitions.json",
    "enum.json",            "exclusiveMaximum.json",     "exclusiveMinimum.json", "items.json",
    "maxItems.json",        "maxLength.json",            "maximum.json",   "minItems.json",
    "minLength.json",       "minimum.json",              "oneOf.json",     "pattern.json",
    "properties.json",      "ref.json",                  "required.json",  "type.json",
    "prefixItems.json",     "optional/format/date.json", "optional/format/time.json",
    "optional/format/date-time.json", "optional/format/email.json", "optional/format/ipv4.json",
    "optional/format/uuid.json"};

// Files of keywords the compiler refuses, with the keywords a refusal may name.
const std::vector<std::pair<std::string, std::vector<std::string>>> kRefused = {
    {"contains.json", {"contains"}},
    {"dependencies.json", {"dependencies"}},
    {"if-then-else.json", {"if", "then", "else"}},
    {"maxProperties.json", {"maxProperties"}},
    {"minProperties.json", {"minProperties"}},
    {"multipleOf.json", {"multipleOf"}},
    {"not.json", {"not"}},
    {"patternProperties.json", {"patternProperties"}},
    {"propertyNames.json", {"propertyNames"}},
    {"uniqueItems.json", {"uniqueItems"}},
    {"optional/format/hostname.json", {"hostname"}},
    {"optional/format/ipv6.json", {"ipv6"}},
    {"optional/format/uri.json", {"uri"}},
};

struct Exclusion {
  const char* file;
  const char* group;  // the test group's description
  const char* test;   // the case's description, or nullptr for the whole group
  const char* reason;
};

const char* const kOrder = "property order: the grammar writes members in the schema's order (json_schema.hpp)";
const char* const kOneOf = "oneOf is compiled as anyOf: a grammar cannot say \"exactly one branch\"";
const std::vector<Exclusion> kExclusions = {
    {"allOf.json", "allOf", "allOf", kOrder},
    {"allOf.json", "allOf with base schema", "valid", kOrder},
    {"const.json", "const with object", "same object with different property order is valid", kOrder},
    {"oneOf.json", "oneOf", "both oneOf valid", kOneOf},
    {"oneOf.json", "oneOf with base schema", "both oneOf valid", kOneOf},
    {"oneOf.json", "oneOf with boolean schemas, all true", "any value is invalid", kOneOf},
    {"oneOf.json", "oneOf with boolean schemas, more than one true", "any value is invalid", kOneOf},
    {"oneOf.json", "oneOf complex types", "both oneOf valid (complex)", kOneOf},
    {"ref.json", "ref overrides any sibling keywords", "ref valid, maxItems ignored",
     "draft 7 ignores $ref's siblings; 2020-12, which the compiler follows, applies them"},
};

const Exclusion* excluded(const std::string& file, const std::string& group, const std::string& test) {
  for (const Exclusion& e : kExclusions) {
    if (file == e.file && group == e.group && (!e.test || test == e.test)) return &e;
  }
  return nullptr;
}

// The instance as JSON text: separators ("," ":" or ", " ": ") and, when
// `indent`, a newline and two spaces a level inside brackets.
void write(const json::value& v, bool spaced, bool indent, int depth, std::string& out) {
  const auto newline = [&](int d) {
    if (indent) out += "\n" + std::string(size_t(2 * d), ' ');
  };
  switch (v.kind()) {
    case json::kind::null: out += "null"; return;
    case json::kind::bool_: out += v.get_bool() ? "true" : "false"; return;
    case json::kind::int64: out += std::to_string(v.get_int64()); return;
    case json::kind::uint64: out += std::to_string(v.get_uint64()); return;
    case json::kind::double_: {
      char buf[32];
      out.append(buf, std::to_chars(buf, buf + sizeof buf, v.get_double()).ptr);
      return;
    }
    case json::kind::string: out += JsonSyntax::quoted(v.get_string()); return;
    case json::kind::array: {
      out += '[';
      const json::array& a = v.get_array();
      for (size_t i = 0; i < a.size(); ++i) {
        if (i) out += spaced && !indent ? ", " : ",";
        newline(depth + 1);
        write(a[i], spaced, indent, depth + 1, out);
      }
      if (!a.empty()) newline(depth);
      out += ']';
      return;
    }
    case json::kind::object: {
      out += '{';
      bool first = true;
      for (const auto& [key, value] : v.get_object()) {
        if (!first) out += spaced && !indent ? ", " : ",";
        first = false;
        newline(depth + 1);
        out += JsonSyntax::quoted(key);
        out += spaced ? ": " : ":";
        write(value, spaced, indent, depth + 1, out);
      }
      if (!v.get_object().empty()) newline(depth);
      out += '}';
      return;
    }
  }
}

std::shared_ptr<const TokenIndex> byte_vocabulary() {
  VocabularyBytes v;
  for (int b = 0; b < 256; ++b) v.tokens.emplace_back(1, char(b));
  v.tokens.emplace_back();  // 256: the end token
  v.end_ids = {256};
  return index_vocabulary(std::move(v));
}

json::value read_json(const fs::path& path) {
  std::ifstream in(path);
  return json::parse(std::string(std::istreambuf_iterator<char>(in), {}));
}

fs::path suite_dir() {
  return fs::exists(kSuite / "draft2020-12") ? kSuite / "draft2020-12" : kSuite / "draft7";
}

TEST(JsonSchemaSuite, SupportedKeywordsMatchTheValidFlag) {
  if (!fs::exists(suite_dir())) GTEST_SKIP() << "json-schema-test-suite is not installed (" << kSuite << ")";
  const auto vocab = byte_vocabulary();
  std::set<std::string> used_exclusions;
  int total_pass = 0, total_cases = 0;
  for (const std::string& file : kSupported) {
    const fs::path path = suite_dir() / file;
    if (!fs::exists(path)) continue;  // e.g. prefixItems.json exists from 2019-09 on
    int pass = 0, cases = 0, skipped = 0, refused = 0;
    const json::value doc = read_json(path);
    for (const json::value& group_value : doc.as_array()) {
      const json::object& group = group_value.as_object();
      const std::string group_name(group.at("description").as_string());
      const std::string schema_text = json::serialize(group.at("schema"));
      auto g = grammar_from_json_schema(schema_text, JsonSchemaOptions{false});
      // A schema that matches nothing is refused: then every case must be invalid.
      const bool matches_nothing = !g && g.error().message.find("matches no JSON value") != std::string::npos;
      if (!g && !matches_nothing) {
        // Refused by design (a keyword, format, remote $ref or bound the
        // compiler does not enforce): the message must say so.
        EXPECT_NE(g.error().message.find("is not supported"), std::string::npos) << file << " / " << group_name
                                                                                 << ": " << g.error().message;
        std::cout << "  refused: " << group_name << ": " << g.error().message << "\n";
        ++refused;
        continue;
      }
      std::shared_ptr<const CompiledGrammar> compiled;
      if (g) {
        auto c = compile(*g, vocab);
        ASSERT_TRUE(c) << c.error().message;
        compiled = *c;
      }
      for (const json::value& test_value : group.at("tests").as_array()) {
        const json::object& test = test_value.as_object();
        const std::string test_name(test.at("description").as_string());
        if (const Exclusion* e = excluded(file, group_name, test_name)) {
          used_exclusions.insert(std::string(e->file) + "/" + e->group + "/" + (e->test ? e->test : ""));
          ++skipped;
          continue;
        }
        ++cases;
        const bool valid = test.at("valid").as_bool();
        if (matches_nothing) {
          EXPECT_FALSE(valid) << file << " / " << group_name << " / " << test_name << ": the schema matches nothing";
          pass += !valid;
          continue;
        }
        bool ok = true;
        for (const auto& [spaced, indent] : {std::pair{false, false}, {true, false}, {false, true}}) {
          std::string text;
          write(test.at("data"), spaced, indent, 0, text);
          Matcher m(compiled);
          const bool accepted = m.accept_bytes(text) && m.can_end();
          const bool earley = testing::earley_accepts(*g, text);
          EXPECT_EQ(accepted, earley) << "the matcher and the Earley recognizer disagree: " << file << " / "
                                      << group_name << " / " << test_name << ": " << text;
          if (accepted != valid) {
            ok = false;
            ADD_FAILURE() << file << " / " << group_name << " / " << test_name << ": " << text
                          << (valid ? " is valid but refused" : " is invalid but accepted") << "\nschema: " << schema_text;
          }
        }
        pass += ok;
      }
    }
    std::cout << file << ": " << pass << " of " << cases << " cases pass";
    if (skipped) std::cout << ", " << skipped << " excluded";
    if (refused) std::cout << ", " << refused << " schemas refused";
    std::cout << "\n";
    total_pass += pass;
    total_cases += cases;
  }
  std::cout << "supported keywords: " << total_pass << " of " << total_cases << " cases pass\n";
  EXPECT_EQ(used_exclusions.size(), kExclusions.size()) << "an exclusion no longer matches a case: remove it";
}

TEST(JsonSchemaSuite, RefusedKeywordsAreRefusedByName) {
  if (!fs::exists(suite_dir())) GTEST_SKIP() << "json-schema-test-suite is not installed (" << kSuite << ")";
  for (const auto& [file, keywords] : kRefused) {
    const fs::path path = suite_dir() / file;
    if (!fs::exists(path)) continue;
    int refused = 0, groups = 0;
    const json::value doc = read_json(path);
    for (const json::value& group_value : doc.as_array()) {
      const json::object& group = group_value.as_object();
      ++groups;
      auto g = grammar_from_json_schema(json::serialize(group.at("schema")), JsonSchemaOptions{false});
      if (!g) {
        const std::string& m = g.error().message;
        const bool named = std::any_of(keywords.begin(), keywords.end(), [&](const std::string& k) {
          return m.find("'" + k + "' is not supported") != std::string::npos;
        });
        EXPECT_TRUE(named) << file << " / " << group.at("description").as_string() << ": " << m;
        refused += named;
      } else {
        ADD_FAILURE() << file << " / " << group.at("description").as_string() << " compiled";
      }
    }
    std::cout << file << ": " << refused << " of " << groups << " schemas refused by name\n";
  }
}

}  // namespace
}  // namespace conveyor::grammar
