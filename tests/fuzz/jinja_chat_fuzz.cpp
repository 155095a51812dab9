// libFuzzer target: the real chat templates of tests/template/data (Llama 3,
// Qwen 2.5 and 3, Gemma 3, DeepSeek V3, ...) rendered with fuzzed messages.
//
// Input: byte 0 picks the template, byte 1's bits the options (generation
// prompt, tools, BOS/EOS defined, enable_thinking); the rest is a
// conversation as in tests/template/data/conversations ({"messages": [...],
// "tools": [...], "template_kwargs": {...}}), or, when it is not such JSON,
// raw message contents separated by '\x1e' with roles system, user,
// assistant, user, ... so that any bytes reach the templates as content.
//
// Checked as jinja_fuzz is (jinja_fuzz_checks.hpp); templates may refuse a
// conversation (raise_exception) but must say why with a line.
#include <boost/json/parse.hpp>

#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "template/jinja/chat.hpp"
#include "tests/fuzz/jinja_fuzz_checks.hpp"

namespace {

using namespace conveyor;
namespace json = boost::json;

struct RealTemplate {
  jinja::Template t;
  std::string bos, eos;
};

const std::vector<RealTemplate>& templates() {
  static const std::vector<RealTemplate> all = [] {
    const std::filesystem::path dir = CONVEYOR_TEMPLATE_DATA;
    auto slurp = [](const std::filesystem::path& p) {
      std::ifstream f(p, std::ios::binary);
      std::stringstream s;
      s << f.rdbuf();
      return s.str();
    };
    std::vector<RealTemplate> out;
    const json::value manifest = json::parse(slurp(dir / "templates.json"));
    for (const json::value& entry : manifest.as_array()) {
      const json::object& info = entry.as_object();
      auto t = jinja::Template::parse(slurp(dir / "templates" / std::string(info.at("file").as_string())));
      if (!t) __builtin_trap();  // the test data must parse
      RealTemplate r{std::move(t).value(), {}, {}};
      if (info.contains("bos_token")) r.bos = std::string(info.at("bos_token").as_string());
      if (info.contains("eos_token")) r.eos = std::string(info.at("eos_token").as_string());
      out.push_back(std::move(r));
    }
    if (out.empty()) __builtin_trap();
    return out;
  }();
  return all;
}

const json::value& default_tools() {
  static const json::value tools = json::parse(R"([{"type": "function", "function": {"name": "lookup",
    "description": "Looks up.", "parameters": {"type": "object",
    "properties": {"q": {"type": "string"}}, "required": ["q"]}}}])");
  return tools;
}

// The conversation from bytes: JSON when it parses as one, else raw contents.
bool read_conversation(std::string_view bytes, jinja::ChatInputs& in) {
  json::error_code ec;
  json::value v = json::parse(bytes, ec);
  if (!ec && v.is_object() && v.as_object().contains("messages") && v.as_object().at("messages").is_array()) {
    json::object& o = v.as_object();
    in.messages = std::move(o.at("messages").as_array());
    if (o.contains("tools")) in.tools = o.at("tools");
    if (o.contains("template_kwargs") && o.at("template_kwargs").is_object())
      in.kwargs = o.at("template_kwargs").as_object();
    return true;
  }
  static const char* const roles[] = {"system", "user", "assistant", "user", "assistant", "tool", "user"};
  size_t k = 0;
  for (size_t pos = 0; pos <= bytes.size() && k < 32; ++k) {
    size_t end = bytes.find('\x1e', pos);
    if (end == std::string_view::npos) end = bytes.size();
    in.messages.push_back(json::object{{"role", roles[k % 7]}, {"content", json::string(bytes.substr(pos, end - pos))}});
    pos = end + 1;
  }
  return false;
}

bool valid_utf8_json(const json::value& v) {
  if (v.is_string()) return fuzz::valid_utf8(std::string_view(v.as_string().data(), v.as_string().size()));
  if (v.is_array()) {
    for (const json::value& x : v.as_array())
      if (!valid_utf8_json(x)) return false;
  }
  if (v.is_object()) {
    for (const auto& [key, x] : v.as_object())
      if (!fuzz::valid_utf8(std::string_view(key.data(), key.size())) || !valid_utf8_json(x)) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 2) return 0;
  const RealTemplate& t = templates()[data[0] % templates().size()];
  const uint8_t flags = data[1];
  jinja::ChatInputs in;
  const bool from_json = read_conversation(std::string_view(reinterpret_cast<const char*>(data + 2), size - 2), in);
  in.add_generation_prompt = flags & 1;
  if (!from_json && (flags & 2)) in.tools = default_tools();
  if (flags & 4) {
    in.bos_token = t.bos;
    in.eos_token = t.eos;
  }
  if (flags & 8) in.kwargs["enable_thinking"] = bool(flags & 16);

  const jinja::RenderOptions options = fuzz::fuzz_render_options();
  const bool utf8 = valid_utf8_json(json::value(in.messages)) && valid_utf8_json(in.tools) &&
                    valid_utf8_json(json::value(in.kwargs));
  const auto first = jinja::render_chat(t.t, in, options);
  fuzz::check_rendered(first, utf8);
  fuzz::check_same(first, jinja::render_chat(t.t, in, options));
  return 0;
}
