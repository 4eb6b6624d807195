// The master's /metrics: Prometheus' text exposition of the run (run_view.h),
// its counters and histograms (master_stats.h) and the master's own process,
// formatted by prometheus-cpp (Debian: prometheus-cpp-dev). Every metric and
// what it means: docs/operating.md, "Watching a run". Reads /proc for the process figures;
// otherwise pure. Call it on any thread with values the caller owns.
#pragma once

#include <string>

#include "master/master_stats.h"
#include "master/run_view.h"

namespace ferry::master {

std::string metrics_text(const RunView& view, const MasterStats& stats);

}  // namespace ferry::master
