// The line ferry-chaos prints on stderr every --progress-every seconds, so an
// hour's soak is not an hour of silence before its summary:
//   ferry-chaos: 40 s of 3600: ops 812 ok, 14 failed; 5 peers live; kills 2, joins 3, faults 9, master restarts 1; violations 0
// After the chaos, while the membership settles:
//   ferry-chaos: 3610 s, quiescing for 10 s: ops ...
// "master restarts" appears once there has been one. The counts are the
// summary's so far (ops: one report per peer per op, as in the summary).
#pragma once

#include <cstddef>
#include <string>

#include "chaos_run.h"

namespace ferry::chaos {

struct ChaosProgress {
  double elapsed_s = 0;
  double duration_s = 0;       // --duration
  double quiescing_s = -1;     // seconds since quiescence began; negative while the chaos runs
  std::size_t live_peers = 0;
  int master_restarts = 0;
  std::size_t violations = 0;  // so far, including those the summary will list
};

std::string progress_line(const ChaosProgress& progress, const ChaosSummary& so_far);

}  // namespace ferry::chaos
