#include "engine/block_manager.hpp"

#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <vector>

namespace conveyor {
namespace {

using Tokens = std::vector<int32_t>;

Tokens iota_tokens(int n, int32_t first = 100) {
  Tokens t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), first);
  return t;
}

Tokens concat(Tokens a, const Tokens& b) {
  a.insert(a.end(), b.begin(), b.end());
  return a;
}

std::vector<BlockId> table_of(const BlockManager& bm, uint64_t id) {
  auto t = bm.block_table(id);
  return {t.begin(), t.end()};
}

#define EXPECT_CONSISTENT(bm)                                                 \
  do {                                                                        \
    Status s_ = (bm).check_invariants();                                      \
    EXPECT_TRUE(s_.is_ok()) << (s_.is_ok() ? "" : s_.error().message);       \
  } while (0)

// Allocates and asserts success.
PromptAllocation must_prompt(BlockManager& bm, uint64_t id, const Tokens& tokens) {
  auto r = bm.allocate_prompt(id, tokens);
  EXPECT_TRUE(r.has_value());
  if (!r) return {};
  EXPECT_TRUE(r->ok()) << "shortfall " << r->shortfall;
  return *r;
}

AppendResult must_append(BlockManager& bm, uint64_t id, const Tokens& tokens) {
  auto r = bm.append_slots(id, tokens);
  EXPECT_TRUE(r.has_value());
  if (!r) return {};
  EXPECT_TRUE(r->ok()) << "shortfall " << r->shortfall;
  return *r;
}

TEST(BlockManager, PromptTakesCeilOfTokensOverBlockSize) {
  BlockManager bm(8, 4, false);
  PromptAllocation a = must_prompt(bm, 1, iota_tokens(10));
  EXPECT_EQ(a.block_table, (std::vector<BlockId>{0, 1, 2}));
  EXPECT_EQ(a.num_cached_tokens, 0);
  EXPECT_EQ(bm.num_tokens(1), 10);
  EXPECT_EQ(bm.num_computed(1), 0);
  BlockManagerStats s = bm.stats();
  EXPECT_EQ(s.total_blocks, 8);
  EXPECT_EQ(s.used_blocks, 3);
  EXPECT_EQ(s.free_blocks, 5);
  EXPECT_EQ(s.cached_blocks, 0);
  EXPECT_DOUBLE_EQ(s.kv_usage_ratio(), 3.0 / 8.0);
  // The tokens are recorded in the blocks' slots.
  EXPECT_EQ(bm.block_tokens(2)[0], 108);
  EXPECT_EQ(bm.block_tokens(2)[1], 109);
  EXPECT_CONSISTENT(bm);
}

TEST(BlockManager, PromptShortfallChangesNothing) {
  BlockManager bm(4, 4, true);
  must_prompt(bm, 1, iota_tokens(12));  // 3 blocks
  auto r = bm.allocate_prompt(2, iota_tokens(9, 500));  // needs 3, 1 available
  ASSERT_TRUE(r.has_value());
  EXPECT_FALSE(r->ok());
  EXPECT_EQ(r->shortfall, 2);
  EXPECT_TRUE(r->block_table.empty());
  EXPECT_FALSE(bm.contains(2));
  EXPECT_EQ(bm.num_free_blocks(), 1);
  EXPECT_EQ(bm.stats().prefix_queries, 1u);  // only the successful call counts
  EXPECT_CONSISTENT(bm);
}

TEST(BlockManager, MisuseIsAnErrorValue) {
  BlockManager bm(4, 4, true, 2);
  must_prompt(bm, 1, iota_tokens(3));
  EXPECT_FALSE(bm.allocate_prompt(1, iota_tokens(3)).has_value());   // duplicate id
  EXPECT_FALSE(bm.allocate_prompt(2, Tokens{}).has_value());         // empty prompt
  EXPECT_FALSE(bm.append_slots(7, iota_tokens(1)).has_value());      // unknown
  EXPECT_FALSE(bm.free(7).is_ok());
  EXPECT_FALSE(bm.fork(7, 8).is_ok());
  EXPECT_FALSE(bm.fork(1, 1).is_ok());                               // child exists
  EXPECT_FALSE(bm.commit_computed(1, 4).is_ok());                    // beyond its tokens
  EXPECT_TRUE(bm.commit_computed(1, 2).is_ok());
  EXPECT_FALSE(bm.commit_computed(1, 1).is_ok());                    // backwards
  EXPECT_FALSE(bm.swap_in(1).has_value());                           // not on host
  EXPECT_FALSE(bm.complete_swap_out(1).is_ok());                     // not swapping
  EXPECT_TRUE(bm.free(1).is_ok());
  EXPECT_FALSE(bm.free(1).is_ok());                                  // double free
  EXPECT_EQ(bm.num_free_blocks(), 4);
  EXPECT_CONSISTENT(bm);
}

TEST(BlockManager, AppendFillsTheLastBlockThenTakesNewOnes) {
  BlockManager bm(8, 4, false);
  must_prompt(bm, 1, iota_tokens(6));  // blocks 0 (full), 1 (2 of 4)
  AppendResult a = must_append(bm, 1, {7});
  EXPECT_EQ(a.table_begin, 2);
  EXPECT_TRUE(a.changed.empty());
  EXPECT_FALSE(a.copy.has_value());
  a = must_append(bm, 1, {8, 9, 10, 11, 12, 13});  // 1 slot left, then 5 more: 2 blocks
  EXPECT_EQ(a.table_begin, 2);
  EXPECT_EQ(a.changed, (std::vector<BlockId>{2, 3}));
  EXPECT_EQ(bm.num_tokens(1), 13);
  EXPECT_EQ(table_of(bm, 1), (std::vector<BlockId>{0, 1, 2, 3}));
  EXPECT_EQ(bm.block_tokens(3)[0], 13);
  EXPECT_EQ(bm.blocks_needed_to_append(1, 3), 0);
  EXPECT_EQ(bm.blocks_needed_to_append(1, 4), 1);
  EXPECT_EQ(bm.blocks_needed_to_append(1, 8), 2);
  EXPECT_CONSISTENT(bm);
}

TEST(BlockManager, AppendShortfallChangesNothing) {
  BlockManager bm(3, 2, false);
  must_prompt(bm, 1, iota_tokens(4));  // 2 blocks, both full
  auto r = bm.append_slots(1, iota_tokens(3, 9));  // needs 2, 1 free
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->shortfall, 1);
  EXPECT_EQ(bm.num_tokens(1), 4);
  EXPECT_EQ(bm.num_free_blocks(), 1);
  EXPECT_CONSISTENT(bm);
}

TEST(BlockManager, PrefixHitNeedsComputedBlocks) {
  BlockManager bm(16, 4, true);
  Tokens prompt = iota_tokens(10);
  must_prompt(bm, 1, prompt);
  // Reserved but not computed: a second request must not reuse them.
  EXPECT_EQ(must_prompt(bm, 2, prompt).num_cached_tokens, 0);
  ASSERT_TRUE(bm.commit_computed(1, 10).is_ok());  // blocks 0, 1 full and computed
  Tokens other = concat(iota_tokens(8), {1, 2, 3, 4, 5});
  PromptAllocation c = must_prompt(bm, 3, other);
  EXPECT_EQ(c.num_cached_tokens, 8);
  auto t1 = table_of(bm, 1);
  ASSERT_EQ(c.block_table.size(), 4u);
  EXPECT_EQ(c.block_table[0], t1[0]);
  EXPECT_EQ(c.block_table[1], t1[1]);
  EXPECT_NE(c.block_table[2], t1[2]);
  EXPECT_EQ(bm.num_computed(3), 8);
  BlockManagerStats s = bm.stats();
  EXPECT_EQ(s.prefix_queries, 3u);
  EXPECT_EQ(s.query_blocks, 2u + 2u + 3u);
  EXPECT_EQ(s.hit_blocks, 2u);
  EXPECT_EQ(s.hit_tokens, 8u);
  EXPECT_EQ(s.query_tokens, 10u + 10u + 13u);
  EXPECT_CONSISTENT(bm);
}

TEST(BlockManager, PromptNeverHitsItsLastToken) {
  BlockManager bm(16, 4, true);
  Tokens prompt = iota_tokens(8);  // exactly two full blocks
  must_prompt(bm, 1, prompt);
  ASSERT_TRUE(bm.commit_computed(1, 8).is_ok());
  PromptAllocation b = must_prompt(bm, 2, prompt);
  EXPECT_EQ(b.num_cached_tokens, 4);  // the block holding the last token is recomputed
  EXPECT_EQ(b.block_table[0], table_of(bm, 1)[0]);
  EXPECT_NE(b.block_table[1], table_of(bm, 1)[1]);
  // One token longer: both full blocks are eligible.
  EXPECT_EQ(must_prompt(bm, 3, concat(prompt, {1})).num_cached_tokens, 8);
  EXPECT_CONSISTENT(bm);
}

TEST(BlockManager, FreedBlocksStayCachedAndAreReused) {
  BlockManager bm(8, 4, true);
  Tokens prompt = iota_tokens(10);
  std::vector<BlockId> first = must_prompt(bm, 1, prompt).block_table;
  ASSERT_TRUE(bm.commit_computed(1, 10).is_ok());
  ASSERT_TRUE(bm.free(1).is_ok());
  BlockManagerStats s = bm.stats();
  EXPECT_EQ(s.cached_blocks, 2);  // the two full computed blocks
  EXPECT_EQ(s.free_blocks, 6);
  EXPECT_EQ(s.used_blocks, 0);
  EXPECT_EQ(bm.num_available_blocks(), 8);
  PromptAllocation again = must_prompt(bm, 2, prompt);
  EXPECT_EQ(again.num_cached_tokens, 8);
  EXPECT_EQ(again.block_table[0], first[0]);
  EXPECT_EQ(again.block_table[1], first[1]);
  EXPECT_EQ(bm.stats().cached_blocks, 0);
  EXPECT_CONSISTENT(bm);
}

TEST(BlockManager, SameTokensUnderAnotherParentDoNotHit) {
  BlockManager bm(16, 2, true);
  must_prompt(bm, 1, {1, 2, 5, 6, 9});
  ASSERT_TRUE(bm.commit_computed(1, 5).is_ok());
  PromptAllocation b = must_prompt(bm, 2, {3, 4, 5, 6, 9});
  EXPECT_EQ(b.num_cached_tokens, 0);
  EXPECT_CONSISTENT(bm);
}

TEST(BlockManager, EvictsLeastRecentlyUsedFirst) {
  // 4 blocks of 2 slots. A = [1 2 | 3 4 | 5]: two cacheable blocks.
  BlockManager bm(4, 2, true);
  Tokens a = {1, 2, 3, 4, 5};
  auto ta = must_prompt(bm, 1, a).block_table;
  ASSERT_TRUE(bm.commit_computed(1, 5).is_ok());
  ASSERT_TRUE(bm.free(1).is_ok());
  EXPECT_EQ(bm.num_cached_blocks(), 2);
  // B takes 3 blocks: the 2 free ones, then evicts one cached block. A was
  // freed last block first, so its tail [3 4] is the least recent.
  auto tb = must_prompt(bm, 2, {7, 8, 9, 10, 11}).block_table;
  EXPECT_EQ(bm.stats().evictions, 1u);
  EXPECT_NE(std::find(tb.begin(), tb.end(), ta[1]), tb.end());
  EXPECT_EQ(std::find(tb.begin(), tb.end(), ta[0]), tb.end());
  ASSERT_TRUE(bm.free(2).is_ok());
  // A's prefix now hits only its first block; the evicted one, reused for
  // B's tokens, must not be returned for [3 4].
  PromptAllocation again = must_prompt(bm, 3, a);
  EXPECT_EQ(again.num_cached_tokens, 2);
  EXPECT_EQ(again.block_table[0], ta[0]);
  EXPECT_EQ(bm.block_tokens(again.block_table[1])[0], 3);
  EXPECT_CONSISTENT(bm);
}

TEST(BlockManager, EvictionFollowsRecencyAcrossSequences) {
  BlockManager bm(6, 2, true);
  auto tx = must_prompt(bm, 1, {1, 1, 9}).block_table;
  auto ty = must_prompt(bm, 2, {2, 2, 9}).block_table;
  ASSERT_TRUE(bm.commit_computed(1, 3).is_ok());
  ASSERT_TRUE(bm.commit_computed(2, 3).is_ok());
  ASSERT_TRUE(bm.free(1).is_ok());  // X cached first: older
  ASSERT_TRUE(bm.free(2).is_ok());
  // Hitting X makes it recent again; Y is now the LRU one.
  must_prompt(bm, 3, {1, 1, 7});
  ASSERT_TRUE(bm.free(3).is_ok());
  // 6 blocks: 4 free + X0 + Y0 cached. Taking 5 fresh evicts exactly one: Y0.
  must_prompt(bm, 4, iota_tokens(10, 50));
  EXPECT_EQ(bm.stats().evictions, 1u);
  ASSERT_TRUE(bm.free(4).is_ok());
  EXPECT_EQ(must_prompt(bm, 5, {1, 1, 3}).num_cached_tokens, 2);
  EXPECT_EQ(must_prompt(bm, 6, {2, 2, 3}).num_cached_tokens, 0);
  EXPECT_CONSISTENT(bm);
}

TEST(BlockManager, DuplicateContentIsCachedOnce) {
  BlockManager bm(8, 2, true);
  Tokens p = {1, 2, 3, 4, 5};
  auto t1 = must_prompt(bm, 1, p).block_table;
  auto t2 = must_prompt(bm, 2, p).block_table;  // computed separately: no sharing
  ASSERT_TRUE(bm.commit_computed(1, 5).is_ok());
  ASSERT_TRUE(bm.commit_computed(2, 5).is_ok());
  ASSERT_TRUE(bm.free(1).is_ok());
  EXPECT_EQ(bm.num_cached_blocks(), 2);
  ASSERT_TRUE(bm.free(2).is_ok());  // its copies are duplicates: freed outright
  EXPECT_EQ(bm.num_cached_blocks(), 2);
  EXPECT_EQ(bm.num_free_blocks(), 6);
  EXPECT_EQ(must_prompt(bm, 3, p).block_table[0], t1[0]);
  EXPECT_CONSISTENT(bm);
}

TEST(BlockManager, DuplicateTakesOverWhenTheOriginalIsEvicted) {
  BlockManager bm(6, 2, true);
  Tokens p = {1, 2, 3};
  auto t1 = must_prompt(bm, 1, p).block_table;
  auto t2 = must_prompt(bm, 2, p).block_table;
  ASSERT_TRUE(bm.commit_computed(1, 3).is_ok());
  ASSERT_TRUE(bm.commit_computed(2, 3).is_ok());
  ASSERT_TRUE(bm.free(1).is_ok());       // t1[0] cached, t1[1] free
  must_prompt(bm, 3, iota_tokens(8, 40));  // 4 blocks: 3 free + evicts t1[0]
  EXPECT_EQ(bm.stats().evictions, 1u);
  ASSERT_TRUE(bm.free(2).is_ok());       // t2[0] now represents [1 2]
  EXPECT_EQ(bm.num_cached_blocks(), 1);
  PromptAllocation again = must_prompt(bm, 4, p);
  EXPECT_EQ(again.num_cached_tokens, 2);
  EXPECT_EQ(again.block_table[0], t2[0]);
  EXPECT_CONSISTENT(bm);
}

TEST(BlockManager, ForkSharesBlocksAndCopiesOnWrite) {
  BlockManager bm(8, 4, true);
  auto parent = must_prompt(bm, 1, iota_tokens(6)).block_table;  // b0 full, b1 half
  ASSERT_TRUE(bm.commit_computed(1, 6).is_ok());
  ASSERT_TRUE(bm.fork(1, 2).is_ok());
  EXPECT_EQ(table_of(bm, 2), parent);
  EXPECT_EQ(bm.num_tokens(2), 6);
  EXPECT_EQ(bm.num_computed(2), 6);
  EXPECT_EQ(bm.stats().used_blocks, 2);
  EXPECT_EQ(bm.blocks_needed_to_append(2, 1), 1);  // the copy

  AppendResult a = must_append(bm, 2, {7});
  ASSERT_TRUE(a.copy.has_value());
  EXPECT_EQ(a.copy->src, parent[1]);
  EXPECT_EQ(a.table_begin, 1);
  ASSERT_EQ(a.changed.size(), 1u);
  BlockId mine = a.changed[0];
  EXPECT_EQ(a.copy->dst, mine);
  EXPECT_EQ(table_of(bm, 2), (std::vector<BlockId>{parent[0], mine}));
  EXPECT_EQ(table_of(bm, 1), parent);  // the parent keeps its blocks
  // The copy carries the shared tokens, then the child's own.
  auto toks = bm.block_tokens(mine);
  EXPECT_EQ((std::vector<int32_t>(toks.begin(), toks.begin() + 3)), (std::vector<int32_t>{104, 105, 7}));
  EXPECT_EQ(bm.stats().cow_copies, 1u);

  // The parent is now the only holder of its last block: no copy.
  AppendResult b = must_append(bm, 1, {9});
  EXPECT_FALSE(b.copy.has_value());
  EXPECT_EQ(bm.block_tokens(parent[1])[2], 9);
  EXPECT_CONSISTENT(bm);

  ASSERT_TRUE(bm.free(1).is_ok());
  ASSERT_TRUE(bm.free(2).is_ok());
  EXPECT_EQ(bm.stats().used_blocks, 0);
  EXPECT_CONSISTENT(bm);
}

TEST(BlockManager, ForkOfAFullLastBlockNeedsNoCopy) {
  BlockManager bm(8, 4, false);
  must_prompt(bm, 1, iota_tokens(8));
  ASSERT_TRUE(bm.fork(1, 2).is_ok());
  AppendResult a = must_append(bm, 2, {1});
  EXPECT_FALSE(a.copy.has_value());
  EXPECT_EQ(a.table_begin, 2);
  EXPECT_EQ(a.changed.size(), 1u);
  EXPECT_EQ(bm.stats().used_blocks, 3);
  EXPECT_CONSISTENT(bm);
}

TEST(BlockManager, ForkedPrefixRegisteredOnceByEitherSequence) {
  BlockManager bm(8, 2, true);
  must_prompt(bm, 1, {1, 2, 3});
  ASSERT_TRUE(bm.fork(1, 2).is_ok());
  ASSERT_TRUE(bm.commit_computed(2, 3).is_ok());  // the child commits first
  ASSERT_TRUE(bm.commit_computed(1, 3).is_ok());
  EXPECT_CONSISTENT(bm);
  EXPECT_EQ(must_prompt(bm, 3, {1, 2, 4}).num_cached_tokens, 2);
}

TEST(BlockManager, SwapOutAndInMoveEveryBlock) {
  BlockManager bm(6, 4, true, 4);
  Tokens p = iota_tokens(10);
  auto device = must_prompt(bm, 1, p).block_table;
  ASSERT_TRUE(bm.commit_computed(1, 10).is_ok());

  auto out = bm.swap_out(1);
  ASSERT_TRUE(out.has_value());
  ASSERT_TRUE(out->ok());
  ASSERT_EQ(out->copies.size(), 3u);
  for (size_t i = 0; i < 3; ++i) EXPECT_EQ(out->copies[i].src, device[i]);
  EXPECT_EQ(bm.location(1), SeqLocation::swapping_out);
  // Until the copies land both copies are held.
  EXPECT_EQ(bm.stats().used_blocks, 3);
  EXPECT_EQ(bm.stats().host_used_blocks, 3);
  EXPECT_FALSE(bm.append_slots(1, Tokens{1}).has_value());
  EXPECT_CONSISTENT(bm);

  ASSERT_TRUE(bm.complete_swap_out(1).is_ok());
  EXPECT_EQ(bm.location(1), SeqLocation::host);
  EXPECT_TRUE(bm.block_table(1).empty());
  EXPECT_EQ(bm.host_block_table(1).size(), 3u);
  EXPECT_EQ(bm.stats().used_blocks, 0);
  EXPECT_EQ(bm.stats().cached_blocks, 2);  // its computed full blocks stay reusable
  EXPECT_EQ(bm.stats().host_free_blocks, 1);
  EXPECT_TRUE(bm.can_swap_in(1));
  EXPECT_CONSISTENT(bm);

  auto in = bm.swap_in(1);
  ASSERT_TRUE(in.has_value());
  ASSERT_TRUE(in->ok());
  ASSERT_EQ(in->copies.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ(in->copies[i].src, out->copies[i].dst);
    EXPECT_EQ(in->copies[i].dst, bm.block_table(1)[i]);
  }
  EXPECT_EQ(bm.location(1), SeqLocation::swapping_in);
  EXPECT_FALSE(bm.append_slots(1, Tokens{1}).has_value());  // rejoins only after the copy
  EXPECT_CONSISTENT(bm);
  ASSERT_TRUE(bm.complete_swap_in(1).is_ok());
  EXPECT_EQ(bm.location(1), SeqLocation::device);
  EXPECT_EQ(bm.stats().host_used_blocks, 0);
  EXPECT_EQ(bm.num_tokens(1), 10);
  EXPECT_EQ(bm.num_computed(1), 10);
  EXPECT_EQ(bm.block_tokens(bm.block_table(1)[2])[1], 109);
  must_append(bm, 1, {1, 2});
  EXPECT_EQ(bm.stats().swapped_out_blocks, 3u);
  EXPECT_EQ(bm.stats().swapped_in_blocks, 3u);
  EXPECT_CONSISTENT(bm);
}

TEST(BlockManager, SwapShortfalls) {
  BlockManager bm(4, 4, false, 2);
  must_prompt(bm, 1, iota_tokens(12));  // 3 blocks
  auto out = bm.swap_out(1);
  ASSERT_TRUE(out.has_value());
  EXPECT_EQ(out->shortfall, 1);  // 2 host blocks for 3
  EXPECT_EQ(bm.location(1), SeqLocation::device);
  EXPECT_EQ(bm.stats().host_used_blocks, 0);

  must_prompt(bm, 2, iota_tokens(4));
  ASSERT_TRUE(bm.free(1).is_ok());
  must_prompt(bm, 3, iota_tokens(5));  // 2 blocks
  ASSERT_TRUE(bm.swap_out(3)->ok());
  ASSERT_TRUE(bm.complete_swap_out(3).is_ok());
  must_prompt(bm, 4, iota_tokens(12));  // 3 blocks: device is full
  EXPECT_FALSE(bm.can_swap_in(3));
  auto in = bm.swap_in(3);
  ASSERT_TRUE(in.has_value());
  EXPECT_EQ(in->shortfall, 2);
  EXPECT_EQ(bm.location(3), SeqLocation::host);
  EXPECT_CONSISTENT(bm);
}

TEST(BlockManager, FreeDuringASwapReleasesBothSides) {
  BlockManager bm(4, 4, false, 4);
  must_prompt(bm, 1, iota_tokens(8));
  ASSERT_TRUE(bm.swap_out(1)->ok());
  ASSERT_TRUE(bm.free(1).is_ok());
  EXPECT_EQ(bm.num_free_blocks(), 4);
  EXPECT_EQ(bm.num_free_host_blocks(), 4);
  must_prompt(bm, 2, iota_tokens(8));
  ASSERT_TRUE(bm.swap_out(2)->ok());
  ASSERT_TRUE(bm.complete_swap_out(2).is_ok());
  ASSERT_TRUE(bm.swap_in(2)->ok());
  ASSERT_TRUE(bm.free(2).is_ok());
  EXPECT_EQ(bm.num_free_blocks(), 4);
  EXPECT_EQ(bm.num_free_host_blocks(), 4);
  EXPECT_CONSISTENT(bm);
}

TEST(BlockManager, SwappedInBlocksAreRegisteredAgain) {
  BlockManager bm(4, 2, true, 4);
  must_prompt(bm, 1, {1, 2, 3, 4, 5});
  ASSERT_TRUE(bm.commit_computed(1, 5).is_ok());
  ASSERT_TRUE(bm.swap_out(1)->ok());
  ASSERT_TRUE(bm.complete_swap_out(1).is_ok());
  must_prompt(bm, 2, iota_tokens(8, 30));  // evicts everything cached
  ASSERT_TRUE(bm.free(2).is_ok());
  ASSERT_TRUE(bm.swap_in(1)->ok());
  ASSERT_TRUE(bm.complete_swap_in(1).is_ok());
  EXPECT_EQ(must_prompt(bm, 3, {1, 2, 3, 4, 9}).num_cached_tokens, 4);
  EXPECT_CONSISTENT(bm);
}

TEST(BlockManager, PrefixCachingOffNeverCaches) {
  BlockManager bm(8, 4, false);
  Tokens p = iota_tokens(10);
  must_prompt(bm, 1, p);
  ASSERT_TRUE(bm.commit_computed(1, 10).is_ok());
  ASSERT_TRUE(bm.free(1).is_ok());
  EXPECT_EQ(bm.num_cached_blocks(), 0);
  EXPECT_EQ(bm.num_free_blocks(), 8);
  EXPECT_EQ(must_prompt(bm, 2, p).num_cached_tokens, 0);
  EXPECT_EQ(bm.stats().prefix_queries, 0u);
  EXPECT_CONSISTENT(bm);
}

TEST(BlockManager, BatchIsAllOrNothingPerRequest) {
  BlockManager bm(6, 2, true);
  must_prompt(bm, 1, {1, 2, 3});  // 2 blocks, last half full
  ASSERT_TRUE(bm.fork(1, 2).is_ok());
  Tokens big = iota_tokens(9, 20);  // 5 blocks: cannot fit
  Tokens small = {7, 8, 9};         // 2 blocks
  Tokens one = {4}, four = {5, 6, 7, 8};
  std::vector<SlotRequest> reqs = {
      {1, SlotOp::append, one, 3},  // commit 3, fill the shared block: copy
      {9, SlotOp::append, one},     // unknown
      {3, SlotOp::prompt, big},     // short
      {4, SlotOp::prompt, small},   // fits
      {2, SlotOp::append, four},    // 1 slot in place (no longer shared), then 2 blocks: short
  };
  SlotBatchResult out;
  bm.allocate_batch(reqs, out);
  ASSERT_EQ(out.grants.size(), 5u);
  EXPECT_EQ(out.grants[0].status, GrantStatus::ok);
  EXPECT_EQ(out.grants[1].status, GrantStatus::unknown_sequence);
  EXPECT_EQ(out.grants[2].status, GrantStatus::short_of_blocks);
  EXPECT_EQ(out.grants[2].shortfall, 2);  // 5 needed, 3 available then
  EXPECT_EQ(out.grants[3].status, GrantStatus::ok);
  EXPECT_EQ(out.grants[4].status, GrantStatus::short_of_blocks);
  EXPECT_EQ(out.grants[4].shortfall, 1);
  EXPECT_FALSE(bm.contains(3));
  EXPECT_EQ(bm.num_tokens(2), 3);
  EXPECT_EQ(bm.num_computed(1), 3);
  ASSERT_EQ(out.copies.size(), 1u);
  EXPECT_EQ(out.shortfall, 6);  // 5 + 1 wanted, nothing left

  // Applying the changed entries to the old table yields the new table.
  std::vector<BlockId> t1 = {0, 1};
  t1.resize(size_t(out.grants[0].table_begin));
  auto c = out.changed(out.grants[0]);
  t1.insert(t1.end(), c.begin(), c.end());
  EXPECT_EQ(t1, table_of(bm, 1));
  auto c4 = out.changed(out.grants[3]);
  EXPECT_EQ(std::vector<BlockId>(c4.begin(), c4.end()), table_of(bm, 4));
  EXPECT_CONSISTENT(bm);

  // Stop mode: after the first shortfall nothing else is tried.
  std::vector<SlotRequest> again = {{3, SlotOp::prompt, big}, {2, SlotOp::append, one}};
  bm.allocate_batch(again, out, OnShortfall::stop);
  ASSERT_EQ(out.grants.size(), 2u);
  EXPECT_EQ(out.grants[0].status, GrantStatus::short_of_blocks);
  EXPECT_EQ(out.grants[1].status, GrantStatus::skipped);
  EXPECT_EQ(bm.num_tokens(2), 3);
  EXPECT_TRUE(out.copies.empty());
  EXPECT_CONSISTENT(bm);
}

}  // namespace
}  // namespace conveyor
