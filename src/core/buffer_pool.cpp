#include "core/buffer_pool.h"

#include <algorithm>
#include <utility>

namespace ferry {

BufferPool::BufferPool() : shared_(std::make_shared<Shared>()) {}

size_t BufferPool::idle_bytes() const {
  std::lock_guard lock(shared_->mu);
  size_t total = 0;
  for (const Idle& i : shared_->idle) total += i.capacity;
  return total;
}

BufferPool::Buffer BufferPool::acquire(size_t bytes) {
  Buffer out;
  out.size_ = bytes;
  out.pool_ = shared_;
  if (bytes == 0) return out;
  {
    std::lock_guard lock(shared_->mu);
    auto best = shared_->idle.end();
    for (auto it = shared_->idle.begin(); it != shared_->idle.end(); ++it)
      if (it->capacity >= bytes && (best == shared_->idle.end() || it->capacity < best->capacity)) best = it;
    if (best != shared_->idle.end()) {
      out.bytes_ = std::move(best->bytes);
      out.capacity_ = best->capacity;
      shared_->idle.erase(best);
      return out;
    }
  }
  out.bytes_.reset(new uint8_t[bytes]);  // uninitialized: the caller writes before it reads
  out.capacity_ = bytes;
  return out;
}

BufferPool::Buffer& BufferPool::Buffer::operator=(Buffer&& other) noexcept {
  if (this != &other) {
    release();
    bytes_ = std::move(other.bytes_);
    size_ = std::exchange(other.size_, 0);
    capacity_ = std::exchange(other.capacity_, 0);
    pool_ = std::move(other.pool_);
  }
  return *this;
}

void BufferPool::Buffer::release() {
  if (!bytes_) return;
  if (auto shared = pool_.lock()) {
    std::lock_guard lock(shared->mu);
    auto& idle = shared->idle;
    idle.push_back({std::move(bytes_), capacity_});
    // Keep the largest: a smaller request fits in them, a larger one would not fit in the others.
    std::sort(idle.begin(), idle.end(), [](const Idle& a, const Idle& b) { return a.capacity > b.capacity; });
    if (idle.size() > kKeep) idle.resize(kKeep);
  }
  bytes_.reset();
  capacity_ = 0;
  size_ = 0;
}

}  // namespace ferry
