#include "peer/op_directory.h"

namespace ferry::peer {

void OpDirectory::add(uint32_t seq, std::weak_ptr<ChunkConsumer> consumer) {
  std::lock_guard lock(mu_);
  entries_[seq].consumer = std::move(consumer);
}

void OpDirectory::start(uint32_t seq) {
  std::vector<Resume> parked;
  {
    std::lock_guard lock(mu_);
    auto it = entries_.find(seq);
    if (it == entries_.end()) return;
    it->second.started = true;
    parked.swap(it->second.parked);
  }
  for (auto& resume : parked) resume();
}

void OpDirectory::remove(uint32_t seq) {
  std::vector<Resume> parked;
  {
    std::lock_guard lock(mu_);
    auto it = entries_.find(seq);
    if (it == entries_.end()) return;
    parked.swap(it->second.parked);
    entries_.erase(it);
  }
  for (auto& resume : parked) resume();  // they look again and find the collective gone
}

OpDirectory::Lookup OpDirectory::find(uint32_t seq, Resume resume) {
  std::lock_guard lock(mu_);
  auto it = entries_.find(seq);
  if (it == entries_.end())
    return {nullptr, false,
            Status::failure(Errc::protocol, "chunk for collective " + std::to_string(seq) +
                                                ", which this peer has not issued or already finished")};
  if (!it->second.started) {
    it->second.parked.push_back(std::move(resume));
    return {nullptr, true, {}};
  }
  auto consumer = it->second.consumer.lock();
  if (!consumer)
    return {nullptr, false,
            Status::failure(Errc::protocol, "chunk for finished collective " + std::to_string(seq))};
  return {std::move(consumer), false, {}};
}

std::vector<std::shared_ptr<ChunkConsumer>> OpDirectory::consumers() {
  std::lock_guard lock(mu_);
  std::vector<std::shared_ptr<ChunkConsumer>> out;
  for (auto& [seq, entry] : entries_)
    if (auto c = entry.consumer.lock()) out.push_back(std::move(c));
  return out;
}

}  // namespace ferry::peer
