// The master's /status document: the run (run_view.h), its totals
// (master_stats.h) and its recent history (run_journal.h) as JSON, for
// scripts and the dashboard. The schema is in docs/operating.md ("Watching a run").
// Pure: no I/O, no clock of its own.
#pragma once

#include <cstdint>
#include <string>

#include "master/master_stats.h"
#include "master/run_journal.h"
#include "master/run_view.h"

namespace ferry::master {

struct StatusContext {
  std::string listen;       // the master's address, as an operator would dial it
  double now_unix = 0;      // wall-clock time at view.now_ms: the state's times are mapped through it
  uint64_t started_ms = 0;  // the state's clock when the master started (for its uptime)
};

std::string status_json(const RunView& view, const MasterStats& stats, const RunJournal& journal,
                        const StatusContext& context);

}  // namespace ferry::master
