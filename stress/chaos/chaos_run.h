// One ferry-chaos run: ferry-master and the peers as child processes, the
// chaos proxy in front of every peer, the schedule of kills, joins and faults
// (all drawn from --seed), the invariant checks, then quiescence (faults off,
// everyone resumed) and the final checks: the membership converges to the
// live peers, memory stays bounded, nothing crashed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "chaos_args.h"

namespace ferry::chaos {

struct Percentiles {
  std::size_t samples = 0;
  double p50 = 0, p99 = 0, max = 0;
};

struct ChaosSummary {
  std::uint64_t ops_ok = 0;                        // successful op reports (one per peer per op)
  std::uint64_t ops_failed = 0;
  std::map<std::string, std::uint64_t> failed_by_error;
  std::uint64_t unique_ops_checked = 0;            // ops cross-checked between peers
  std::uint64_t references_checked = 0;            // ops compared with the reference reduction
  std::uint64_t syncs_ok = 0, syncs_failed = 0;    // shared-state sync reports (one per peer per sync)
  std::uint64_t syncs_checked = 0;                 // sync reports checked against the reference and each other
  std::uint64_t sync_bytes_received = 0;           // what the successful syncs fetched, over all peers
  std::uint64_t state_lost = 0;                    // newcomers that left: every holder of the state had left
  std::uint64_t kills = 0, joins = 0, removed = 0; // removed: peers that ended kicked or master-lost
  std::uint64_t dial_out_only_started = 0;         // peers started with dial_out_only (no listener)
  std::uint64_t relayed_links_seen = 0;            // rings in which a peer's next link was relayed (per peer)
  std::uint64_t relay_kills = 0;                   // kills of a peer that was relaying a live peer's link
  std::map<std::string, std::uint64_t> faults;     // by type
  Percentiles detect_latency_s;                    // kills: SIGKILL to the first survivor's failure
  std::map<std::string, Percentiles> detect_latency_by_fault;
  std::uint64_t max_step = 0;
  double longest_progress_gap_s = 0;
  bool converged = false;
  double convergence_s = 0;
  std::uint64_t master_rss_start_kib = 0, master_rss_end_kib = 0;
  std::uint64_t proxy_connections = 0, proxy_bytes = 0, proxy_corrupted = 0;
  std::vector<std::string> violations;
  std::uint64_t violation_count = 0;
  double wall_s = 0;
};

// Runs it; throws std::runtime_error when it cannot even start (binaries missing, master down).
ChaosSummary run_chaos(const ChaosArgs& args);

Percentiles percentiles(std::vector<double> samples);
std::string summary_text(const ChaosArgs& args, const ChaosSummary& summary);
std::string summary_json(const ChaosArgs& args, const ChaosSummary& summary);

}  // namespace ferry::chaos
