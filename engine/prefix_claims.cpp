#include "engine/prefix_claims.hpp"

#include <algorithm>

#include "engine/prefix_index.hpp"

namespace conveyor {

bool PrefixClaims::must_wait(Sequence& s, int32_t block_size, uint64_t iteration, const Sequences& all,
                             std::span<const seq_id> cancelled) {
  auto find = [&all](seq_id id) -> const Sequence* {
    auto it = all.find(id);
    return it == all.end() ? nullptr : &it->second;
  };
  const int32_t bs = block_size;
  // The blocks the prefix cache can give: full ones before the last token.
  const int32_t full = (int32_t(s.tokens.size()) - 1) / bs;
  hashes_.clear();
  uint64_t h = 0;
  for (int32_t b = 0; b < full; ++b) {
    h = prefix_key_hash(h, std::span<const int32_t>(s.tokens).subspan(size_t(b * bs), size_t(bs)));
    hashes_.push_back(h);
    auto it = claims_.find(h);
    if (it == claims_.end() || it->second.owner == s.id) continue;
    const Sequence* owner = find(it->second.owner);
    const bool live =
        owner != nullptr && std::find(cancelled.begin(), cancelled.end(), owner->id) == cancelled.end() &&
        (owner->in_batch() ||
         (owner->state() == SeqState::waiting && owner->prefix.claimed_at == iteration && owner->plan_slot >= 0));
    if (live && owner->num_computed < it->second.end) return true;
  }
  // Nobody computes them: s claims the ones without a live owner.
  s.prefix.claimed_at = iteration;
  for (int32_t b = 0; b < full; ++b) {
    auto [it, inserted] = claims_.try_emplace(hashes_[size_t(b)], Claim{s.id, (b + 1) * bs});
    if (!inserted) {
      if (it->second.owner == s.id) continue;
      const Sequence* owner = find(it->second.owner);
      if (owner != nullptr && owner->in_batch()) continue;  // computed already
      it->second = Claim{s.id, (b + 1) * bs};
    }
    s.prefix.hashes.push_back(hashes_[size_t(b)]);
  }
  return false;
}

void PrefixClaims::release(Sequence& s) {
  for (uint64_t h : s.prefix.hashes) {
    auto it = claims_.find(h);
    if (it != claims_.end() && it->second.owner == s.id) claims_.erase(it);
  }
  s.prefix.hashes.clear();
}

}  // namespace conveyor
