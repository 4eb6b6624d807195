// What the fake peers of ferry-master-load saw, counted for the driver: how
// many were welcomed, accepted, told of a new epoch, and how many verdicts
// committed or aborted; each count with the time it last grew, so a phase's
// wall time ends at its last event, not at the driver's next look.
#pragma once

#include <chrono>
#include <cstdint>
#include <mutex>
#include <string>

namespace ferry::master_load {

using Clock = std::chrono::steady_clock;

enum class Event { welcomed, topology_done, committed, aborted, failed, kEvents };

class LoadTally {
 public:
  void note(Event event);
  // A session failure, kept with the first reason.
  void fail(const std::string& why);

  uint64_t count(Event event) const;
  Clock::time_point last(Event event) const;
  std::string first_failure() const;

 private:
  static constexpr std::size_t kEvents = static_cast<std::size_t>(Event::kEvents);
  mutable std::mutex mu_;
  uint64_t counts_[kEvents] = {};     // guarded by mu_
  Clock::time_point last_[kEvents];   // guarded by mu_
  std::string first_failure_;         // guarded by mu_
};

}  // namespace ferry::master_load
