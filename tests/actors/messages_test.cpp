// Token events as they cross the network between a router and its nodes:
// CAF's binary serialization keeps every field, the out-of-line detail
// included, and an event without one stays without one.
#include <gtest/gtest.h>

#include <caf/binary_deserializer.hpp>
#include <caf/binary_serializer.hpp>

#include "actors/messages.hpp"

namespace conveyor {
namespace {

TokenBatch round_trip(caf::actor_system& sys, TokenBatch batch) {
  std::vector<char> bytes;
  caf::binary_serializer sink{sys, bytes};
  EXPECT_FALSE(sink(batch));
  TokenBatch out;
  caf::binary_deserializer source{sys, bytes};
  EXPECT_FALSE(source(out));
  return out;
}

TEST(TokenEvents, CrossTheWireWithTheirDetailOrWithout) {
  caf::actor_system_config cfg;
  add_engine_types(cfg);
  caf::actor_system sys{cfg};

  TokenEvent plain;
  plain.id = 7;
  plain.index = 2;
  plain.token = 345;
  plain.logprob = -0.25f;

  TokenEvent last;
  last.id = 7;
  last.token = -1;
  last.finish = FinishReason::error;
  last.error_code = Errc::resource_exhausted;
  last.request_done = true;
  TokenEventDetail& d = last.detail.get_or_make();
  d.top = {{11, -0.5f}, {12, -1.5f}};
  d.prompt_tokens = 40;
  d.cached_prompt_tokens = 32;
  d.completion_tokens = 9;
  d.stop_tokens = 1;
  d.message = "out of blocks";
  d.prompt_logprobs = {PromptLogprob{5, -2.0f, 3, {{6, -1.0f}}}};

  const TokenBatch out = round_trip(sys, TokenBatch{{plain, last}});
  ASSERT_EQ(out.events.size(), 2u);
  const TokenEvent& a = out.events[0];
  EXPECT_EQ(a.id, 7u);
  EXPECT_EQ(a.index, 2);
  EXPECT_EQ(a.token, 345);
  EXPECT_EQ(a.logprob, -0.25f);
  EXPECT_FALSE(a.detail);
  EXPECT_TRUE(a.details().message.empty());

  const TokenEvent& b = out.events[1];
  EXPECT_EQ(b.finish, FinishReason::error);
  EXPECT_EQ(b.error_code, Errc::resource_exhausted);
  EXPECT_TRUE(b.request_done);
  ASSERT_TRUE(b.detail);
  EXPECT_EQ(b.details().prompt_tokens, 40);
  EXPECT_EQ(b.details().cached_prompt_tokens, 32);
  EXPECT_EQ(b.details().completion_tokens, 9);
  EXPECT_EQ(b.details().stop_tokens, 1);
  EXPECT_EQ(b.details().message, "out of blocks");
  ASSERT_EQ(b.details().top.size(), 2u);
  EXPECT_EQ(b.details().top[1].token, 12);
  ASSERT_EQ(b.details().prompt_logprobs.size(), 1u);
  EXPECT_EQ(b.details().prompt_logprobs[0].rank, 3);
  EXPECT_EQ(b.details().prompt_logprobs[0].top[0].token, 6);
}

TEST(TokenEvents, CopiesOwnTheirDetail) {
  TokenEvent a;
  a.detail.get_or_make().message = "first";
  TokenEvent b = a;
  b.detail.get_or_make().message = "second";
  EXPECT_EQ(a.details().message, "first");
  EXPECT_EQ(b.details().message, "second");
  TokenEvent c = std::move(b);
  EXPECT_EQ(c.details().message, "second");
  a = c;
  EXPECT_EQ(a.details().message, "second");
  EXPECT_LE(sizeof(TokenEvent), 40u);
}

}  // namespace
}  // namespace conveyor
