#include "master/link_matrix.h"

#include <algorithm>
#include <limits>

namespace ferry::master {

void LinkMatrix::record(uint64_t from, const std::vector<wire::LinkEntry>& entries,
                        const std::vector<uint64_t>& members, uint64_t now_ms) {
  auto member = [&](uint64_t id) { return std::find(members.begin(), members.end(), id) != members.end(); };
  if (!member(from)) return;
  for (const wire::LinkEntry& e : entries) {
    if (e.from_peer != from || e.to_peer == from || !member(e.to_peer)) continue;
    Cell cell{e, now_ms - std::min<uint64_t>(e.age_ms, now_ms)};
    cell.entry.age_ms = 0;
    cells_[{from, e.to_peer}] = cell;
  }
}

void LinkMatrix::forget(uint64_t peer) {
  std::erase_if(cells_, [&](const auto& kv) { return kv.first.first == peer || kv.first.second == peer; });
}

void LinkMatrix::expire(uint64_t now_ms, uint64_t max_age_ms) {
  std::erase_if(cells_, [&](const auto& kv) { return now_ms - kv.second.measured_at_ms > max_age_ms; });
}

std::vector<wire::LinkEntry> LinkMatrix::entries(uint64_t now_ms, size_t limit) const {
  std::vector<wire::LinkEntry> out;
  for (const auto& [key, cell] : cells_) {
    if (out.size() >= limit) break;
    wire::LinkEntry e = cell.entry;
    uint64_t age = now_ms - std::min(cell.measured_at_ms, now_ms);
    e.age_ms = static_cast<uint32_t>(std::min<uint64_t>(age, std::numeric_limits<uint32_t>::max()));
    out.push_back(e);
  }
  return out;
}

}  // namespace ferry::master
