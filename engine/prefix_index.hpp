// The block manager's prefix index: an open-addressing hash table from a
// block's key hash to the block id, with the key comparison left to the
// caller (who holds the tokens). Linear probing with backward-shift deletion:
// no tombstones, so lookups stay short however many inserts and erases run.
// Capacity is fixed at construction (at least twice the most entries ever
// held), so inserts never allocate.
#pragma once

#include <bit>
#include <cstdint>
#include <span>
#include <vector>

namespace conveyor {

// Hash of a block key (parent prefix id, the block's tokens): xxHash64-style
// rounds over 64-bit words of two tokens, then murmur3's finaliser. Only for
// bucketing; equality is checked exactly by the caller.
inline uint64_t prefix_key_hash(uint64_t parent_id, std::span<const int32_t> tokens) {
  constexpr uint64_t p1 = 0x9E3779B185EBCA87ull, p2 = 0xC2B2AE3D27D4EB4Full;
  uint64_t h = 0x27D4EB2F165667C5ull ^ (parent_id * p2);
  size_t i = 0;
  auto round = [&](uint64_t w) { h = std::rotl(h ^ std::rotl(w * p2, 31) * p1, 27) * p1 + 0x85EBCA77C2B2AE63ull; };
  for (; i + 1 < tokens.size(); i += 2)
    round(uint64_t(uint32_t(tokens[i])) | (uint64_t(uint32_t(tokens[i + 1])) << 32));
  if (i < tokens.size()) round(uint64_t(uint32_t(tokens[i])) | (uint64_t(1) << 63));
  h ^= tokens.size();
  h ^= h >> 33;
  h *= 0xFF51AFD7ED558CCDull;
  h ^= h >> 33;
  h *= 0xC4CEB9FE1A85EC53ull;
  h ^= h >> 33;
  return h;
}

class PrefixIndex {
 public:
  explicit PrefixIndex(int32_t max_entries) {
    size_t cap = std::bit_ceil(size_t(max_entries > 4 ? max_entries : 4) * 2);
    slots_.assign(cap, Slot{});
    mask_ = cap - 1;
  }

  // The entry with this hash for which same(block) holds, or -1.
  template <class Same>
  int32_t find(uint64_t hash, Same&& same) const {
    for (size_t i = hash & mask_;; i = (i + 1) & mask_) {
      const Slot& s = slots_[i];
      if (s.block < 0) return -1;
      if (s.hash == hash && same(s.block)) return s.block;
    }
  }

  // Precondition: the table holds no equal key and fewer than capacity/2 entries.
  void insert(uint64_t hash, int32_t block) {
    size_t i = hash & mask_;
    while (slots_[i].block >= 0) i = (i + 1) & mask_;
    slots_[i] = Slot{hash, block};
    ++size_;
  }

  // Removes the entry (hash, block); false if absent.
  bool erase(uint64_t hash, int32_t block) {
    size_t i = hash & mask_;
    for (;; i = (i + 1) & mask_) {
      if (slots_[i].block < 0) return false;
      if (slots_[i].block == block) break;
    }
    // Backward shift: pull later entries of the probe run into the hole unless
    // their home bucket lies cyclically in (hole, j].
    for (size_t j = i;;) {
      j = (j + 1) & mask_;
      if (slots_[j].block < 0) break;
      size_t home = slots_[j].hash & mask_;
      bool stays = i <= j ? (home > i && home <= j) : (home > i || home <= j);
      if (!stays) {
        slots_[i] = slots_[j];
        i = j;
      }
    }
    slots_[i] = Slot{};
    --size_;
    return true;
  }

  int32_t size() const { return size_; }

 private:
  struct Slot {
    uint64_t hash = 0;
    int32_t block = -1;
  };
  std::vector<Slot> slots_;
  size_t mask_ = 0;
  int32_t size_ = 0;
};

}  // namespace conveyor
