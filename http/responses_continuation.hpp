// The prompt of a continued response (previous_response_id) in the tokens
// the engine already holds.
//
// The chat template renders the whole conversation again, and encoding it
// again need not give the tokens of the previous turn: the model's answer
// re-encodes to other ids more often than not (models write non-canonical
// tokenizations), and the KV blocks the engine session kept match by token
// ids. So the new prompt starts with the previous turn's tokens (its prompt
// and its answer) for as long as the two texts agree, up to a point where
// both sequences end a token, and goes on with the rest of its own
// encoding: the text is the same, and every block of the previous turn
// before that point is found cached. Nothing is encoded here: the rest
// comes from the template's encoding, which kept the request's text from
// being read as control tokens.
//
// Thread-safety: any thread.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <vector>

#include "model/tokenizer/tokenizer.hpp"

namespace conveyor::http {

// `kept`: the previous turn's prompt and answer; `prompt`: the new prompt as
// the template encodes it. nullopt when no kept token would be used, or the
// ids agree as far as the texts do: then `prompt` is the prompt.
std::optional<std::vector<int32_t>> continue_prompt(const Tokenizer& tokenizer, std::span<const int32_t> kept,
                                                    std::span<const int32_t> prompt);

}  // namespace conveyor::http
