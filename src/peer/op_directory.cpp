#include "peer/op_directory.h"

namespace ferry::peer {

void OpDirectory::add(uint32_t seq, std::weak_ptr<ChunkConsumer> consumer) {
  std::lock_guard lock(mu_);
  entries_[seq].consumer = std::move(consumer);
}

void OpDirectory::start(uint32_t seq) {
  std::lock_guard lock(mu_);
  if (auto it = entries_.find(seq); it != entries_.end()) it->second.started = true;
  changed_.notify_all();
}

void OpDirectory::remove(uint32_t seq) {
  std::lock_guard lock(mu_);
  entries_.erase(seq);
  changed_.notify_all();
}

void OpDirectory::close() {
  std::lock_guard lock(mu_);
  closed_ = true;
  changed_.notify_all();
}

OpDirectory::Lookup OpDirectory::wait_started(uint32_t seq) {
  std::unique_lock lock(mu_);
  auto it = entries_.find(seq);
  changed_.wait(lock, [&] {
    it = entries_.find(seq);
    return closed_ || it == entries_.end() || it->second.started;
  });
  if (closed_) return {nullptr, Status::failure(Errc::peer_lost, "links closed")};
  if (it == entries_.end())
    return {nullptr, Status::failure(Errc::protocol, "chunk for collective " + std::to_string(seq) +
                                                         ", which this peer has not issued or already finished")};
  auto consumer = it->second.consumer.lock();
  if (!consumer)
    return {nullptr, Status::failure(Errc::protocol, "chunk for finished collective " + std::to_string(seq))};
  return {std::move(consumer), {}};
}

std::vector<std::shared_ptr<ChunkConsumer>> OpDirectory::consumers() {
  std::lock_guard lock(mu_);
  std::vector<std::shared_ptr<ChunkConsumer>> out;
  for (auto& [seq, entry] : entries_)
    if (auto c = entry.consumer.lock()) out.push_back(std::move(c));
  return out;
}

}  // namespace ferry::peer
