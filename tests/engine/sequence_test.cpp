// A sequence's state machine (engine/sequence.hpp) and the sessions' books
// (engine/session_store.hpp), without a scheduler.
#include "engine/sequence.hpp"
#include "engine/session_store.hpp"

#include <gtest/gtest.h>

#include <stdexcept>

namespace conveyor {
namespace {

TEST(Sequence, LivesThroughItsNamedTransitions) {
  Sequence s;
  EXPECT_EQ(s.state(), SeqState::waiting);
  EXPECT_FALSE(s.in_batch());
  s.admit();
  EXPECT_EQ(s.state(), SeqState::running);
  s.plan_fork();
  EXPECT_EQ(s.state(), SeqState::forking);
  EXPECT_TRUE(s.in_batch());
  s.forked();
  s.start_swap_out();
  EXPECT_FALSE(s.in_batch());
  s.swap_out_done();
  s.start_swap_in();
  s.swap_in_done();
  EXPECT_EQ(s.state(), SeqState::running);
  s.requeue();  // preempted for recompute
  EXPECT_EQ(s.state(), SeqState::waiting);
  s.admit();
  s.start_swap_out();
  s.requeue();  // the block manager refused the copy
  EXPECT_EQ(s.state(), SeqState::waiting);
  s.admit();
  s.end_into_padding();
  EXPECT_EQ(s.state(), SeqState::padding);
  EXPECT_TRUE(s.in_batch());
  s.restart();  // after an engine fault, from any state
  EXPECT_EQ(s.state(), SeqState::waiting);
}

TEST(Sequence, RefusesATransitionFromTheWrongState) {
  Sequence s;
  s.id = 7;
  EXPECT_THROW(s.forked(), std::logic_error);
  EXPECT_THROW(s.swap_in_done(), std::logic_error);
  EXPECT_THROW(s.requeue(), std::logic_error);
  s.admit();
  EXPECT_THROW(s.admit(), std::logic_error);
  try {
    s.swap_out_done();
    FAIL() << "swap_out_done from running";
  } catch (const std::logic_error& e) {
    EXPECT_STREQ(e.what(), "sequence 7: running -> swapped (only from swapping_out)");
  }
  s.end_into_padding();
  EXPECT_THROW(s.start_swap_out(), std::logic_error);  // a padding row is never a victim
  EXPECT_EQ(s.state(), SeqState::padding);             // a refused transition changes nothing
}

TEST(SessionStore, KeepsReleasesExpiresAndLetsTheOldestGoFirst) {
  SessionStore store;
  std::vector<seq_id> freed;
  store.keep("a", 100, 3, 10.0);
  store.keep("b", 101, 2, 5.0);
  store.keep("c", 102, 4, 20.0);
  EXPECT_EQ(store.size(), 3);
  EXPECT_EQ(store.blocks(), 9);
  EXPECT_EQ(store.next_expiry(), 5.0);
  store.release("nobody", freed);
  EXPECT_TRUE(freed.empty());
  store.expire(5.0, freed);  // b's time is up
  EXPECT_EQ(freed, std::vector<seq_id>{101});
  EXPECT_EQ(store.release_oldest(4, freed), 7);  // a (3 blocks), then c (4)
  EXPECT_EQ(freed, (std::vector<seq_id>{101, 100, 102}));
  EXPECT_TRUE(store.empty());
  EXPECT_EQ(store.blocks(), 0);
  EXPECT_EQ(store.next_expiry(), std::nullopt);
  store.keep("d", 103, 1, 1.0);
  store.clear();
  EXPECT_TRUE(store.empty());
  EXPECT_EQ(store.blocks(), 0);
}

}  // namespace
}  // namespace conveyor
