// What this peer tells a master started again, so that it can take the peer
// back (hello.resume_*, master/master_resume.cpp): its id, its epoch and
// ring, the shared-state revision it holds, the collectives it saw committed
// lately and those still awaiting a verdict here.
//
// The record must never claim less than the peer knows: a collective that
// ended ok here is recorded (committed) before its caller hears of it, and a
// hello reads the awaited collectives (the snapshot) before the commits
// (fill), so one that leaves the awaited set meanwhile is among the commits.
// A record too large for a hello is not cut short (too_large): a cut record
// could abort here what another member saw committed.
//
// Pure: no lock, no IO. Its owner guards it (the Communicator: state.mu).
#pragma once

#include <cstdint>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "wire/messages.h"

namespace ferry::peer {

class ResumeRecord {
 public:
  // Committed collectives remembered (the last wire::kMaxResumeRanges ranges of them are sent).
  static constexpr size_t kRecentCommits = 4'096;

  // What the ring and the collectives in flight say at the moment of a dial.
  struct Snapshot {
    uint64_t peer_id = 0, epoch = 0;
    std::vector<uint64_t> ring;      // member ids in ring order
    std::vector<uint32_t> awaiting;  // numbers of the epoch's collectives awaiting a verdict, any order
  };

  // The master's ok for collective `seq` of `epoch`; `revision`: the one a
  // shared-state sync planned. A newer epoch forgets the older one's commits.
  void committed(uint64_t epoch, uint32_t seq, std::optional<uint64_t> revision);
  // Why `now` would not fit a hello (then the peer cannot resume safely), if so.
  static std::optional<std::string> too_large(const Snapshot& now);
  // The resume half of the hello: the snapshot, the revision held and the latest committed ranges.
  void fill(wire::Hello& hello, const Snapshot& now) const;
  // Sorted runs of the numbers awaiting a verdict.
  static std::vector<wire::SeqRange> awaited_ranges(std::vector<uint32_t> seqs);

 private:
  std::optional<uint64_t> revision_;  // of the last shared-state sync committed here
  uint64_t commits_epoch_ = 0;        // the epoch of recent_commits_
  std::set<uint32_t> recent_commits_;  // its last kRecentCommits collectives seen committed
};

}  // namespace ferry::peer
