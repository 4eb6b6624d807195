#include "report_table.h"

#include <utility>

#include "bench_args.h"

namespace ferry::bench {

namespace {

constexpr const char* kHeaderFormat = "#%11s %11s %5s %5s %5s %4s %9s %9s %7s %7s %9s %9s %7s %8s\n";

const char* yes_no(bool flag) { return flag ? "yes" : "NO"; }

}  // namespace

TableStream::TableStream(std::FILE* out, std::function<std::string(const RunSummary&)> title)
    : out_(out), title_(std::move(title)) {}

void TableStream::row(const RunSummary& run) {
  if (rows_++ == 0) {
    std::fprintf(out_, "#\n# %s\n#\n", title_(run).c_str());
    std::fprintf(out_, kHeaderFormat, "size", "count", "type", "redop", "conns", "conc", "time(ms)", "min(ms)", "algbw",
                 "busbw", "wire MB", "bit-", "correct", "cpu s");
    std::fprintf(out_, kHeaderFormat, "(B)", "(elements)", "", "", "", "", "median", "", "(GB/s)", "(GB/s)",
                 "per peer", "identical", "", "per GB");
  }
  char wire[32] = "-";
  if (run.wire_bytes_per_peer) std::snprintf(wire, sizeof wire, "%.2f", *run.wire_bytes_per_peer / 1e6);
  char cpu[32] = "-";
  if (run.cpu_s_per_GB) std::snprintf(cpu, sizeof cpu, "%.2f", *run.cpu_s_per_GB);
  std::fprintf(out_, " %11zu %11zu %5s %5s %5u %4u %9.3f %9.3f %7.3f %7.3f %9s %9s %7s %8s\n", run.bytes, run.count,
               run.dtype.c_str(), run.op.c_str(), run.connections, run.concurrent, run.time_s_median * 1e3,
               run.time_s_min * 1e3, run.algbw_GBps, run.busbw_GBps, wire, yes_no(run.bit_identical),
               yes_no(run.correct), cpu);
  // A pipe is block-buffered: without this a `| tee` sees the table only when the process ends.
  std::fflush(out_);
}

void TableStream::finish(const std::vector<RunSummary>& runs) {
  for (std::size_t i = rows_; i < runs.size(); ++i) row(runs[i]);
}

std::string links_name(const std::vector<RunSummary>& runs) {
  std::string links;
  for (const RunSummary& run : runs) links = links.empty() || links == run.links ? run.links : "mixed";
  if (links == "shared_memory") return "shared memory";
  if (links == "mixed") return "partly shared memory";
  return "TCP";
}

void print_ratios(std::FILE* out, const std::vector<RunSummary>& ferry, const std::vector<RunSummary>& baseline) {
  if (ferry.empty() || baseline.empty()) return;
  const std::string name = baseline.front().ring_order == "arrival" ? "arrival order" : baseline.front().impl;
  std::fprintf(out, "#\n# busbw ferry (%s)/%s (%s):", links_name(ferry).c_str(), name.c_str(),
               links_name(baseline).c_str());
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
  std::fprintf(out, "\n# results: ferry's op 0 and %s's are the same bytes at every size: %s\n", name.c_str(),
               yes_no(same_bytes));
  // Shared memory against a baseline on TCP is two transports, not two libraries: say how to compare like with like.
  if (links_name(ferry) != links_name(baseline))
    std::fprintf(out, "# ferry's ring ran on %s, %s's on %s: --shared-memory off compares both on TCP\n",
                 links_name(ferry).c_str(), name.c_str(), links_name(baseline).c_str());
  std::fprintf(out, "#\n");
  std::fflush(out);
}

}  // namespace ferry::bench
