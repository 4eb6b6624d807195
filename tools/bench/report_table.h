// The human-readable output: one nccl-tests-style table per implementation,
// each row printed (and flushed) as its size finishes, then ferry's busbw over
// the baseline's, size by size.
#pragma once

#include <cstddef>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "aggregate.h"

namespace ferry::bench {

// One implementation's table, printed as it grows: the title and the column
// headers with the first row, then each row as it comes.
class TableStream {
 public:
  // title(first row): "ferry all-reduce: 3 peers, local (127.0.0.1), ..."; it
  // may say what the first size found (the links that carried it).
  TableStream(std::FILE* out, std::function<std::string(const RunSummary&)> title);

  // Prints `run` as the next row (and the head, first), flushed.
  void row(const RunSummary& run);
  // After the run: prints the rows of `runs` not printed yet, so the table is whole
  // even if a size's last line came with the process's end.
  void finish(const std::vector<RunSummary>& runs);

 private:
  std::FILE* out_;
  std::function<std::string(const RunSummary&)> title_;
  std::size_t rows_ = 0;
};

// One line of ratios (ferry busbw / baseline busbw per size), and whether
// ferry's first op produced the very bytes the baseline did. The line names
// what carried each side's bytes ("ferry (shared memory)/gloo (TCP)"), so a
// shared-memory figure is never read as one over TCP.
void print_ratios(std::FILE* out, const std::vector<RunSummary>& ferry, const std::vector<RunSummary>& baseline);

// "shared memory", "TCP", "partly shared memory": what carried a run's ring links.
std::string links_name(const std::vector<RunSummary>& runs);

}  // namespace ferry::bench
