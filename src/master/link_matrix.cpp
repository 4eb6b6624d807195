#include "master/link_matrix.h"

#include <algorithm>
#include <limits>

namespace ferry::master {

void LinkMatrix::record(uint64_t from, const std::vector<wire::LinkEntry>& entries,
                        const std::vector<uint64_t>& members, uint64_t now_ms, bool probed) {
  auto member = [&](uint64_t id) { return std::find(members.begin(), members.end(), id) != members.end(); };
  if (!member(from)) return;
  for (const wire::LinkEntry& e : entries) {
    if (e.from_peer != from || e.to_peer == from || !member(e.to_peer)) continue;
    Cell& cell = cells_[{from, e.to_peer}];
    cell.entry = e;
    cell.entry.age_ms = 0;
    cell.measured_at_ms = now_ms - std::min<uint64_t>(e.age_ms, now_ms);
    if (probed) {
      cell.probed_bps = e.goodput_bps;
      cell.probed_retrans_ppm = std::min<uint32_t>(e.retrans_ppm, 1'000'000);
    } else {
      cell.carried_bps = e.goodput_bps;
    }
    unreachable_.erase({from, e.to_peer});
    failures_.erase({from, e.to_peer});
    unpunchable_.erase(unordered(from, e.to_peer));
    punch_failures_.erase(unordered(from, e.to_peer));
  }
}

namespace {
// `backoff.initial_ms`, doubled for each earlier failure, at most `backoff.max_ms`.
uint64_t backoff_after(uint32_t earlier_failures, LinkMatrix::Backoff backoff) {
  uint64_t wait = backoff.initial_ms;
  for (uint32_t i = 0; i < earlier_failures && wait < backoff.max_ms; ++i) wait *= 2;
  return std::min(wait, backoff.max_ms);
}
}  // namespace

uint64_t LinkMatrix::mark_unreachable(uint64_t from, uint64_t to, uint64_t now_ms, Backoff backoff) {
  const uint64_t wait = backoff_after(failures_[{from, to}]++, backoff);
  unreachable_[{from, to}] = now_ms + wait;
  cells_.erase({from, to});
  return wait;
}

uint64_t LinkMatrix::mark_punch_failed(uint64_t a, uint64_t b, uint64_t now_ms, Backoff backoff) {
  const auto pair = unordered(a, b);
  const uint64_t wait = backoff_after(punch_failures_[pair]++, backoff);
  unpunchable_[pair] = now_ms + wait;
  return wait;
}

uint64_t LinkMatrix::mark_relay_failed(uint64_t a, uint64_t b, uint64_t relay, uint64_t now_ms, Backoff backoff) {
  const auto key = relayed(a, b, relay);
  const uint64_t wait = backoff_after(relay_failures_[key]++, backoff);
  unrelayable_[key] = now_ms + wait;
  return wait;
}

std::vector<std::pair<uint64_t, uint64_t>> LinkMatrix::unreachable_pairs(size_t limit) const {
  std::vector<std::pair<uint64_t, uint64_t>> out;
  for (const auto& [pair, until] : unreachable_) {
    if (out.size() >= limit) break;
    out.push_back(pair);
  }
  return out;
}

bool LinkMatrix::retry_due(const std::vector<uint64_t>& members) const {
  auto member = [&](uint64_t id) { return std::find(members.begin(), members.end(), id) != members.end(); };
  return std::any_of(failures_.begin(), failures_.end(), [&](const auto& kv) {
    return member(kv.first.first) && member(kv.first.second) && !has(kv.first.first, kv.first.second);
  });
}

double LinkMatrix::capacity(uint64_t from, uint64_t to) const {
  return dial_failed(from, to) ? -1 : measured_capacity(from, to);
}

double LinkMatrix::measured_capacity(uint64_t from, uint64_t to) const {
  auto it = cells_.find({from, to});
  if (it == cells_.end()) return 0;
  if (it->second.entry.shared_memory) return kSharedMemoryCapacity;
  const Cell& cell = it->second;
  double probed = static_cast<double>(cell.probed_bps) * (1 - cell.probed_retrans_ppm / 1e6);
  return std::max(probed, static_cast<double>(cell.carried_bps));
}

double LinkMatrix::rtt_ms(uint64_t from, uint64_t to) const {
  auto it = cells_.find({from, to});
  return it == cells_.end() ? 0 : it->second.entry.rtt_us / 1e3;
}

void LinkMatrix::forget(uint64_t peer) {
  auto touches = [&](const auto& kv) { return kv.first.first == peer || kv.first.second == peer; };
  std::erase_if(cells_, touches);
  std::erase_if(unreachable_, touches);
  std::erase_if(failures_, touches);
  std::erase_if(unpunchable_, touches);
  std::erase_if(punch_failures_, touches);
  auto relay_touches = [&](const auto& kv) {
    const auto& [a, b, relay] = kv.first;
    return a == peer || b == peer || relay == peer;
  };
  std::erase_if(unrelayable_, relay_touches);
  std::erase_if(relay_failures_, relay_touches);
}

void LinkMatrix::expire(uint64_t now_ms, uint64_t max_age_ms) {
  std::erase_if(cells_, [&](const auto& kv) { return now_ms - kv.second.measured_at_ms > max_age_ms; });
  std::erase_if(unreachable_, [&](const auto& kv) { return now_ms >= kv.second; });
  std::erase_if(unpunchable_, [&](const auto& kv) { return now_ms >= kv.second; });
  std::erase_if(unrelayable_, [&](const auto& kv) { return now_ms >= kv.second; });
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
