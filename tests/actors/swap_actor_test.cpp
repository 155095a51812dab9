// The swap actor with an engine whose orders complete when the test says:
// several orders are in flight at once, each is answered when its own copies
// land (in any order), and with the duration the engine measured.
#include "actors/swap_actor.hpp"

#include <gtest/gtest.h>

#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "tests/actors/engine_test_util.hpp"

namespace conveyor {
namespace {

// Keeps every order's completion until land() is called.
class HeldSwapEngine final : public SwapEngine {
 public:
  void submit(const SwapOrder& order, Done done) override {
    std::lock_guard lock(mutex_);
    held_.push_back({order.seq, std::move(done)});
  }
  size_t in_flight() {
    std::lock_guard lock(mutex_);
    return held_.size();
  }
  // Completes the order of sequence `seq` (from this thread, as a copy
  // stream's callback thread would).
  void land(seq_id seq, double seconds) {
    Done done = take(seq);
    ASSERT_TRUE(done) << "no order for sequence " << seq;
    done(seconds);
  }
  // Fails the order of sequence `seq`, as a device's copy stream would.
  void fail(seq_id seq, const std::string& why) {
    Done done = take(seq);
    ASSERT_TRUE(done) << "no order for sequence " << seq;
    done(make_error(Errc::internal, why));
  }
  // The held order of sequence `seq` (empty when there is none).
  Done take(seq_id seq) {
    std::lock_guard lock(mutex_);
    for (auto it = held_.begin(); it != held_.end(); ++it)
      if (it->first == seq) {
        Done done = std::move(it->second);
        held_.erase(it);
        return done;
      }
    return {};
  }

 private:
  std::mutex mutex_;
  std::vector<std::pair<seq_id, Done>> held_;
};

TEST(SwapActor, OrdersOverlapAndAnswerAsTheyLand) {
  testing::EngineSystemConfig cfg;
  caf::actor_system sys{cfg};
  auto engine = std::make_shared<HeldSwapEngine>();
  swap_actor swap = spawn_swap(sys, engine);
  caf::scoped_actor self{sys};
  for (seq_id seq : {1, 2, 3})
    self->send(swap, swap_atom_v, SwapOrder{seq, seq == 2 ? SwapDirection::in : SwapDirection::out, {{0, 0}}});
  // All three are submitted before any lands.
  for (int i = 0; i < 2000 && engine->in_flight() < 3; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_EQ(engine->in_flight(), 3u);

  std::vector<SwapDone> answers;
  auto receive_one = [&] {
    self->receive([&](const SwapDone& d) { answers.push_back(d); },
                  caf::after(std::chrono::seconds(10)) >> [&] { ADD_FAILURE() << "no SwapDone"; });
  };
  engine->land(3, 0.25);
  receive_one();
  engine->land(1, 0.5);
  receive_one();
  engine->land(2, 0.75);
  receive_one();
  ASSERT_EQ(answers.size(), 3u);
  EXPECT_EQ(answers[0].seq, 3u);
  EXPECT_EQ(answers[0].seconds, 0.25);
  EXPECT_EQ(answers[1].seq, 1u);
  EXPECT_EQ(answers[1].direction, SwapDirection::out);
  EXPECT_EQ(answers[2].seq, 2u);
  EXPECT_EQ(answers[2].direction, SwapDirection::in);
  EXPECT_EQ(answers[2].seconds, 0.75);
  caf::anon_send_exit(swap, caf::exit_reason::user_shutdown);
}

// A copy that fails after submit() returned is answered with an error (the
// scheduler then restarts the workers), not with SwapDone; the other order
// in flight still lands.
TEST(SwapActor, ACopyThatFailsOnTheStreamIsAnErrorNotDone) {
  testing::EngineSystemConfig cfg;
  caf::actor_system sys{cfg};
  auto engine = std::make_shared<HeldSwapEngine>();
  swap_actor swap = spawn_swap(sys, engine);
  caf::scoped_actor self{sys};
  for (seq_id seq : {1, 2}) self->send(swap, swap_atom_v, SwapOrder{seq, SwapDirection::out, {{0, 0}}});
  for (int i = 0; i < 2000 && engine->in_flight() < 2; ++i) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_EQ(engine->in_flight(), 2u);
  engine->fail(1, "the copy stream: an illegal memory access was encountered");
  std::string error;
  self->receive([&](const SwapDone& d) { ADD_FAILURE() << "order " << d.seq << " reported done"; },
                [&](caf::error& e) { error = from_caf_error(e).message; },
                caf::after(std::chrono::seconds(10)) >> [&] { ADD_FAILURE() << "no answer"; });
  EXPECT_NE(error.find("swap copy: the copy stream: an illegal memory access"), std::string::npos) << error;
  engine->land(2, 0.5);
  bool landed = false;
  self->receive([&](const SwapDone& d) { landed = d.seq == 2; },
                caf::after(std::chrono::seconds(10)) >> [&] { ADD_FAILURE() << "no SwapDone"; });
  EXPECT_TRUE(landed);
  caf::anon_send_exit(swap, caf::exit_reason::user_shutdown);
}

TEST(SwapActor, WithoutAnEngineAnswersAtOnce) {
  testing::EngineSystemConfig cfg;
  caf::actor_system sys{cfg};
  swap_actor swap = spawn_swap(sys, nullptr);
  caf::scoped_actor self{sys};
  bool answered = false;
  self->request(swap, std::chrono::seconds(10), swap_atom_v, SwapOrder{7, SwapDirection::out, {}})
      .receive([&](const SwapDone& d) { answered = d.seq == 7; },
               [&](caf::error& e) { ADD_FAILURE() << caf::to_string(e); });
  EXPECT_TRUE(answered);
  caf::anon_send_exit(swap, caf::exit_reason::user_shutdown);
}

}  // namespace
}  // namespace conveyor
