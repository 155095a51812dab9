#include "http/responses_events.hpp"

#include "http/responses_json.hpp"
#include "http/routes.hpp"

namespace conveyor::http {

namespace json = boost::json;

struct ResponseEvents::Event {
  json::object fields;
};

void ResponseEvents::send(std::string_view type, Event&& event) {
  json::object& o = event.fields;
  o["type"] = type;
  o["sequence_number"] = sequence_++;
  std::string text = "event: ";
  text.append(type).append("\ndata: ").append(json::serialize(o));
  out_.push_back(std::move(text));
}

void ResponseEvents::response(std::string_view type, const ResponseState& response) {
  send(type, Event{{{"response", detail::response_object(response)}}});
}

void ResponseEvents::item_added(int32_t output_index, const OutputItem& item) {
  send("response.output_item.added",
       Event{{{"output_index", output_index}, {"item", detail::output_item_object(item)}}});
}

void ResponseEvents::item_done(int32_t output_index, const OutputItem& item) {
  send("response.output_item.done",
       Event{{{"output_index", output_index}, {"item", detail::output_item_object(item)}}});
}

void ResponseEvents::text_part_added(int32_t output_index, const OutputItem& item) {
  send("response.content_part.added", Event{{{"item_id", item.id},
                                             {"output_index", output_index},
                                             {"content_index", 0},
                                             {"part", detail::output_text_part("")}}});
}

void ResponseEvents::text_delta(int32_t output_index, const OutputItem& item, std::string_view delta) {
  send("response.output_text.delta", Event{{{"item_id", item.id},
                                            {"output_index", output_index},
                                            {"content_index", 0},
                                            {"delta", delta},
                                            {"logprobs", json::array{}}}});
}

void ResponseEvents::text_done(int32_t output_index, const OutputItem& item) {
  send("response.output_text.done", Event{{{"item_id", item.id},
                                           {"output_index", output_index},
                                           {"content_index", 0},
                                           {"text", item.text},
                                           {"logprobs", json::array{}}}});
  send("response.content_part.done", Event{{{"item_id", item.id},
                                            {"output_index", output_index},
                                            {"content_index", 0},
                                            {"part", detail::output_text_part(item.text)}}});
}

void ResponseEvents::arguments_delta(int32_t output_index, const OutputItem& item, std::string_view delta) {
  send("response.function_call_arguments.delta",
       Event{{{"item_id", item.id}, {"output_index", output_index}, {"delta", delta}}});
}

void ResponseEvents::arguments_done(int32_t output_index, const OutputItem& item) {
  send("response.function_call_arguments.done", Event{{{"item_id", item.id},
                                                       {"output_index", output_index},
                                                       {"name", item.name},
                                                       {"arguments", item.arguments}}});
}

std::string responses_sse_chunk(const std::vector<std::string>& events) {
  std::string data;
  for (const std::string& e : events) data.append(e).append("\n\n");
  return http_chunk(data);
}

}  // namespace conveyor::http
