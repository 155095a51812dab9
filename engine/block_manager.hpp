// The KV block manager: the metadata of a paged KV cache, with no actor code.
//
// It owns a pool of `num_blocks` device blocks of `block_size` token slots and
// a pool of `num_host_blocks` host (swap) blocks, and for every live sequence
// its block table: position p of the sequence lives in table[p / block_size]
// at slot p % block_size (the layout model/batch.hpp reads). The KV data
// itself is the KV pool (model/kv_cache.hpp) that the executor computes into
// and the swap actor copies; this class only says which block holds what and
// which copies must run.
//
// Every device block is in exactly one state:
//   free    on the free list, holds nothing reusable;
//   cached  reference count 0, but holds a full, computed block that a later
//           prompt with the same prefix can reuse; evicted in least recently
//           used order when a fresh block is needed and the free list is empty;
//   used    reference count > 0: held by that many block tables.
//
// Prefix caching. A full block is identified by its whole token prefix: the
// key (parent's prefix id, the block's own tokens), where a prefix id is a
// 64-bit number handed out once, never reused, the first time a prefix is
// registered. A 64-bit hash of the key (xxHash-style rounds with a murmur
// finaliser) only picks the bucket of an open-addressing index; a lookup
// matches when the parent id and every token are equal, so a hash collision
// can never return a wrong block: matching is exact, not probabilistic.
// A block is registered only once its KV is computed (commit_computed), never
// when its slots are merely reserved, so a prompt can never reuse a block whose
// KV a chunked prefill has not written yet. Two sequences that compute the same
// content separately hold two physical blocks: the first registered is the
// index's representative, the other a duplicate that shares its prefix id;
// when a duplicate is freed it is cached only if the representative is gone.
//
// A prompt never hits its own last token: hits are whole blocks inside the
// first tokens.size() - 1 tokens, so num_cached_tokens is at most
// floor((size - 1) / block_size) * block_size and the block holding the last
// token is always recomputed into a private block (logits need the last token,
// and the executor never writes into a shared block).
//
// Copy-on-write: appending into a partly filled last block that other tables
// share (after fork) first moves this table to a fresh block and reports the
// (src, dst) copy the executor must run before the step's forward pass.
//
// Swap runs in two phases, because copies are asynchronous and overlap the
// forward pass: swap_out reserves one host block per table entry (shared
// device blocks included) and returns the (device, host) copies; the device
// blocks stay held until complete_swap_out, called once the copies have
// landed. swap_in reserves fresh device blocks and returns (host, device)
// copies; the host blocks stay held, and the sequence may not grow, until
// complete_swap_in, which also re-registers its full computed blocks (their
// KV is valid only then). A caller with synchronous copies calls both phases
// back to back.
//
// A shortfall (not enough free blocks) is an ordinary outcome, not an error: it
// is the signal for preemption. Calls that report one change nothing. Errors
// (unknown or duplicate sequence ids, a sequence in the wrong place, absurd
// arguments) are values as well; no call throws or aborts on bad input.
//
// Cost: per call O(blocks changed) plus one hash lookup per touched sequence;
// a block's tokens are hashed once, when it is registered. allocate_batch
// writes into a caller-owned result whose vectors keep their capacity, so a
// steady-state iteration allocates nothing.
//
// Thread-safety: none. One owner (the block manager actor) calls it.
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <unordered_map>
#include <vector>

#include "engine/prefix_index.hpp"
#include "base/status.hpp"

namespace conveyor {

using BlockId = int32_t;

// A block copy to perform: device->device (copy-on-write, by the executor
// before the step's forward pass), device->host (swap out) or host->device
// (swap in), both by the swap actor.
struct BlockCopy {
  BlockId src = -1;
  BlockId dst = -1;
  friend bool operator==(const BlockCopy&, const BlockCopy&) = default;
};

enum class SeqLocation : uint8_t {
  device,        // runnable: its table holds device blocks
  swapping_out,  // holds its device blocks and the host blocks being filled
  host,          // holds host blocks only
  swapping_in,   // holds the host blocks and the device blocks being filled
};
const char* to_string(SeqLocation where);

// allocate_prompt's answer.
struct PromptAllocation {
  int32_t shortfall = 0;            // > 0: device blocks missing; nothing changed
  int32_t num_cached_tokens = 0;    // leading tokens whose KV is present: skip them
  std::vector<BlockId> block_table; // the sequence's whole table (empty on shortfall)
  bool ok() const { return shortfall == 0; }
};

// append_slots' answer.
struct AppendResult {
  int32_t shortfall = 0;            // > 0: device blocks missing; nothing changed
  int32_t table_begin = 0;          // table entries from here on are new or replaced
  std::vector<BlockId> changed;     // those entries: table[table_begin...]
  std::optional<BlockCopy> copy;    // copy-on-write of the old last block
  bool ok() const { return shortfall == 0; }
};

// swap_out / swap_in's answer.
struct SwapResult {
  int32_t shortfall = 0;            // > 0: blocks missing (host for out, device for in)
  std::vector<BlockCopy> copies;    // (device, host) for out, (host, device) for in
  bool ok() const { return shortfall == 0; }
};

// One sequence's part of an iteration's allocation batch.
enum class SlotOp : uint8_t {
  prompt,  // new (or recomputed) sequence: tokens = its whole known token list
  append,  // existing sequence: tokens = the tokens appended this iteration
};

struct SlotRequest {
  uint64_t seq_id = 0;
  SlotOp op = SlotOp::append;
  std::span<const int32_t> tokens;  // borrowed for the duration of the call
  // append only: if >= 0, first record that the sequence's first
  // num_computed tokens now have their KV written (see commit_computed). The
  // commit applies even when the append falls short or is skipped.
  int32_t num_computed = -1;
  // prompt only: false allocates every block fresh, matching nothing in the
  // prefix cache (a request that must compute its whole prompt: prompt
  // logprobs); its computed blocks still enter the cache.
  bool match_prefix = true;
};

enum class GrantStatus : uint8_t {
  ok,
  short_of_blocks,   // nothing changed; see shortfall
  skipped,           // not attempted (OnShortfall::stop after an earlier shortfall)
  unknown_sequence,
  sequence_exists,   // prompt for an id that already has a table
  not_on_device,     // append or commit while swapped out or swapping
  invalid_argument,  // empty prompt, num_computed out of range
};
const char* to_string(GrantStatus s);

struct SlotGrant {
  uint64_t seq_id = 0;
  GrantStatus status = GrantStatus::ok;
  int32_t shortfall = 0;            // short_of_blocks / skipped: blocks missing for this one
  int32_t num_cached_tokens = 0;    // prompt: as in PromptAllocation
  int32_t table_begin = 0;          // first new or replaced table entry
  int32_t changed_begin = 0;        // [changed_begin, changed_end) in SlotBatchResult::blocks
  int32_t changed_end = 0;
  bool ok() const { return status == GrantStatus::ok; }
};

// allocate_batch's answer. Reuse one object across iterations: clear() keeps
// the vectors' capacity.
struct SlotBatchResult {
  std::vector<SlotGrant> grants;    // one per request, same order
  std::vector<BlockId> blocks;      // changed table entries of all grants, back to back
  std::vector<BlockCopy> copies;    // copy-on-write copies to run before the step
  // Blocks still missing to grant every request that fell short or was
  // skipped, after what the successful ones took (an estimate when requests
  // interact, e.g. two prompts hitting the same cached block).
  int32_t shortfall = 0;

  // table[g.table_begin...] after the grant: apply with
  // table.resize(g.table_begin); table.append(changed(g)).
  std::span<const BlockId> changed(const SlotGrant& g) const {
    return {blocks.data() + g.changed_begin, size_t(g.changed_end - g.changed_begin)};
  }
  void clear() {
    grants.clear();
    blocks.clear();
    copies.clear();
    shortfall = 0;
  }
};

enum class OnShortfall : uint8_t {
  keep_going,  // try every request; a later one that fits still succeeds
  stop,        // after the first shortfall, skip the rest (a lower-priority
               // request never takes blocks a higher one was refused)
};

struct BlockManagerStats {
  int32_t total_blocks = 0;
  int32_t free_blocks = 0;      // on the free list
  int32_t cached_blocks = 0;    // reference count 0 but reusable (evictable)
  int32_t used_blocks = 0;      // held by live sequences
  int32_t host_total_blocks = 0;
  int32_t host_used_blocks = 0;
  int32_t host_free_blocks = 0;
  // Prefix cache, counted on successful allocate_prompt calls.
  uint64_t prefix_queries = 0;  // prompts looked up
  uint64_t query_blocks = 0;    // full blocks eligible for a hit
  uint64_t hit_blocks = 0;      // of those, found in the cache
  uint64_t query_tokens = 0;    // prompt tokens looked up (all of them)
  uint64_t hit_tokens = 0;      // prompt tokens not recomputed thanks to hits
  uint64_t evictions = 0;       // cached blocks reclaimed for fresh allocations
  uint64_t cow_copies = 0;
  uint64_t swapped_out_blocks = 0;
  uint64_t swapped_in_blocks = 0;

  double kv_usage_ratio() const { return total_blocks ? double(used_blocks) / total_blocks : 0.0; }
  double token_hit_rate() const { return query_tokens ? double(hit_tokens) / query_tokens : 0.0; }
};

class BlockManager {
 public:
  // num_blocks >= 1 device blocks of block_size >= 1 token slots;
  // num_host_blocks >= 0 host blocks for swap (0: swap always falls short).
  BlockManager(int32_t num_blocks, int32_t block_size, bool enable_prefix_caching,
               int32_t num_host_blocks = 0);

  // ---- allocation --------------------------------------------------------
  // A new (or, after a recompute preemption, re-admitted) sequence with its
  // whole known token list: reuses cached full blocks of the prefix and takes
  // fresh blocks for the rest. The new blocks' tokens count as not computed
  // until commit_computed says so. Errors: empty tokens, seq_id already live.
  Expected<PromptAllocation> allocate_prompt(uint64_t seq_id, std::span<const int32_t> tokens);

  // Reserves slots for `tokens` after the sequence's current tokens (a decode
  // token, or tokens of a grown chunk), with copy-on-write of a shared partly
  // filled last block. Errors: unknown id, sequence not on the device.
  Expected<AppendResult> append_slots(uint64_t seq_id, std::span<const int32_t> tokens);

  // The sequence's first num_computed tokens now have their KV written; full
  // blocks among them become reusable by later prompts. Never decreases.
  // O(blocks that became full). Errors: unknown id, num_computed beyond the
  // sequence's tokens or below an earlier commit, sequence not on the device.
  Status commit_computed(uint64_t seq_id, int32_t num_computed);

  // One iteration's allocations, all-or-nothing per request, in order.
  // `out` is cleared first and filled with one grant per request.
  void allocate_batch(std::span<const SlotRequest> requests, SlotBatchResult& out,
                      OnShortfall on_shortfall = OnShortfall::keep_going);

  // child gets parent's table (every block's reference count + 1) and token
  // state; their writes diverge by copy-on-write. Errors: unknown parent,
  // parent not on the device, child already live.
  Status fork(uint64_t parent_seq_id, uint64_t child_seq_id);

  // Records `tokens` in the slots of positions [pos, pos + tokens.size()),
  // reserved earlier, some with placeholders (tokens sampled after their
  // slots were reserved). Registered (hashed) blocks never change. Errors
  // (and no change): unknown id, not on the device, positions outside the
  // sequence's tokens or inside a registered block.
  Status set_tokens(uint64_t seq_id, int32_t pos, std::span<const int32_t> tokens);

  // Releases every block the sequence holds, on device and host, in any
  // location (a swap in flight is abandoned: the caller must not let its
  // copies land afterwards). Device blocks whose count reaches 0 become cached
  // (if their prefix is registered) or free. Error (and no change) for an
  // unknown id.
  Status free(uint64_t seq_id);

  // ---- swap --------------------------------------------------------------
  // device -> swapping_out. Shortfall: host blocks missing (nothing changed).
  Expected<SwapResult> swap_out(uint64_t seq_id);
  // swapping_out -> host: releases the device blocks.
  Status complete_swap_out(uint64_t seq_id);
  // host -> swapping_in. Shortfall: device blocks missing (nothing changed).
  Expected<SwapResult> swap_in(uint64_t seq_id);
  // swapping_in -> device: releases the host blocks, re-registers prefixes.
  Status complete_swap_in(uint64_t seq_id);
  // On host, and swap_in would find enough device blocks now.
  bool can_swap_in(uint64_t seq_id) const;

  // ---- queries -----------------------------------------------------------
  bool contains(uint64_t seq_id) const { return seqs_.count(seq_id) != 0; }
  std::optional<SeqLocation> location(uint64_t seq_id) const;
  // Device block table (empty while on host or for an unknown id).
  std::span<const BlockId> block_table(uint64_t seq_id) const;
  // Host block table (empty unless swapping or on host).
  std::span<const BlockId> host_block_table(uint64_t seq_id) const;
  int32_t num_tokens(uint64_t seq_id) const;    // 0 for an unknown id
  int32_t num_computed(uint64_t seq_id) const;  // 0 for an unknown id
  // Blocks that appending n tokens would take now (copy-on-write included);
  // -1 for an unknown id or a sequence not on device.
  int32_t blocks_needed_to_append(uint64_t seq_id, int32_t n) const;

  // The token ids recorded in a device block's slots (the leading ones are
  // meaningful); for tests and debugging. Empty for an out-of-range id.
  std::span<const int32_t> block_tokens(BlockId b) const {
    if (b < 0 || b >= num_blocks()) return {};
    return tokens_of(b);
  }

  int32_t block_size() const { return block_size_; }
  int32_t num_blocks() const { return int32_t(blocks_.size()); }
  int32_t num_host_blocks() const { return int32_t(host_tokens_.size() / block_size_); }
  int32_t num_free_blocks() const { return int32_t(free_.size()); }
  int32_t num_cached_blocks() const { return lru_size_; }
  // What a fresh allocation can take now: free plus evictable cached blocks.
  int32_t num_available_blocks() const { return num_free_blocks() + lru_size_; }
  int32_t num_free_host_blocks() const { return int32_t(host_free_.size()); }
  bool prefix_caching() const { return prefix_caching_; }
  BlockManagerStats stats() const;
  void reset_prefix_stats();

  // Full consistency check, O(blocks + table entries); for tests.
  Status check_invariants() const;

 private:
  struct Block {
    int32_t ref = 0;
    BlockId lru_prev = -1;
    BlockId lru_next = -1;
    bool in_lru = false;
    bool indexed = false;      // the index's representative for its key
    uint64_t prefix_id = 0;    // 0: not registered
    uint64_t parent_id = 0;    // parent's prefix id (0 for a sequence's first block)
    uint64_t key_hash = 0;
  };
  struct Seq {
    std::vector<BlockId> table;       // device blocks
    std::vector<BlockId> host_table;  // host blocks
    int32_t num_tokens = 0;
    int32_t num_computed = 0;
    int32_t num_registered = 0;  // table[0, num_registered) carry prefix ids
    SeqLocation where = SeqLocation::device;
  };
  // Internal outcome of one request, before it becomes a grant or an Error.
  struct Outcome {
    GrantStatus status = GrantStatus::ok;
    int32_t shortfall = 0;
    int32_t num_cached_tokens = 0;
    int32_t table_begin = 0;
  };

  Outcome do_prompt(uint64_t seq_id, std::span<const int32_t> tokens,
                    std::vector<BlockId>& changed, bool match = true);
  Outcome do_append(uint64_t seq_id, std::span<const int32_t> tokens, int32_t num_computed,
                    std::vector<BlockId>& changed, std::vector<BlockCopy>& copies);
  Outcome do_commit(Seq& seq, int32_t num_computed);
  // Finds cached blocks for the prompt's leading full blocks into hits_.
  void match_prefix(std::span<const int32_t> tokens);
  // Registers the full computed blocks not registered yet.
  void register_computed(Seq& seq);
  void register_block(Seq& seq, int32_t index);
  static Error sequence_error(GrantStatus s, uint64_t seq_id);
  void release(BlockId b);
  BlockId take_fresh();
  BlockId find_in_index(uint64_t hash, uint64_t parent_id, std::span<const int32_t> tokens) const;

  std::span<int32_t> tokens_of(BlockId b) {
    return {tokens_.data() + size_t(b) * block_size_, size_t(block_size_)};
  }
  std::span<const int32_t> tokens_of(BlockId b) const {
    return {tokens_.data() + size_t(b) * block_size_, size_t(block_size_)};
  }
  int32_t blocks_for(int64_t tokens) const {
    return int32_t((tokens + block_size_ - 1) / block_size_);
  }

  void lru_push_back(BlockId b);
  void lru_remove(BlockId b);

  int32_t block_size_;
  bool prefix_caching_;
  std::vector<Block> blocks_;
  std::vector<int32_t> tokens_;       // [num_blocks][block_size] token ids in each slot
  std::vector<BlockId> free_;         // stack; back() is taken first
  BlockId lru_head_ = -1;             // least recently used: evicted first
  BlockId lru_tail_ = -1;
  int32_t lru_size_ = 0;
  PrefixIndex index_;
  uint64_t next_prefix_id_ = 1;
  std::vector<int32_t> host_tokens_;  // [num_host_blocks][block_size]
  std::vector<BlockId> host_free_;
  std::unordered_map<uint64_t, Seq> seqs_;
  std::vector<BlockId> hits_;         // scratch for match_prefix
  BlockManagerStats counters_;        // the cumulative fields only
};

}  // namespace conveyor
