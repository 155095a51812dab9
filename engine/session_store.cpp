#include "engine/session_store.hpp"

namespace conveyor {

void SessionStore::keep(const std::string& name, seq_id keeper, int32_t blocks, double expires) {
  sessions_[name] = Kept{keeper, blocks, expires, next_order_++};
  blocks_ += blocks;
}

void SessionStore::release(const std::string& name, std::vector<seq_id>& freed) {
  auto it = sessions_.find(name);
  if (it == sessions_.end()) return;
  freed.push_back(it->second.keeper);
  blocks_ -= it->second.blocks;
  sessions_.erase(it);
}

int32_t SessionStore::release_oldest(int32_t blocks, std::vector<seq_id>& freed) {
  int32_t released = 0;
  while (released < blocks && !sessions_.empty()) {
    auto oldest = sessions_.begin();
    for (auto it = sessions_.begin(); it != sessions_.end(); ++it)
      if (it->second.order < oldest->second.order) oldest = it;
    released += oldest->second.blocks;
    const std::string name = oldest->first;
    release(name, freed);
  }
  return released;
}

void SessionStore::expire(double now, std::vector<seq_id>& freed) {
  std::vector<std::string> expired;
  for (const auto& [name, kept] : sessions_)
    if (kept.expires <= now) expired.push_back(name);
  for (const std::string& name : expired) release(name, freed);
}

std::optional<double> SessionStore::next_expiry() const {
  std::optional<double> next;
  for (const auto& [name, kept] : sessions_)
    if (!next || kept.expires < *next) next = kept.expires;
  return next;
}

void SessionStore::clear() {
  sessions_.clear();
  blocks_ = 0;
}

}  // namespace conveyor
