// The orchestrator of --workload sync: a master, --holders peers holding
// identical state and one newcomer with different bytes (sync_peer_role.h),
// placed by the Launcher on hosts 0..H (the newcomer on host H); then, with
// --baseline tcp, a tcp-source on host 0 and tcp-sinks on host H moving the
// same bytes over 1 and over the sync's total connection count
// (tcp_baseline.h). Failure policy as orchestrator.h.
#pragma once

#include <vector>

#include "bench_args.h"
#include "binaries.h"
#include "placement.h"
#include "sync_report.h"

namespace ferry::bench {

// One summary per size.
std::vector<SyncSummary> run_sync(const BenchArgs& args, const Launcher& launcher, const Binaries& binaries);

// One summary per (connection count, size); content_hashes: the holders' per size.
std::vector<SyncSummary> run_tcp_baseline(const BenchArgs& args, const Launcher& launcher, const Binaries& binaries,
                                          const std::vector<std::string>& content_hashes);

}  // namespace ferry::bench
