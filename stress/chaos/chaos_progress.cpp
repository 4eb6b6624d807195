#include "chaos_progress.h"

#include <cstdint>
#include <cstdio>

namespace ferry::chaos {

std::string progress_line(const ChaosProgress& progress, const ChaosSummary& so_far) {
  char when[96];
  if (progress.quiescing_s < 0)
    std::snprintf(when, sizeof when, "%.0f s of %.0f", progress.elapsed_s, progress.duration_s);
  else
    std::snprintf(when, sizeof when, "%.0f s, quiescing for %.0f s", progress.elapsed_s, progress.quiescing_s);
  std::uint64_t faults = 0;
  for (const auto& [kind, count] : so_far.faults) faults += count;
  std::string line = "ferry-chaos: " + std::string(when) + ": ops " + std::to_string(so_far.ops_ok) + " ok, " +
                     std::to_string(so_far.ops_failed) + " failed; " + std::to_string(progress.live_peers) +
                     " peers live; kills " + std::to_string(so_far.kills) + ", joins " + std::to_string(so_far.joins) +
                     ", faults " + std::to_string(faults);
  if (progress.master_restarts > 0) line += ", master restarts " + std::to_string(progress.master_restarts);
  return line + "; violations " + std::to_string(progress.violations) + "\n";
}

}  // namespace ferry::chaos
