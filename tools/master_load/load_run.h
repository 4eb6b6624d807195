// One ferry-master-load run: a real ferry-master process, N fake peers
// (fake_peer.h) in this process, and the master's wall and CPU time per phase:
//  1. admission: every peer dials and says hello; the first of each group is
//     admitted alone (an empty group admits at once), then the accepted
//     members vote and admit the rest in one proposal, as update_topology does;
//  2. topology votes with nobody waiting (the ring stands: a new epoch);
//  3. collective rounds: every member begins, the master says go, every
//     member ends, the master commits; each peer begins the next on its verdict.
// The master's CPU is read from /proc (process_cpu.h) before and after each
// phase, so it counts only what the master spent, not the fake peers.
#pragma once

#include <cstdint>
#include <stdexcept>
#include <string>

namespace ferry::master_load {

struct LoadOptions {
  uint32_t peers = 64;
  uint32_t groups = 1;
  uint32_t rounds = 200;
  uint32_t votes = 5;
  uint32_t threads = 2;  // the fake peers' io threads
  std::string master_bin;
  std::string master_log_level = "info";  // ferry-master's default: what an operator runs
  double timeout_s = 120;                 // per phase
};

struct LoadResult {
  uint32_t welcomed = 0;
  uint32_t admitted = 0;
  double admit_s = 0;           // first dial to the last peer's topology_done
  double admit_master_cpu_s = 0;
  uint32_t admit_votes = 0;     // votes it took (1 when every waiting peer fit one proposal)
  double vote_s = 0;            // per vote
  double vote_master_cpu_s = 0; // per vote
  double round_s = 0;           // per round (every group's collective)
  double round_master_cpu_s = 0;
  uint64_t committed = 0;
  uint64_t aborted = 0;
  uint64_t expected_commits = 0;
  std::string abort_log;  // when a verdict aborted: the master's last log lines (they say why)
};

class LoadFailed : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Throws LoadFailed when the master cannot start, a fake peer's session
// fails, or a phase misses options.timeout_s.
LoadResult run_master_load(const LoadOptions& options);

}  // namespace ferry::master_load
