#include "grammar/token_trie.hpp"

#include <algorithm>

namespace conveyor::grammar::detail {

TokenTrie build_trie(std::vector<TrieEntry>& entries, int32_t offset) {
  if (!std::is_sorted(entries.begin(), entries.end())) std::sort(entries.begin(), entries.end());
  TokenTrie t;
  t.offset = offset;
  t.byte.push_back(0);
  t.end.push_back(0);
  std::vector<int32_t> count{0};  // [nodes] ids ending at each node
  std::vector<int32_t> path{0};   // path[d]: the node of the current string's first d bytes
  std::string_view previous;
  for (const auto& [bytes, id] : entries) {
    size_t common = 0;
    while (common < bytes.size() && common < previous.size() && bytes[common] == previous[common]) ++common;
    // Close the nodes of the previous string below the common prefix: their
    // subtrees end where the new nodes begin.
    for (size_t d = path.size() - 1; d > common; --d) t.end[size_t(path[d])] = t.nodes();
    path.resize(common + 1);
    for (size_t d = common; d < bytes.size(); ++d) {
      path.push_back(t.nodes());
      t.byte.push_back(uint8_t(bytes[d]));
      t.end.push_back(0);
      count.push_back(0);
    }
    // Sorted order puts a string before its extensions, so its node is the
    // newest one: ids come out in node order.
    ++count[size_t(path.back())];
    previous = bytes;
  }
  for (int32_t n : path) t.end[size_t(n)] = t.nodes();
  t.first_id.assign(size_t(t.nodes()) + 1, 0);
  for (int32_t n = 0; n < t.nodes(); ++n) t.first_id[size_t(n) + 1] = t.first_id[size_t(n)] + count[size_t(n)];
  t.ids.reserve(entries.size());
  for (const auto& e : entries) t.ids.push_back(e.id);
  return t;
}

}  // namespace conveyor::grammar::detail
