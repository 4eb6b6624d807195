#include "peer/fetch_queue.h"

#include <algorithm>

namespace ferry::peer {

FetchQueue::FetchQueue(std::vector<FetchChunk> chunks)
    : chunks_(std::move(chunks)), state_(chunks_.size(), State::waiting), remaining_(chunks_.size()) {}

std::vector<size_t> FetchQueue::take(uint64_t holder, size_t max) {
  std::unique_lock lock(mu_);
  std::vector<size_t> out;
  for (;;) {
    if (closed_ || dead_.count(holder) || remaining_ == 0 || stranded_locked(nullptr)) return out;
    for (size_t id = 0; id < chunks_.size() && out.size() < max; ++id) {
      if (state_[id] != State::waiting) continue;
      const auto& h = chunks_[id].holders;
      if (std::find(h.begin(), h.end(), holder) == h.end()) continue;
      state_[id] = State::taken;
      out.push_back(id);
    }
    if (!out.empty()) return out;
    changed_.wait(lock);
  }
}

void FetchQueue::close() {
  std::lock_guard lock(mu_);
  closed_ = true;
  changed_.notify_all();
}

void FetchQueue::done(size_t id) {
  std::lock_guard lock(mu_);
  if (state_[id] == State::done) return;
  state_[id] = State::done;
  if (--remaining_ == 0) changed_.notify_all();
}

void FetchQueue::holder_failed(uint64_t holder, const std::vector<size_t>& unfinished) {
  std::lock_guard lock(mu_);
  dead_.insert(holder);
  for (size_t id : unfinished)
    if (state_[id] == State::taken) state_[id] = State::waiting;
  changed_.notify_all();
}

bool FetchQueue::complete() const {
  std::lock_guard lock(mu_);
  return remaining_ == 0;
}

bool FetchQueue::stranded(std::string* which) const {
  std::lock_guard lock(mu_);
  return stranded_locked(which);
}

bool FetchQueue::stranded_locked(std::string* which) const {
  for (size_t id = 0; id < chunks_.size(); ++id) {
    if (state_[id] == State::done) continue;
    const auto& h = chunks_[id].holders;
    if (std::any_of(h.begin(), h.end(), [&](uint64_t p) { return !dead_.count(p); })) continue;
    if (which) *which = "tensor " + std::to_string(chunks_[id].tensor) + " at byte " + std::to_string(chunks_[id].offset);
    return true;
  }
  return false;
}

}  // namespace ferry::peer
