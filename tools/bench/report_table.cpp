#include "report_table.h"

#include "bench_args.h"

namespace ferry::bench {

namespace {

constexpr const char* kHeaderFormat = "#%11s %11s %5s %5s %5s %4s %9s %9s %7s %7s %9s %9s %7s %8s\n";

const char* yes_no(bool flag) { return flag ? "yes" : "NO"; }

}  // namespace

void print_table(std::FILE* out, const std::string& title, const std::vector<RunSummary>& runs) {
  std::fprintf(out, "#\n# %s\n#\n", title.c_str());
  std::fprintf(out, kHeaderFormat, "size", "count", "type", "redop", "conns", "conc", "time(ms)", "min(ms)", "algbw",
               "busbw", "wire MB", "bit-", "correct", "cpu s");
  std::fprintf(out, kHeaderFormat, "(B)", "(elements)", "", "", "", "", "median", "", "(GB/s)", "(GB/s)", "per peer",
               "identical", "", "per GB");
  for (const RunSummary& run : runs) {
    char wire[32] = "-";
    if (run.wire_bytes_per_peer) std::snprintf(wire, sizeof wire, "%.2f", *run.wire_bytes_per_peer / 1e6);
    char cpu[32] = "-";
    if (run.cpu_s_per_GB) std::snprintf(cpu, sizeof cpu, "%.2f", *run.cpu_s_per_GB);
    std::fprintf(out, " %11zu %11zu %5s %5s %5u %4u %9.3f %9.3f %7.3f %7.3f %9s %9s %7s %8s\n", run.bytes,
                 run.count, run.dtype.c_str(), run.op.c_str(), run.connections, run.concurrent,
                 run.time_s_median * 1e3, run.time_s_min * 1e3, run.algbw_GBps, run.busbw_GBps, wire,
                 yes_no(run.bit_identical), yes_no(run.correct), cpu);
  }
  std::fflush(out);
}

void print_ratios(std::FILE* out, const std::vector<RunSummary>& ferry, const std::vector<RunSummary>& baseline) {
  if (ferry.empty() || baseline.empty()) return;
  const std::string name = baseline.front().ring_order == "arrival" ? "arrival order" : baseline.front().impl;
  std::fprintf(out, "#\n# busbw ferry/%s:", name.c_str());
  bool same_bytes = true;
  for (const RunSummary& ours : ferry) {
    for (const RunSummary& theirs : baseline) {
      if (theirs.bytes != ours.bytes) continue;
      if (theirs.busbw_GBps > 0) {
        std::fprintf(out, "  %s %.2fx", format_byte_size(ours.bytes).c_str(), ours.busbw_GBps / theirs.busbw_GBps);
      }
      same_bytes = same_bytes && !ours.result_hashes.empty() && !theirs.result_hashes.empty() &&
                   ours.result_hashes.front() == theirs.result_hashes.front();
    }
  }
  std::fprintf(out, "\n# results: ferry's op 0 and %s's are the same bytes at every size: %s\n#\n", name.c_str(),
               yes_no(same_bytes));
  std::fflush(out);
}

}  // namespace ferry::bench
