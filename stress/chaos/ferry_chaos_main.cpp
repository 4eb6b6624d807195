// ferry-chaos: proves a ferry run survives churn and network faults. See
// chaos_run.h for what it does and README.md (Chaos) for how to run a soak.
// Exit status: 0 when no invariant was violated, 1 when one was, 2 on bad
// arguments, 3 when the run could not start.
#include <cstdio>
#include <fstream>
#include <stdexcept>

#include "chaos_args.h"
#include "chaos_run.h"
#include "child_process.h"  // tools/common

int main(int argc, char** argv) {
  ferry::chaos::ChaosArgs args;
  int exit_code = 0;
  if (!ferry::chaos::parse_chaos_args(argc, argv, &args, &exit_code)) return exit_code;
  ferry::tooling::install_child_cleanup_on_signals();
  ferry::chaos::ChaosSummary summary;
  try {
    summary = ferry::chaos::run_chaos(args);
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ferry-chaos: %s\n", e.what());
    return 3;
  }
  std::fputs(ferry::chaos::summary_text(args, summary).c_str(), stdout);
  if (!args.json_path.empty()) {
    std::ofstream out(args.json_path);
    out << ferry::chaos::summary_json(args, summary);
    if (!out) {
      std::fprintf(stderr, "ferry-chaos: cannot write %s\n", args.json_path.c_str());
      return 3;
    }
  }
  return summary.violation_count == 0 ? 0 : 1;
}
