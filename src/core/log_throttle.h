// A storm must not become a log flood: a refused-connection storm used to
// write one line per connection, and a failing accept ten lines a second.
// A throttle lets one line through per interval; that line says how many
// events it stands for.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>

namespace ferry {

class LogThrottle {
 public:
  using Clock = std::chrono::steady_clock;
  explicit LogThrottle(std::chrono::milliseconds interval = std::chrono::seconds(1)) : interval_(interval) {}

  // Counts one event. Returns how many events the caller's line should report
  // (this one and those held back since the last line), or 0: write nothing.
  // Thread-safe.
  uint64_t admit(Clock::time_point now = Clock::now()) {
    std::lock_guard lock(mu_);
    ++held_;
    if (written_ && now - last_ < interval_) return 0;
    written_ = true;
    last_ = now;
    uint64_t events = held_;
    held_ = 0;
    return events;
  }

 private:
  const std::chrono::milliseconds interval_;
  std::mutex mu_;
  bool written_ = false;
  Clock::time_point last_{};
  uint64_t held_ = 0;
};

}  // namespace ferry
