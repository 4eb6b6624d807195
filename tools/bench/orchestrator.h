// The orchestrator role: starts the processes of a run where the Launcher
// places them, watches them against one deadline, and turns their JSON lines
// into one RunSummary per size.
//
// Failure policy: the first child to fail (non-zero exit, signal, the master
// ending early) fails the whole run. The others get two seconds to end on
// their own (so their logs say what they saw), then every process group is
// killed and RunFailed names the culprit with the tail of its stderr.
#pragma once

#include <stdexcept>
#include <vector>

#include "aggregate.h"
#include "bench_args.h"
#include "binaries.h"
#include "placement.h"

namespace ferry::bench {

class RunFailed : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// ferry-master (unless --master) and N peers; one summary per size.
std::vector<RunSummary> run_ferry(const BenchArgs& args, const Launcher& launcher, const Binaries& binaries);

// N ferry-gloo-bench ranks meeting in a fresh FileStore directory.
std::vector<RunSummary> run_gloo(const BenchArgs& args, const Launcher& launcher, const Binaries& binaries);

}  // namespace ferry::bench
