// A blocking call that waits on other peers or on the master says so: at
// warning level, what it waits for and what ends the wait, first after
// kFirst and then every kEvery while it lasts (issue 42: "no silent
// minute"). A WaitNotice only decides when a line is due; the caller writes
// it, from where it already wakes (a wait's own deadline, the watchdog), so
// nothing runs on a hot path.
//
// kFirst is 5 s: a vote, an admission or a collective's start on a working
// run takes milliseconds (a WAN ring's set-up: about a second), so a wait of
// 5 s is already the unusual case, and a user told within 5 s has the first
// helpful line well inside the 15 s the issue asks for. kEvery is 30 s: a
// reminder, not a flood (a 60 s deadline writes 2 lines, a 600 s one 20).
#pragma once

#include <chrono>
#include <optional>
#include <string>

namespace ferry {

class WaitNotice {
 public:
  using Clock = std::chrono::steady_clock;
  static constexpr std::chrono::milliseconds kFirst{5'000};
  static constexpr std::chrono::milliseconds kEvery{30'000};

  explicit WaitNotice(Clock::time_point began = Clock::now()) : began_(began), next_(began + kFirst) {}

  // When the next line is due (a waiter wakes then at the latest).
  Clock::time_point next() const { return next_; }
  // How long the wait has lasted, when a line is due at `now` (and then the next
  // is scheduled); nullopt: write nothing.
  std::optional<std::chrono::milliseconds> due(Clock::time_point now) {
    if (now < next_) return std::nullopt;
    while (next_ <= now) next_ += kEvery;
    return std::chrono::duration_cast<std::chrono::milliseconds>(now - began_);
  }

 private:
  Clock::time_point began_;
  Clock::time_point next_;
};

// "12 s": how a notice says how long a wait has lasted or has left.
inline std::string seconds_text(std::chrono::milliseconds d) {
  return std::to_string(std::chrono::duration_cast<std::chrono::seconds>(d).count()) + " s";
}

}  // namespace ferry
