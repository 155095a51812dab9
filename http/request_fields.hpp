// Every request field conveyor knows, and what it does with each.
//
// The OpenAI completions, chat completions and embeddings fields (as of the
// API reference of 2026), conveyor's extensions, and the WebSocket envelope. A field is
//   implemented  parsed and honoured (api_request.cpp), or
//   refused      answered with 400 naming the field, unless its value asks
//                for nothing (`harmless`: "echo": false, "tools": [], ...).
// A field in no row is refused as unrecognized, as OpenAI does: a client that
// misspells "max_tokens" learns it instead of getting a default silently.
//
// Thread-safety: constant data.
#pragma once

#include <cstdint>
#include <span>
#include <string_view>

#include "http/api_types.hpp"

namespace conveyor::http {

enum class FieldSupport : uint8_t { implemented, refused };

// Which requests a field belongs to (bits).
enum FieldScope : uint8_t {
  kCompletions = 1,  // /v1/completions (and a WebSocket completion)
  kChat = 2,         // /v1/chat/completions (and a WebSocket chat request)
  kWebSocket = 4,    // the WebSocket envelope only
  kRender = 8,       // /v1/chat/completions/render: messages, tools, template options
  kEmbeddings = 16,  // /v1/embeddings (http/embeddings.hpp)
};

struct RequestField {
  std::string_view name;
  uint8_t scope;  // FieldScope bits
  FieldSupport support;
  // refused: values (compact JSON, alternatives separated by '|') that ask
  // for nothing and are accepted; empty when every non-null value is refused.
  std::string_view harmless;
  // implemented: what it does; refused: why, and what to do instead.
  std::string_view note;
};

std::span<const RequestField> request_fields();

// The row for `name` on `endpoint` (render requests: kRender), or null.
const RequestField* find_request_field(std::string_view name, uint8_t scope);

// Whether `compact`, a refused field's value as compact JSON, is one of the
// row's harmless values (it asks for nothing, so it is accepted).
bool is_harmless(const RequestField& row, std::string_view compact);

// The FieldScope bit of an endpoint.
uint8_t scope_of(Endpoint endpoint);

}  // namespace conveyor::http
