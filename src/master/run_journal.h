// What happened in a run, for the people watching it (the master's /status
// and dashboard): the last events (joins, leaves, kicks, epochs, aborts,
// revisions) and the last collectives with their phase times. Bounded: the
// oldest entries go first. Times are the master state's clock (ms); the
// server maps them to wall-clock time when it publishes them.
// Threading: none; MasterState owns it and updates it on its own thread.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>

#include "core/error.h"

namespace ferry::master {

struct RunEvent {
  uint64_t at_ms = 0;
  const char* kind = "";  // "join", "resume", "leave", "lost", "kick", "epoch", "abort", "revision"
  std::optional<uint32_t> group;
  std::optional<uint64_t> peer;
  std::string text;
};

// One collective's verdict. Phases (ms): start = first begin to go (members
// late to call it), transfer = go to the last member's ok end, commit = last
// end to the verdict. An aborted collective has the phases it reached.
struct CollectiveRecord {
  uint64_t at_ms = 0;
  uint32_t group = 0;
  uint8_t kind = 0;  // wire::CollectiveKind
  Errc result = Errc::ok;
  uint64_t bytes = 0;  // one member's contribution (master_stats.h: collective_bytes), or a sync's fetched bytes
  uint64_t start_ms = 0;
  uint64_t transfer_ms = 0;
  uint64_t commit_ms = 0;
};

class RunJournal {
 public:
  static constexpr size_t kMaxEvents = 200;
  static constexpr size_t kMaxCollectives = 300;

  void event(uint64_t at_ms, const char* kind, std::optional<uint32_t> group, std::optional<uint64_t> peer,
             std::string text);
  void collective(const CollectiveRecord& record);

  const std::deque<RunEvent>& events() const { return events_; }
  const std::deque<CollectiveRecord>& collectives() const { return collectives_; }

 private:
  std::deque<RunEvent> events_;
  std::deque<CollectiveRecord> collectives_;
};

}  // namespace ferry::master
