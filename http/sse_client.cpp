#include "http/sse_client.hpp"

#include <boost/json.hpp>

namespace conveyor {

std::vector<std::string> SseDecoder::feed(std::string_view bytes) {
  std::vector<std::string> events;
  while (!bytes.empty()) {
    const size_t nl = bytes.find('\n');
    if (nl == std::string_view::npos) {
      pending_.append(bytes);
      break;
    }
    std::string_view line = bytes.substr(0, nl);
    bytes.remove_prefix(nl + 1);
    if (!pending_.empty()) {
      pending_.append(line);
      std::string whole = std::move(pending_);
      pending_.clear();
      take_line(whole, events);
    } else {
      take_line(line, events);
    }
  }
  return events;
}

void SseDecoder::take_line(std::string_view line, std::vector<std::string>& out) {
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  if (line.empty()) {  // end of event
    if (has_data_) out.push_back(std::move(data_));
    data_.clear();
    has_data_ = false;
    return;
  }
  if (line.front() == ':') return;  // comment (keep-alive)
  const size_t colon = line.find(':');
  const std::string_view field = line.substr(0, colon);
  std::string_view value = colon == std::string_view::npos ? std::string_view{} : line.substr(colon + 1);
  if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  if (field != "data") return;
  if (has_data_) data_ += '\n';
  data_.append(value);
  has_data_ = true;
}

namespace {

std::optional<int64_t> int_field(const boost::json::object& o, std::string_view key) {
  const auto* v = o.if_contains(key);
  if (!v) return std::nullopt;
  if (const auto* i = v->if_int64()) return *i;
  if (const auto* u = v->if_uint64()) return static_cast<int64_t>(*u);
  return std::nullopt;
}

std::string string_field(const boost::json::object& o, std::string_view key) {
  const auto* v = o.if_contains(key);
  const auto* s = v ? v->if_string() : nullptr;
  return s ? std::string(s->data(), s->size()) : std::string();
}

}  // namespace

ChunkInfo parse_chunk(std::string_view data) {
  ChunkInfo info;
  if (data == "[DONE]") {
    info.done = true;
    return info;
  }
  boost::system::error_code ec;
  const boost::json::value v = boost::json::parse(data, ec);
  const auto* obj = ec ? nullptr : v.if_object();
  if (!obj) {
    info.error = "stream chunk is not a JSON object: " + std::string(data.substr(0, 200));
    return info;
  }
  if (const auto* err = obj->if_contains("error")) {
    const auto* eo = err->if_object();
    std::string message = eo ? string_field(*eo, "message") : std::string();
    info.error = message.empty() ? boost::json::serialize(*err) : message;
    return info;
  }
  if (const auto* choices = obj->if_contains("choices"); choices && choices->is_array()) {
    bool first = true;
    for (const auto& c : choices->get_array()) {
      const auto* co = c.if_object();
      if (!co) continue;
      std::string text = string_field(*co, "text");
      if (const auto* delta = co->if_contains("delta"); delta && delta->is_object())
        text += string_field(delta->get_object(), "content");
      const auto* ids = co->if_contains("token_ids");
      if (ids && ids->is_array()) {
        info.has_token_ids = true;
        info.tokens += static_cast<int64_t>(ids->get_array().size());
      } else if (!text.empty()) {
        info.tokens += 1;
      }
      if (first) {
        info.text = std::move(text);
        if (const auto* fr = co->if_contains("finish_reason"); fr && fr->is_string())
          info.finish_reason = std::string(fr->get_string());
        first = false;
      }
    }
  }
  if (const auto* usage = obj->if_contains("usage"); usage && usage->is_object()) {
    info.usage_prompt_tokens = int_field(usage->get_object(), "prompt_tokens");
    info.usage_completion_tokens = int_field(usage->get_object(), "completion_tokens");
  }
  return info;
}

}  // namespace conveyor
