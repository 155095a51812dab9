#include "model/tokenizer/added_tokens.hpp"

#include <algorithm>

#include "model/tokenizer/utf8.hpp"

namespace conveyor::tokenizer_detail {
namespace {

// `ranges` without empty ones, sorted and with overlapping or touching ones merged.
std::vector<TextRange> merged(std::span<const TextRange> ranges) {
  std::vector<TextRange> out;
  for (const TextRange& r : ranges)
    if (r.begin < r.end) out.push_back(r);
  std::sort(out.begin(), out.end(),
            [](const TextRange& a, const TextRange& b) { return a.begin < b.begin; });
  size_t n = 0;
  for (const TextRange& r : out) {
    if (n > 0 && r.begin <= out[n - 1].end) {
      out[n - 1].end = std::max(out[n - 1].end, r.end);
    } else {
      out[n++] = r;
    }
  }
  out.resize(n);
  return out;
}

}  // namespace

AddedTokens::AddedTokens(const Vocabulary& vocab) {
  for (size_t id = 0; id < vocab.pieces.size(); ++id) {
    const TokenType type = vocab.types[id];
    const std::string& piece = vocab.pieces[id];
    if (type != TokenType::control && type != TokenType::unknown &&
        type != TokenType::user_defined)
      continue;
    if (piece.empty() || utf8::is_continuation(piece[0])) continue;
    entries_.push_back({piece, static_cast<int32_t>(id), type != TokenType::user_defined});
  }
  // Sorted by text; of equal pieces the lowest id stays.
  std::stable_sort(entries_.begin(), entries_.end(),
                   [](const Entry& a, const Entry& b) { return a.text < b.text; });
  entries_.erase(std::unique(entries_.begin(), entries_.end(),
                             [](const Entry& a, const Entry& b) { return a.text == b.text; }),
                 entries_.end());
  for (const Entry& e : entries_) {
    starts_[static_cast<uint8_t>(e.text[0])] = true;
    any_user_defined_ = any_user_defined_ || !e.control;
    if (e.control) special_ids_.push_back(e.id);
  }
  std::sort(special_ids_.begin(), special_ids_.end());
}

template <class Allowed>
const AddedTokens::Entry* AddedTokens::longest_match(std::string_view text, size_t pos,
                                                     Allowed&& allowed) const {
  // Invariant: entries [lo, hi) are those that start with text[pos, pos + k)
  // and are longer than k, so they are sorted by their byte at k.
  auto lo = entries_.begin();
  auto hi = entries_.end();
  const Entry* best = nullptr;
  for (size_t k = 0; lo != hi && pos + k < text.size(); ++k) {
    const auto c = static_cast<uint8_t>(text[pos + k]);
    const auto byte_at_k = [k](const Entry& e) { return static_cast<uint8_t>(e.text[k]); };
    lo = std::lower_bound(lo, hi, c, [&](const Entry& e, uint8_t v) { return byte_at_k(e) < v; });
    hi = std::upper_bound(lo, hi, c, [&](uint8_t v, const Entry& e) { return v < byte_at_k(e); });
    // An entry that ends here sorts first among those that share its prefix.
    if (lo != hi && lo->text.size() == k + 1) {
      if (allowed(*lo)) best = &*lo;
      ++lo;
    }
  }
  return best;
}

std::vector<TextFragment> AddedTokens::partition(std::string_view text, bool parse_special,
                                                 std::span<const TextRange> verbatim) const {
  std::vector<TextFragment> out;
  if (text.empty()) return out;
  if (entries_.empty() || (!parse_special && !any_user_defined_)) {
    out.push_back({0, text.size(), -1});
    return out;
  }
  const std::vector<TextRange> protected_ranges = merged(verbatim);
  size_t next_range = 0;  // the first range that does not end at or before `pos`
  size_t pos = 0;
  size_t plain_begin = 0;
  while (pos < text.size()) {
    if (!starts_[static_cast<uint8_t>(text[pos])]) {
      ++pos;
      continue;
    }
    while (next_range < protected_ranges.size() && protected_ranges[next_range].end <= pos)
      ++next_range;
    const auto allowed = [&](const Entry& e) {
      if (!e.control) return true;
      if (!parse_special) return false;
      return next_range == protected_ranges.size() ||
             protected_ranges[next_range].begin >= pos + e.text.size();
    };
    const Entry* match = longest_match(text, pos, allowed);
    if (match == nullptr) {
      ++pos;
      continue;
    }
    if (pos > plain_begin) out.push_back({plain_begin, pos, -1});
    out.push_back({pos, pos + match->text.size(), match->id});
    pos += match->text.size();
    plain_begin = pos;
  }
  if (plain_begin < text.size()) out.push_back({plain_begin, text.size(), -1});
  return out;
}

}  // namespace conveyor::tokenizer_detail
