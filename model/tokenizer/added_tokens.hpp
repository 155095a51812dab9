// Added tokens found in text (internal header).
//
// A vocabulary's control, unknown and user-defined tokens are spelled in text
// as their pieces ("<|im_start|>", "<think>", "<s>"). Before the text is
// encoded, AddedTokens cuts it into such tokens and the plain stretches
// between them, as Hugging Face's added-token splitting does: scanning left to
// right, the longest token that may match at a position is taken.
// User-defined tokens may always match; control and unknown tokens only with
// parse_special, and only where they lie wholly outside the verbatim ranges.
//
// Matching costs O(length of the candidate) times O(log tokens) at each
// position whose byte starts some token; other positions cost one table look-up.
#pragma once

#include <algorithm>
#include <array>
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "model/tokenizer/tokenizer.hpp"

namespace conveyor::tokenizer_detail {

// A piece of the input: plain text [begin, end), or an added token there.
struct TextFragment {
  size_t begin;
  size_t end;
  int32_t token;  // -1: plain text
};

class AddedTokens {
 public:
  // The control, unknown and user-defined tokens of `vocab` with a non-empty
  // piece that starts a UTF-8 character; `vocab.types` has one type per piece.
  explicit AddedTokens(const Vocabulary& vocab);

  bool empty() const { return entries_.empty(); }
  // Whether `id` is an entry that parse_special matches (control, unknown).
  bool is_special(int32_t id) const { return std::binary_search(special_ids_.begin(), special_ids_.end(), id); }

  // `text` as consecutive fragments that cover it; no plain fragment is empty.
  std::vector<TextFragment> partition(std::string_view text, bool parse_special,
                                      std::span<const TextRange> verbatim) const;

 private:
  struct Entry {
    std::string text;
    int32_t id;
    bool control;  // needs parse_special and must lie outside verbatim ranges
  };

  // The longest entry that matches `text` at `pos` and `allowed` accepts, or nullptr.
  template <class Allowed>
  const Entry* longest_match(std::string_view text, size_t pos, Allowed&& allowed) const;

  std::vector<Entry> entries_;      // sorted by text, no two alike
  std::vector<int32_t> special_ids_;  // the control entries' ids, sorted
  std::array<bool, 256> starts_{};  // bytes that begin some entry
  bool any_user_defined_ = false;
};

}  // namespace conveyor::tokenizer_detail
