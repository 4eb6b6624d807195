// The checks ferry-chaos makes on what the peers report, kept free of
// processes and sockets so they can be unit-tested.
//
// One all-reduce is named by (epoch, ring, step, k): the ring's epoch and
// members, the training step and the op's index within the step. The ring is in
// the name because a master started again may form a new group whose epochs
// count from 1 again, never with the same members (peer ids are not reused).
// Across the peers reporting it:
//   - every success carries the same result hash and the same ring, and the
//     reporter is in that ring;
//   - unquantized: the hash equals the reference reduction over the ring
//     (recomputed from the inputs' recipe); quantized: each peer's max error
//     against the reference is within chaos_data's bound;
//   - it succeeded on all or failed on all: a success next to a failure is a
//     violation, unless the failing peer was removed (master lost, kicked);
//   - each phase kept its deadline (the start, the longest stall, the commit,
//     as the library measured them), and the whole op (t1 - t0) its hang bound.
// A shared-state sync is named by (epoch, ring, step): the ring's epoch and
// members (see above) and the step it ran before; reports more than the hang
// bound apart are of different syncs. Every success leaves the bytes of the revision it reports
// (the reference), all of one sync's successes report the same revision, a
// success next to a failure is a violation (as for ops), and no peer's
// revision ever goes backwards.
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <tuple>
#include <vector>

#include "ferry/ferry.h"

namespace ferry::chaos {

struct OpReport {
  std::string peer;  // the reporting process's name, for messages
  std::uint64_t peer_id = 0;
  std::uint64_t step = 0;
  std::uint32_t k = 0;
  std::uint64_t epoch = 0;
  std::vector<std::uint64_t> ring;
  int result = FERRY_OK;
  std::string hash;
  double error = 0;  // quantized: max |result - reference|
  double t0 = 0, t1 = 0;
  double start_s = 0, stall_s = 0, commit_s = 0;  // ferry_op_info's phases
};

struct SyncReport {
  std::string peer;  // the reporting process's name, for messages
  std::uint64_t peer_id = 0;
  std::uint64_t step = 0;
  std::uint64_t epoch = 0;
  std::vector<std::uint64_t> ring;
  int result = FERRY_OK;
  std::uint64_t revision = 0;
  std::string hash;  // of the state's bytes after a success
  std::uint64_t received = 0;
  double t1 = 0;     // when it returned
};

// Seconds each phase of an op may take, and the whole op (see ChaosArgs::op_deadlines).
struct OpDeadlines {
  double start_s = 15, stall_s = 10, commit_s = 25, hang_s = 80;
};

// Which deadline `r` broke, in words; nullopt when it kept them all.
std::optional<std::string> deadline_breach(const OpReport& r, const OpDeadlines& d);

struct CheckerConfig {
  ferry_quant quant = FERRY_QUANT_NONE;
  OpDeadlines deadlines;
  // The hash of the exact result of (step, k) over `ring`.
  std::function<std::string(std::uint64_t step, std::uint32_t k, const std::vector<std::uint64_t>& ring)>
      reference_hash;
  // The hash of the shared state's bytes at `revision`.
  std::function<std::string(std::uint64_t revision)> state_hash;
};

class InvariantChecker {
 public:
  explicit InvariantChecker(CheckerConfig config);

  // Checks what one report shows alone and files it with its op. Once every
  // member of the op's ring has reported, the op gets its cross-peer checks
  // at once and is forgotten (so the reference work keeps pace with the run
  // instead of piling up for the end).
  void add(const OpReport& report);
  // Checks one shared-state sync report at once, alone and against the
  // earlier reports of the same sync and of the same peer.
  void add_sync(const SyncReport& report);
  // Cross-peer checks of every op whose latest report ended before `t` (all its
  // peers have reported by then, or never will: killed); those ops are then
  // forgotten.
  void settle(double t);
  void settle_all();
  // A violation found elsewhere (crashes, hangs, memory, convergence).
  void violation(std::string what);

  const std::vector<std::string>& violations() const { return violations_; }
  std::size_t violation_count() const { return violation_count_; }
  std::size_t ops_checked() const { return ops_checked_; }
  std::size_t references_checked() const { return references_checked_; }
  std::size_t syncs_checked() const { return syncs_checked_; }

 private:
  struct Op {
    std::vector<OpReport> reports;
    double last_t = 0;
  };
  using Key = std::tuple<std::uint64_t, std::vector<std::uint64_t>, std::uint64_t, std::uint32_t>;  // epoch, ring, step, k

  void check(const Key& key, const Op& op);

  // What one sync's reports showed so far.
  struct SyncRound {
    std::optional<SyncReport> first_ok, first_failed;
    double last_t = 0;
  };

  CheckerConfig config_;
  std::map<Key, Op> open_;
  using SyncKey = std::tuple<std::uint64_t, std::vector<std::uint64_t>, std::uint64_t>;  // epoch, ring, step
  std::map<SyncKey, SyncRound> syncs_;
  std::map<std::uint64_t, std::uint64_t> synced_revision_;              // by peer id: its last success's
  std::size_t syncs_checked_ = 0;
  std::vector<std::string> violations_;  // the first kMaxKept
  std::size_t violation_count_ = 0;
  std::size_t ops_checked_ = 0;
  std::size_t references_checked_ = 0;
};

}  // namespace ferry::chaos
