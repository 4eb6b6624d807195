#include "load_tally.h"

namespace ferry::master_load {

void LoadTally::note(Event event) {
  const auto i = static_cast<std::size_t>(event);
  std::lock_guard lock(mu_);
  ++counts_[i];
  last_[i] = Clock::now();
}

void LoadTally::fail(const std::string& why) {
  std::lock_guard lock(mu_);
  if (first_failure_.empty()) first_failure_ = why;
  const auto i = static_cast<std::size_t>(Event::failed);
  ++counts_[i];
  last_[i] = Clock::now();
}

uint64_t LoadTally::count(Event event) const {
  std::lock_guard lock(mu_);
  return counts_[static_cast<std::size_t>(event)];
}

Clock::time_point LoadTally::last(Event event) const {
  std::lock_guard lock(mu_);
  return last_[static_cast<std::size_t>(event)];
}

std::string LoadTally::first_failure() const {
  std::lock_guard lock(mu_);
  return first_failure_;
}

}  // namespace ferry::master_load
