// The soak's streams: what each asks for and where its client abandons it,
// drawn from a seed.
//
// Each stream is, with equal odds, an SSE completion, an SSE chat completion
// or a WebSocket request (a prompt or chat messages). Its prompt is 16 to
// max_prompt_chars characters of random words (the embedded model's byte
// tokenizer: a token per byte, plus BOS), max_tokens is drawn from
// [4, max_tokens], one in ten asks for n = 2 samples, half are greedy and
// half sample at temperature 0.8 with a seed, three in four ignore the end
// token.
//
// Where the client leaves:
//   35%  never: it reads to the end (an SSE client then closes its connection)
//   15%  before the first token: after 0 events (an SSE client, half the time,
//        as soon as the request is written, before the response header)
//   50%  after k events, k uniform in [1, max_tokens + 2]: past the stream's
//        end the stream completes first
//
// Short prompts, long outputs and most streams running long are what make
// the engine preempt: admission (policies/admission.hpp) keeps free the
// blocks that running sequences may still grow into, so KV runs short only
// when the requests admitted in one round outgrow what the running ones
// leave unused.
// A WebSocket client abandons by a cancel message (50%), a clean close of
// the socket (30%) or a dropped TCP connection (20%); an SSE client by
// closing its connection.
#pragma once

#include <cstdint>
#include <random>
#include <vector>

#include "bench/soak/soak_client.hpp"

namespace conveyor::soak {

struct WorkloadShape {
  int32_t max_prompt_chars = 32;
  int32_t max_tokens = 128;
};

std::vector<StreamPlan> make_streams(int64_t count, const WorkloadShape& shape, std::mt19937_64& rng);

// The KV tokens one stream needs at most, on average over the shape: the
// mean prompt (with BOS), plus the mean max_tokens times the mean n.
double mean_stream_tokens(const WorkloadShape& shape);

}  // namespace conveyor::soak
