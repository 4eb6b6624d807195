#include "peer/send_queue.h"

#include <unistd.h>

namespace ferry::peer {

void SendQueue::wake(int fd) {
  uint64_t one = 1;
  (void)!::write(fd, &one, sizeof one);
}

void SendQueue::push(Item item) {
  int sleeper = -1;
  bool queued = false;
  {
    std::lock_guard lock(mu_);
    if (!closed_) {
      if (head_ > 0 && head_ == items_.size()) {
        items_.clear();
        head_ = 0;
      }
      items_.push_back(std::move(item));
      queued = true;
      if (!sleepers_.empty()) {
        sleeper = sleepers_.back();
        sleepers_.pop_back();
      }
    }
  }
  if (!queued) return item.owner->chunk_dropped();
  if (sleeper >= 0) wake(sleeper);
}

SendQueue::Take SendQueue::take(Item& out, int wake_fd) {
  std::lock_guard lock(mu_);
  if (closed_) return Take::closed;
  if (head_ < items_.size()) {
    out = std::move(items_[head_++]);
    return Take::item;
  }
  for (int fd : sleepers_)
    if (fd == wake_fd) return Take::empty;
  sleepers_.push_back(wake_fd);
  return Take::empty;
}

bool SendQueue::leave(int wake_fd) {
  int other = -1;
  {
    std::lock_guard lock(mu_);
    if (closed_) return false;
    std::erase(sleepers_, wake_fd);
    if (head_ < items_.size() && !sleepers_.empty()) {
      other = sleepers_.back();
      sleepers_.pop_back();
    }
  }
  if (other >= 0) wake(other);
  return true;
}

void SendQueue::close() {
  std::vector<Item> dropped;
  std::vector<int> sleepers;
  {
    std::lock_guard lock(mu_);
    if (closed_) return;
    closed_ = true;
    for (size_t i = head_; i < items_.size(); ++i) dropped.push_back(std::move(items_[i]));
    items_.clear();
    head_ = 0;
    sleepers.swap(sleepers_);
  }
  for (auto& item : dropped) item.owner->chunk_dropped();
  for (int fd : sleepers) wake(fd);
}

}  // namespace ferry::peer
