#include "peer/op_registry.h"

#include <optional>

namespace ferry::peer {

OpRegistry::OpRegistry(SendEnd send_end) : send_end_(std::move(send_end)) {}

void OpRegistry::restart(uint64_t epoch) {
  std::lock_guard lock(mu_);
  epoch_ = epoch;
  next_seq_ = 0;
  unbegun_.clear();
  held_ends_.clear();
}

std::shared_ptr<CollectiveOp> OpRegistry::find(uint64_t epoch, uint32_t seq) const {
  std::lock_guard lock(mu_);
  if (epoch != epoch_) return nullptr;
  auto it = entries_.find(seq);
  return it == entries_.end() ? nullptr : it->second.op;
}

std::vector<std::shared_ptr<CollectiveOp>> OpRegistry::in_flight() const {
  std::lock_guard lock(mu_);
  std::vector<std::shared_ptr<CollectiveOp>> out;
  for (auto& [seq, entry] : entries_) out.push_back(entry.op);
  return out;
}

size_t OpRegistry::size() const {
  std::lock_guard lock(mu_);
  return entries_.size();
}

bool OpRegistry::wait_empty(std::chrono::steady_clock::time_point deadline) {
  std::unique_lock lock(mu_);
  return changed_.wait_until(lock, deadline, [&] { return entries_.empty(); });
}

ChunkLookup OpRegistry::wait_started(uint32_t seq, const RingLinks* links, const std::atomic<bool>& closed) {
  std::unique_lock lock(mu_);
  auto it = entries_.end();
  changed_.wait(lock, [&] {
    it = entries_.find(seq);
    return closed.load() || it == entries_.end() || it->second.started;
  });
  if (closed.load()) return {nullptr, Status::failure(Errc::peer_lost, "links closed")};
  if (it == entries_.end())
    return {nullptr, Status::failure(Errc::protocol, "chunk for collective " + std::to_string(seq) +
                                                         ", which this peer has not issued or already finished")};
  if (!it->second.consumer || it->second.links != links)
    return {nullptr, Status::failure(Errc::protocol, "chunk for collective " + std::to_string(seq) +
                                                         ", which does not run on this ring's links")};
  return {it->second.consumer, {}};
}

void OpRegistry::links_closed(const RingLinks* links, const Status& why) {
  std::vector<std::shared_ptr<ChunkConsumer>> affected;
  {
    std::lock_guard lock(mu_);
    for (auto& [seq, entry] : entries_)
      if (entry.consumer && entry.links == links) affected.push_back(entry.consumer);
    changed_.notify_all();
  }
  for (auto& consumer : affected) consumer->links_failed(why);
}

void OpRegistry::send_end(uint64_t epoch, uint32_t seq, const Status& status) {
  wire::CollectiveEnd end{.epoch = epoch,
                          .seq = seq,
                          .code = static_cast<uint32_t>(status.code),
                          .reason = wire::bounded_reason(status.message)};
  {
    std::lock_guard lock(mu_);
    if (epoch == epoch_ && unbegun_.count(seq)) {
      held_ends_.emplace(seq, std::move(end));  // the first end is the one the master must hear
      return;
    }
  }
  send_end_(end);
}

void OpRegistry::release_end(uint32_t seq) {
  std::optional<wire::CollectiveEnd> held;
  {
    std::lock_guard lock(mu_);
    unbegun_.erase(seq);
    if (auto it = held_ends_.find(seq); it != held_ends_.end()) {
      held = std::move(it->second);
      held_ends_.erase(it);
    }
  }
  if (held) send_end_(*held);
}

void OpRegistry::op_started(uint32_t seq) {
  std::lock_guard lock(mu_);
  if (auto it = entries_.find(seq); it != entries_.end()) it->second.started = true;
  changed_.notify_all();
}

void OpRegistry::op_finished(uint32_t seq) {
  std::lock_guard lock(mu_);
  entries_.erase(seq);
  changed_.notify_all();
}

}  // namespace ferry::peer
