// The orchestrator role: starts the processes of a run where the Launcher
// places them, watches them against one deadline, and turns their JSON lines
// into one RunSummary per size.
//
// Failure policy: the first child to fail (non-zero exit, signal, the master
// ending early) fails the whole run. The others get two seconds to end on
// their own (so their logs say what they saw), then every process group is
// killed and RunFailed names the culprit with the tail of its stderr.
#pragma once

#include <cstddef>
#include <functional>
#include <stdexcept>
#include <string>
#include <vector>

#include "aggregate.h"
#include "bench_args.h"
#include "binaries.h"
#include "child_process.h"  // tools/common
#include "link_matrix.h"
#include "placement.h"
#include "row_feed.h"

namespace ferry::bench {

class RunFailed : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Watches `workers` (and `master`, when not null, which must outlive them)
// until every worker ended well (exit 0, or 3: a whole report of a wrong
// result). Throws RunFailed on a failure or at the deadline; `label` names the
// run and `sizes` the report lines each worker owes, for the messages.
// after_read, when given, runs after each round of reading their output.
void watch(tooling::ChildSet& children, const std::vector<tooling::Child*>& workers, tooling::Child* master,
           tooling::Clock::time_point deadline, double deadline_s, const std::string& label, std::size_t sizes,
           const std::function<void()>& after_read = {});

// Spawns argv (placed at `where`), which must print "NAME listening on
// HOST:PORT" first on stdout, and returns PORT. Throws RunFailed (with its
// stderr) when it gives no port in time.
std::string start_listener(tooling::ChildSet& children, const std::string& name, const std::vector<std::string>& argv,
                           const Placement& where, tooling::Child*& child);

// Starts ferry-master on port 0 where the launcher places it (every address
// of its host) and returns its port. Throws RunFailed when it gives no port.
std::string start_master(const BenchArgs& args, tooling::ChildSet& children, const Launcher& launcher,
                         const Binaries& binaries, tooling::Child*& master);

// The deadline run_deadline_s(args) from now.
tooling::Clock::time_point run_deadline(const BenchArgs& args);

// Starts ferry-master (unless --master) and args.peers peer processes (this
// binary, --role peer; peer i on the launcher's host i, named name_of(i)),
// watches them to the end, and returns each peer's stdout. on_output, when
// given, sees the peers (in index order) after each round of reading.
std::vector<std::string> run_ferry_peers(const BenchArgs& args, const Launcher& launcher, const Binaries& binaries,
                                         const std::string& label, const std::function<std::string(int)>& name_of,
                                         const std::function<void(const std::vector<tooling::Child*>&)>& on_output = {});

struct FerryRun {
  std::vector<RunSummary> runs;             // one per size
  std::vector<LinkMeasurement> link_matrix; // as rank 0 read it after the last size
};

// ferry-master (unless --master) and N peers. Throws std::runtime_error when a
// peer's report is missing or malformed, the link matrix included. on_row gets
// each size's row as soon as every peer has reported it (row_feed.h).
FerryRun run_ferry(const BenchArgs& args, const Launcher& launcher, const Binaries& binaries, const OnRow& on_row);

// N ferry-gloo-bench ranks meeting in a fresh FileStore directory; on_row as run_ferry's.
std::vector<RunSummary> run_gloo(const BenchArgs& args, const Launcher& launcher, const Binaries& binaries,
                                 const OnRow& on_row);

}  // namespace ferry::bench
