// POST /v1/embeddings in OpenAI's format: the request read and checked
// against the model, and the response written.
//
//   {"input": "text" | ["text", ...] | [id, ...] | [[id, ...], ...],
//    "model": the served model (optional), "encoding_format": "float" | "base64",
//    "dimensions": the model's dim (optional), "user": any string}
//   -> {"object": "list", "data": [{"object": "embedding", "index": i, "embedding": [...] or "base64"}],
//       "model", "usage": {"prompt_tokens", "total_tokens"}}
//
// Text is tokenized as /v1/completions tokenizes a prompt (BOS where the
// model wants one, special tokens written in the text parsed as such); token
// ids are taken as given. Each input must hold 1 to context_length tokens
// (nothing is generated after it, so the whole context is usable), at most
// kMaxEmbeddingInputs inputs per request. "base64" is the vector's
// little-endian float32 bytes in standard base64, as OpenAI sends it.
// "dimensions" other than the model's dim is refused: the model was not
// trained to be truncated (Matryoshka) embeddings. The fields are
// http/request_fields.hpp's rows of scope kEmbeddings; others are refused by
// name. How the vectors are computed: engine/embedder.hpp.
//
// Thread-safety: pure functions of their arguments.
#pragma once

#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "http/api_types.hpp"
#include "http/request_plan.hpp"

namespace conveyor::http {

// OpenAI's limit of inputs per request.
inline constexpr size_t kMaxEmbeddingInputs = 2048;

struct EmbeddingRequest {
  std::vector<std::vector<int32_t>> inputs;  // token ids, one list per input
  bool base64 = false;
  int64_t prompt_tokens() const;
};

std::variant<EmbeddingRequest, ApiError> parse_embedding_request(std::string_view body, const ModelContext& model);

// The 200 body for `vectors` (one per input, in order).
std::string embedding_response(const std::vector<std::vector<float>>& vectors, bool base64,
                               const std::string& model, int64_t prompt_tokens);

// Standard base64 (RFC 4648, with padding) of `bytes`.
std::string base64_encode(std::string_view bytes);

}  // namespace conveyor::http
