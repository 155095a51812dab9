#include "http/embeddings.hpp"

#include <boost/json.hpp>

#include <bit>
#include <charconv>
#include <cstring>

#include "http/request_fields.hpp"
#include "http/json_detail.hpp"

namespace conveyor::http {
namespace {

namespace json = boost::json;

// "'input'" for a single input, "input[i]" for one of several.
std::string name_of(size_t index, bool several) {
  return several ? "input[" + std::to_string(index) + "]" : "'input'";
}

ApiError input_error(std::string message) { return bad_request(std::move(message), "input"); }

std::optional<ApiError> check_length(size_t tokens, size_t index, bool several, const ModelContext& model) {
  if (int64_t(tokens) <= model.config.context_length) return std::nullopt;
  ApiError e = input_error(name_of(index, several) + " has " + std::to_string(tokens) +
                           " tokens; the model's context is " + std::to_string(model.config.context_length) +
                           " tokens");
  e.code = "context_length_exceeded";
  return e;
}

// One input given as token ids.
std::variant<std::vector<int32_t>, ApiError> read_ids(const json::array& a, size_t index, bool several,
                                                      const ModelContext& model) {
  if (a.empty()) return input_error(name_of(index, several) + " is an empty list of token ids");
  std::vector<int32_t> ids;
  ids.reserve(a.size());
  for (const json::value& v : a) {
    if (!v.is_int64() || v.as_int64() < 0 || v.as_int64() >= model.config.vocab_size)
      return input_error(name_of(index, several) + " must hold token ids in [0, " +
                         std::to_string(model.config.vocab_size) + ")");
    ids.push_back(int32_t(v.as_int64()));
  }
  if (auto e = check_length(ids.size(), index, several, model)) return *e;
  return ids;
}

std::variant<std::vector<int32_t>, ApiError> read_text(const json::string& s, size_t index, bool several,
                                                       const ModelContext& model) {
  if (s.empty()) return input_error(name_of(index, several) + " is an empty string");
  if (!model.tokenizer) return input_error("the model has no tokenizer: give the input as token ids");
  std::vector<int32_t> ids = model.tokenizer->encode(std::string_view(s.data(), s.size()),
                                                     EncodeOptions{.add_bos = true, .parse_special = true});
  if (auto e = check_length(ids.size(), index, several, model)) return *e;
  return ids;
}

// `input` in any of its four forms.
std::optional<ApiError> read_inputs(const json::value& input, const ModelContext& model,
                                    std::vector<std::vector<int32_t>>& out) {
  auto take = [&out](std::variant<std::vector<int32_t>, ApiError> one) -> std::optional<ApiError> {
    if (auto* e = std::get_if<ApiError>(&one)) return *e;
    out.push_back(std::move(std::get<std::vector<int32_t>>(one)));
    return std::nullopt;
  };
  const char* forms = "'input' must be a string, an array of strings, an array of token ids or an array of arrays "
                      "of token ids";
  if (input.is_string()) return take(read_text(input.as_string(), 0, false, model));
  if (!input.is_array()) return input_error(forms);
  const json::array& a = input.as_array();
  if (a.empty()) return input_error("'input' is an empty array");
  if (a.front().is_number()) return take(read_ids(a, 0, false, model));
  if (a.size() > kMaxEmbeddingInputs)
    return input_error("'input' holds " + std::to_string(a.size()) + " inputs; at most " +
                       std::to_string(kMaxEmbeddingInputs) + " are allowed per request");
  const bool strings = a.front().is_string();
  for (size_t i = 0; i < a.size(); ++i) {
    std::optional<ApiError> e;
    if (strings && a[i].is_string())
      e = take(read_text(a[i].as_string(), i, true, model));
    else if (!strings && a[i].is_array())
      e = take(read_ids(a[i].as_array(), i, true, model));
    else
      return input_error(forms + std::string(" (all of one kind)"));
    if (e) return e;
  }
  return std::nullopt;
}

void append_float(std::string& out, float v) {
  char buf[32];
  const auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v);  // the shortest text that reads back as v
  out.append(buf, end);
}

}  // namespace

int64_t EmbeddingRequest::prompt_tokens() const {
  int64_t n = 0;
  for (const auto& in : inputs) n += int64_t(in.size());
  return n;
}

std::variant<EmbeddingRequest, ApiError> parse_embedding_request(std::string_view body, const ModelContext& model) {
  boost::system::error_code ec;
  json::value root = detail::parse_request_json(body, ec);
  if (ec) return detail::body_not_json(ec);
  if (!root.is_object()) return bad_request("the request body must be a JSON object");
  const json::object& o = root.as_object();
  for (const auto& field : o) {
    const std::string name(field.key());
    const RequestField* f = find_request_field(name, kEmbeddings);
    if (f == nullptr) return bad_request("unrecognized request field '" + name + "'", name);
  }
  EmbeddingRequest r;
  if (const json::value* m = o.if_contains("model"); m != nullptr && !m->is_null()) {
    if (!m->is_string()) return bad_request("'model' must be a string", "model");
    if (auto e = check_model_name(std::string_view(m->as_string().data(), m->as_string().size()), model)) return *e;
  }
  if (const json::value* u = o.if_contains("user"); u != nullptr && !u->is_null() && !u->is_string())
    return bad_request("'user' must be a string", "user");
  if (const json::value* f = o.if_contains("encoding_format"); f != nullptr && !f->is_null()) {
    if (f->is_string() && f->as_string() == "base64")
      r.base64 = true;
    else if (!f->is_string() || f->as_string() != "float")
      return bad_request("'encoding_format' must be \"float\" or \"base64\"", "encoding_format");
  }
  if (const json::value* d = o.if_contains("dimensions"); d != nullptr && !d->is_null()) {
    if (!d->is_int64() || d->as_int64() != model.config.dim)
      return bad_request("'dimensions' must be " + std::to_string(model.config.dim) +
                             ", the model's embedding size: this model's embeddings cannot be shortened",
                         "dimensions");
  }
  const json::value* input = o.if_contains("input");
  if (input == nullptr || input->is_null()) return bad_request("'input' is required", "input");
  if (auto e = read_inputs(*input, model, r.inputs)) return *e;
  return r;
}

std::string embedding_response(const std::vector<std::vector<float>>& vectors, bool base64,
                               const std::string& model, int64_t prompt_tokens) {
  std::string out = "{\"object\":\"list\",\"data\":[";
  for (size_t i = 0; i < vectors.size(); ++i) {
    out += i ? ",{" : "{";
    out += "\"object\":\"embedding\",\"index\":" + std::to_string(i) + ",\"embedding\":";
    const std::vector<float>& v = vectors[i];
    if (base64) {
      std::string bytes(v.size() * 4, '\0');
      for (size_t k = 0; k < v.size(); ++k) {
        const uint32_t bits = std::bit_cast<uint32_t>(v[k]);
        for (int b = 0; b < 4; ++b) bytes[4 * k + size_t(b)] = char((bits >> (8 * b)) & 0xff);  // little-endian
      }
      out += '"' + base64_encode(bytes) + '"';
    } else {
      out += '[';
      for (size_t k = 0; k < v.size(); ++k) {
        if (k) out += ',';
        append_float(out, v[k]);
      }
      out += ']';
    }
    out += '}';
  }
  out += "],\"model\":" + json::serialize(json::value(model));
  out += ",\"usage\":{\"prompt_tokens\":" + std::to_string(prompt_tokens) +
         ",\"total_tokens\":" + std::to_string(prompt_tokens) + "}}";
  return out;
}

std::string base64_encode(std::string_view bytes) {
  static constexpr char kAlphabet[] = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
  std::string out;
  out.reserve((bytes.size() + 2) / 3 * 4);
  for (size_t i = 0; i < bytes.size(); i += 3) {
    const size_t n = std::min<size_t>(3, bytes.size() - i);
    uint32_t chunk = 0;
    for (size_t k = 0; k < 3; ++k) chunk = chunk << 8 | (k < n ? uint8_t(bytes[i + k]) : 0u);
    for (size_t k = 0; k < 4; ++k) out += k <= n ? kAlphabet[(chunk >> (18 - 6 * k)) & 63] : '=';
  }
  return out;
}

}  // namespace conveyor::http
