// One forward call's input: a flattened batch of sequence spans.
//
// Each sequence contributes a span of new tokens at consecutive positions
// [start_pos, start_pos + n). A span is a prefill chunk (n > 1, causal inside
// the chunk, attending to the sequence's earlier cached tokens) or a single
// decode token. Its block table lists, in order, the KV blocks that hold
// positions [0, start_pos + n): position p lives in block_table[p / block_size]
// at slot p % block_size. The forward pass writes the span's keys and values
// into those slots before attending.
//
// Each sequence also says where its prompt ends. Attention computes a prompt
// position the same way whatever chunk it comes in, and every other position
// (a decode step's, a verify step's draft, a generated token recomputed after
// preemption or resumed on another node) bit for bit as a decode step of one
// token does: so recomputing a sequence, verifying drafts or forcing tokens
// under a grammar leaves its greedy tokens exactly as decoding them one by
// one would. (The CPU kernels compute prompt chunks as tiles, which agree
// with decode steps only to rounding: kernels/cpu/paged_attention.hpp.)
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
#include <vector>

namespace conveyor {

struct ForwardBatch {
  std::vector<int32_t> tokens;             // [n_tokens] new tokens, sequence after sequence
  std::vector<int32_t> seq_token_begin{0};  // [n_seqs + 1] offsets into tokens
  std::vector<int32_t> seq_start_pos;      // [n_seqs] position of each span's first token
  std::vector<int32_t> block_tables;       // concatenated block tables
  std::vector<int32_t> block_table_begin{0};  // [n_seqs + 1] offsets into block_tables
  // [n_seqs] how many of the span's last tokens want logits: 0, 1 (the
  // token sampled next), or more (a verify step, engine/speculation.hpp).
  std::vector<uint8_t> want_logits;
  // [n_seqs] the sequence's prompt length: its positions below it are
  // prompt, the rest generated (0: all generated, as a caller that does not
  // say gets).
  std::vector<int32_t> seq_prompt_len;

  int32_t num_seqs() const { return int32_t(seq_start_pos.size()); }
  int32_t num_tokens() const { return int32_t(tokens.size()); }
  int32_t num_logit_rows() const;

  std::span<const int32_t> seq_tokens(int32_t s) const {
    return {tokens.data() + seq_token_begin[s], size_t(seq_token_begin[s + 1] - seq_token_begin[s])};
  }
  std::span<const int32_t> block_table(int32_t s) const {
    return {block_tables.data() + block_table_begin[s],
            size_t(block_table_begin[s + 1] - block_table_begin[s])};
  }

  void add_sequence(std::span<const int32_t> new_tokens, int32_t start_pos,
                    std::span<const int32_t> table, int32_t logits, int32_t prompt_len = 0);
  void clear();
};

inline int32_t ForwardBatch::num_logit_rows() const {
  int32_t n = 0;
  for (uint8_t w : want_logits) n += w;
  return n;
}

inline void ForwardBatch::add_sequence(std::span<const int32_t> new_tokens, int32_t start_pos,
                                       std::span<const int32_t> table, int32_t logits, int32_t prompt_len) {
  tokens.insert(tokens.end(), new_tokens.begin(), new_tokens.end());
  seq_token_begin.push_back(int32_t(tokens.size()));
  seq_start_pos.push_back(start_pos);
  block_tables.insert(block_tables.end(), table.begin(), table.end());
  block_table_begin.push_back(int32_t(block_tables.size()));
  want_logits.push_back(uint8_t(std::min<int32_t>(logits, int32_t(new_tokens.size()))));
  seq_prompt_len.push_back(prompt_len);
}

inline void ForwardBatch::clear() {
  tokens.clear();
  seq_token_begin.assign(1, 0);
  seq_start_pos.clear();
  block_tables.clear();
  block_table_begin.assign(1, 0);
  want_logits.clear();
  seq_prompt_len.clear();
}

}  // namespace conveyor
