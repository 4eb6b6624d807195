// ferry-chaos's progress line, without processes.
#include <catch2/catch.hpp>

#include "chaos_progress.h"

using namespace ferry::chaos;

TEST_CASE("the progress line counts what the summary will, and names master restarts once there are some",
          "[chaos]") {
  ChaosSummary so_far;
  so_far.ops_ok = 812;
  so_far.ops_failed = 14;
  so_far.kills = 2;
  so_far.joins = 3;
  so_far.faults = {{"reset", 4}, {"master", 5}};
  ChaosProgress progress;
  progress.elapsed_s = 40.4;
  progress.duration_s = 3600;
  progress.live_peers = 5;
  progress.violations = 1;
  CHECK(progress_line(progress, so_far) ==
        "ferry-chaos: 40 s of 3600: ops 812 ok, 14 failed; 5 peers live; kills 2, joins 3, faults 9; violations 1\n");
  progress.master_restarts = 1;
  progress.elapsed_s = 3610;
  progress.quiescing_s = 10;
  CHECK(progress_line(progress, so_far) ==
        "ferry-chaos: 3610 s, quiescing for 10 s: ops 812 ok, 14 failed; 5 peers live; kills 2, joins 3, faults 9, "
        "master restarts 1; violations 1\n");
}
