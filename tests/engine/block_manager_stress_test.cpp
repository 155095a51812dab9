// Randomized operations over a tiny block pool, with a simulated executor.
//
// The harness plays the executor: it keeps a fake KV value for every slot of
// every device and host block, equal to a hash of the whole token prefix the
// slot's position ends (that is what real KV depends on). It "computes" a
// sequence's tokens by writing those values into the sequence's blocks, runs
// every copy the manager orders, and checks after every operation that
//   - check_invariants() holds;
//   - every computed token of every sequence still has the right KV in its
//     block (nothing was overwritten or freed under it);
//   - every prefix hit delivers blocks whose KV is right for the new prompt.
// The vocabulary is tiny so that prefixes repeat and hit often.
//
// CONVEYOR_STRESS_OPS sets the operations per configuration (default 3000).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstdlib>
#include <iterator>
#include <map>
#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "engine/block_manager.hpp"

namespace conveyor {
namespace {

using Tokens = std::vector<int32_t>;

struct Config {
  int32_t num_blocks;
  int32_t block_size;
  bool prefix_caching;
  int32_t num_host_blocks;
  uint64_t seed;
};

void PrintTo(const Config& c, std::ostream* os) {
  *os << c.num_blocks << " blocks of " << c.block_size << ", prefix caching "
      << (c.prefix_caching ? "on" : "off") << ", " << c.num_host_blocks << " host blocks, seed "
      << c.seed;
}

int64_t ops_per_config() {
  const char* env = std::getenv("CONVEYOR_STRESS_OPS");
  return env ? std::max<int64_t>(1, std::atoll(env)) : 3000;
}

uint64_t prefix_kv(const Tokens& tokens, size_t p) {
  uint64_t h = 0x9E3779B97F4A7C15ull;
  for (size_t i = 0; i <= p; ++i) {
    h = (h ^ uint64_t(tokens[i] + 7)) * 0x100000001B3ull;
    h ^= h >> 29;
  }
  return h | 1;  // never 0, which stands for "garbage"
}

struct Shadow {
  Tokens tokens;
  int32_t computed = 0;
  SeqLocation where = SeqLocation::device;
};

class Harness {
 public:
  explicit Harness(const Config& c)
      : bm_(c.num_blocks, c.block_size, c.prefix_caching, c.num_host_blocks),
        bs_(c.block_size),
        kv_(size_t(c.num_blocks) * size_t(c.block_size), 0),
        host_kv_(size_t(c.num_host_blocks) * size_t(c.block_size), 0),
        rng_(c.seed) {}

  BlockManager& bm() { return bm_; }

  void step() {
    // Keep the pool turning over: a full pool makes every allocation fail.
    if (bm_.num_available_blocks() * 4 < bm_.num_blocks() && pick(0, 1) == 0) return free_one();
    int op = pick(0, 99);
    if (op < 22) new_prompt();
    else if (op < 40) append();
    else if (op < 58) compute();
    else if (op < 64) fork();
    else if (op < 74) free_one();
    else if (op < 78) swap_out();
    else if (op < 82) complete(SeqLocation::swapping_out);
    else if (op < 86) swap_in();
    else if (op < 90) complete(SeqLocation::swapping_in);
    else batch();
  }

  // Everything that must hold between operations.
  void check(int64_t op) {
    Status s = bm_.check_invariants();
    ASSERT_TRUE(s.is_ok()) << "after op " << op << ": " << s.error().message;
    for (const auto& [id, sh] : seqs_) {
      ASSERT_EQ(bm_.location(id), sh.where) << "seq " << id;
      ASSERT_EQ(bm_.num_tokens(id), int32_t(sh.tokens.size()));
      ASSERT_EQ(bm_.num_computed(id), sh.computed);
      bool device = sh.where == SeqLocation::device || sh.where == SeqLocation::swapping_out;
      auto table = device ? bm_.block_table(id) : bm_.host_block_table(id);
      const auto& kv = device ? kv_ : host_kv_;
      for (int32_t p = 0; p < sh.computed; ++p)
        ASSERT_EQ(kv[slot(table[size_t(p / bs_)], p)], prefix_kv(sh.tokens, size_t(p)))
            << "op " << op << ": seq " << id << " lost the KV of position " << p;
      if (!device) continue;
      for (int32_t p = 0; p < int32_t(sh.tokens.size()); ++p) {
        ASSERT_EQ(bm_.block_tokens(table[size_t(p / bs_)])[size_t(p % bs_)], sh.tokens[size_t(p)]);
      }
    }
  }

  void free_all() {
    for (const auto& [id, sh] : seqs_) ASSERT_TRUE(bm_.free(id).is_ok());
    seqs_.clear();
  }

 private:
  int pick(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  size_t slot(BlockId b, int32_t p) const { return size_t(b) * size_t(bs_) + size_t(p % bs_); }

  // A random live sequence in `where`, or 0.
  uint64_t any(SeqLocation where) {
    std::vector<uint64_t> ids;
    for (const auto& [id, sh] : seqs_)
      if (sh.where == where) ids.push_back(id);
    return ids.empty() ? 0 : ids[size_t(pick(0, int(ids.size()) - 1))];
  }

  Tokens random_prompt() {
    Tokens t;
    if (!prompts_.empty() && pick(0, 1) == 0) {  // share a prefix of an earlier prompt
      const Tokens& old = prompts_[size_t(pick(0, int(prompts_.size()) - 1))];
      t.assign(old.begin(), old.begin() + pick(1, int(old.size())));
    }
    int extra = pick(t.empty() ? 1 : 0, 3 * bs_);
    for (int i = 0; i < extra; ++i) t.push_back(pick(1, 3));
    t.resize(std::min<size_t>(t.size(), size_t(bm_.num_blocks() * bs_ / 2 + 1)));
    return t;
  }

  Tokens random_tokens() {
    Tokens t(size_t(pick(1, 4)));
    for (int32_t& x : t) x = pick(1, 3);
    return t;
  }

  void accept_prompt(uint64_t id, const Tokens& tokens, int32_t cached) {
    ASSERT_GE(cached, 0);
    ASSERT_LE(cached, int32_t(tokens.size()) - 1) << "a prompt's last token must be computed";
    ASSERT_EQ(cached % bs_, 0);
    auto table = bm_.block_table(id);
    ASSERT_EQ(int32_t(table.size()), (int32_t(tokens.size()) + bs_ - 1) / bs_);
    for (int32_t p = 0; p < cached; ++p)
      ASSERT_EQ(kv_[slot(table[size_t(p / bs_)], p)], prefix_kv(tokens, size_t(p)))
          << "prefix hit on a block with the wrong KV at position " << p;
    seqs_[id] = Shadow{tokens, cached, SeqLocation::device};
    remember(tokens);
  }

  void new_prompt() {
    uint64_t id = next_id_++;
    Tokens t = random_prompt();
    int32_t before = bm_.num_available_blocks();
    auto r = bm_.allocate_prompt(id, t);
    ASSERT_TRUE(r.has_value());
    if (!r->ok()) {
      ASSERT_GT(r->shortfall, 0);
      ASSERT_FALSE(bm_.contains(id));
      ASSERT_EQ(bm_.num_available_blocks(), before);
      return;
    }
    accept_prompt(id, t, r->num_cached_tokens);
  }

  void run_copy(const BlockCopy& c, const std::vector<uint64_t>& from, std::vector<uint64_t>& to) {
    for (int32_t i = 0; i < bs_; ++i) to[size_t(c.dst) * bs_ + i] = from[size_t(c.src) * bs_ + i];
  }

  void accept_append(uint64_t id, const Tokens& t, std::vector<BlockId> old_table, int32_t begin,
                     std::span<const BlockId> changed) {
    old_table.resize(size_t(begin));
    old_table.insert(old_table.end(), changed.begin(), changed.end());
    auto now = bm_.block_table(id);
    ASSERT_EQ(old_table, std::vector<BlockId>(now.begin(), now.end()));
    Shadow& sh = seqs_[id];
    sh.tokens.insert(sh.tokens.end(), t.begin(), t.end());
  }

  void append() {
    uint64_t id = any(SeqLocation::device);
    if (id == 0) return;
    Tokens t = random_tokens();
    auto old = bm_.block_table(id);
    std::vector<BlockId> old_table(old.begin(), old.end());
    int32_t need = bm_.blocks_needed_to_append(id, int32_t(t.size()));
    auto r = bm_.append_slots(id, t);
    ASSERT_TRUE(r.has_value());
    if (!r->ok()) {
      ASSERT_EQ(r->shortfall, need - bm_.num_available_blocks());
      return;
    }
    if (r->copy) run_copy(*r->copy, kv_, kv_);
    accept_append(id, t, old_table, r->table_begin, r->changed);
  }

  // The executor computes some of a sequence's pending tokens.
  int32_t execute(uint64_t id) {
    Shadow& sh = seqs_[id];
    int32_t n = pick(sh.computed, int32_t(sh.tokens.size()));
    auto table = bm_.block_table(id);
    for (int32_t p = sh.computed; p < n; ++p)
      kv_[slot(table[size_t(p / bs_)], p)] = prefix_kv(sh.tokens, size_t(p));
    sh.computed = n;
    return n;
  }

  void compute() {
    uint64_t id = any(SeqLocation::device);
    if (id == 0) return;
    ASSERT_TRUE(bm_.commit_computed(id, execute(id)).is_ok());
  }

  void fork() {
    uint64_t parent = any(SeqLocation::device);
    if (parent == 0) return;
    uint64_t child = next_id_++;
    ASSERT_TRUE(bm_.fork(parent, child).is_ok());
    seqs_[child] = seqs_[parent];
  }

  void free_one() {
    if (seqs_.empty()) return;
    auto it = std::next(seqs_.begin(), pick(0, int(seqs_.size()) - 1));
    ASSERT_TRUE(bm_.free(it->first).is_ok());
    remember(it->second.tokens);  // later prompts may continue a finished sequence
    seqs_.erase(it);
  }

  void remember(const Tokens& t) {
    prompts_.push_back(t);
    if (prompts_.size() > 16) prompts_.erase(prompts_.begin());
  }

  void swap_out() {
    uint64_t id = any(SeqLocation::device);
    if (id == 0) return;
    auto r = bm_.swap_out(id);
    ASSERT_TRUE(r.has_value());
    if (!r->ok()) return;
    for (const BlockCopy& c : r->copies) run_copy(c, kv_, host_kv_);
    seqs_[id].where = SeqLocation::swapping_out;
  }

  void swap_in() {
    uint64_t id = any(SeqLocation::host);
    if (id == 0) return;
    bool could = bm_.can_swap_in(id);
    auto r = bm_.swap_in(id);
    ASSERT_TRUE(r.has_value());
    ASSERT_EQ(could, r->ok());
    if (!r->ok()) return;
    for (const BlockCopy& c : r->copies) run_copy(c, host_kv_, kv_);
    seqs_[id].where = SeqLocation::swapping_in;
  }

  void complete(SeqLocation from) {
    uint64_t id = any(from);
    if (id == 0) return;
    if (from == SeqLocation::swapping_out) {
      ASSERT_TRUE(bm_.complete_swap_out(id).is_ok());
      seqs_[id].where = SeqLocation::host;
    } else {
      ASSERT_TRUE(bm_.complete_swap_in(id).is_ok());
      seqs_[id].where = SeqLocation::device;
    }
  }

  // One iteration's batch: appends (with the previous step's commit) for some
  // running sequences, then a new prompt or two.
  void batch() {
    std::vector<SlotRequest> reqs;
    std::vector<Tokens> storage;
    std::vector<std::vector<BlockId>> old_tables;
    storage.reserve(16);
    for (const auto& [id, sh] : seqs_) {
      if (sh.where != SeqLocation::device || pick(0, 2) != 0) continue;
      storage.push_back(random_tokens());
      auto t = bm_.block_table(id);
      old_tables.emplace_back(t.begin(), t.end());
      reqs.push_back({id, SlotOp::append, storage.back(), -1});
      if (storage.size() >= 6) break;
    }
    for (SlotRequest& r : reqs) r.num_computed = execute(r.seq_id);
    for (int i = pick(0, 2); i > 0; --i) {
      storage.push_back(random_prompt());
      reqs.push_back({next_id_++, SlotOp::prompt, storage.back(), -1});
    }
    // An id nobody holds: answered, never fatal.
    reqs.push_back({next_id_++, SlotOp::append,
                    storage.empty() ? std::span<const int32_t>() : std::span<const int32_t>(storage[0])});
    const bool stop = pick(0, 1) == 0;
    bm_.allocate_batch(reqs, out_, stop ? OnShortfall::stop : OnShortfall::keep_going);
    ASSERT_EQ(out_.grants.size(), reqs.size());
    for (const BlockCopy& c : out_.copies) run_copy(c, kv_, kv_);
    bool stopped = false;
    for (size_t i = 0; i < reqs.size(); ++i) {
      const SlotGrant& g = out_.grants[i];
      const SlotRequest& r = reqs[i];
      ASSERT_EQ(g.seq_id, r.seq_id);
      ASSERT_EQ(g.status == GrantStatus::skipped, stopped) << "request " << i;
      if (g.status == GrantStatus::short_of_blocks) {
        ASSERT_GT(g.shortfall, 0);
        if (r.op == SlotOp::prompt) {
          ASSERT_FALSE(bm_.contains(r.seq_id));
        }
        stopped = stop;
      }
      if (i + 1 == reqs.size() && !stopped) {
        ASSERT_EQ(g.status, GrantStatus::unknown_sequence);
      }
      if (!g.ok()) continue;
      Tokens t(r.tokens.begin(), r.tokens.end());
      if (r.op == SlotOp::prompt) accept_prompt(r.seq_id, t, g.num_cached_tokens);
      else accept_append(r.seq_id, t, old_tables[i], g.table_begin, out_.changed(g));
    }
  }

  BlockManager bm_;
  int32_t bs_;
  std::vector<uint64_t> kv_;       // [num_blocks * block_size] simulated KV
  std::vector<uint64_t> host_kv_;  // [num_host_blocks * block_size]
  std::map<uint64_t, Shadow> seqs_;
  std::vector<Tokens> prompts_;
  std::mt19937_64 rng_;
  uint64_t next_id_ = 1;
  SlotBatchResult out_;
};

class BlockManagerStress : public ::testing::TestWithParam<Config> {};

TEST_P(BlockManagerStress, RandomOperationsKeepEveryInvariant) {
  Harness h(GetParam());
  const int64_t ops = ops_per_config();
  for (int64_t i = 0; i < ops; ++i) {
    h.step();
    h.check(i);
    if (::testing::Test::HasFatalFailure()) return;
  }
  BlockManagerStats mid = h.bm().stats();
  std::printf("hits %llu/%llu blocks, evictions %llu, cow %llu, swapped in %llu, prompts %llu\n",
              (unsigned long long)mid.hit_blocks, (unsigned long long)mid.query_blocks,
              (unsigned long long)mid.evictions, (unsigned long long)mid.cow_copies,
              (unsigned long long)mid.swapped_in_blocks, (unsigned long long)mid.prefix_queries);
  h.free_all();
  ASSERT_TRUE(h.bm().check_invariants().is_ok());
  BlockManagerStats end = h.bm().stats();
  EXPECT_EQ(end.used_blocks, 0);
  EXPECT_EQ(end.free_blocks + end.cached_blocks, end.total_blocks);
  EXPECT_EQ(end.host_used_blocks, 0);
  // The run really exercised the interesting paths.
  if (GetParam().block_size > 1) {  // with one slot per block no block is ever partly filled
    EXPECT_GT(mid.cow_copies, 0u);
  }
  if (GetParam().num_host_blocks > 0) {
    EXPECT_GT(mid.swapped_in_blocks, 0u);
  }
  if (GetParam().prefix_caching) {
    EXPECT_GT(mid.hit_blocks, 0u);
    EXPECT_GT(mid.evictions, 0u);
  } else {
    EXPECT_EQ(end.cached_blocks, 0);
  }
}

INSTANTIATE_TEST_SUITE_P(
    TinyPools, BlockManagerStress,
    ::testing::Values(Config{12, 2, true, 6, 1}, Config{16, 4, true, 8, 2}, Config{10, 1, true, 4, 3},
                      Config{12, 2, false, 6, 4}, Config{8, 2, true, 0, 5}),
    [](const ::testing::TestParamInfo<Config>& info) {
      const Config& c = info.param;
      return "blocks" + std::to_string(c.num_blocks) + "_size" + std::to_string(c.block_size) +
             (c.prefix_caching ? "_prefix" : "_noprefix") + "_host" +
             std::to_string(c.num_host_blocks);
    });

}  // namespace
}  // namespace conveyor
