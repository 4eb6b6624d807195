// Turns the ranks' stdout, as it arrives, into table rows: size s is
// summarized (summarize_size) the moment every rank has printed its report
// line, so the table grows as nccl-tests' does instead of appearing at the end.
// Only whole lines are read; the rows come in --sizes order, each once.
#pragma once

#include <cstddef>
#include <functional>
#include <string>
#include <vector>

#include "aggregate.h"
#include "bench_args.h"
#include "child_process.h"  // tools/common
#include "rank_report.h"

namespace ferry::bench {

using ReportParser = std::vector<RankReport> (*)(const std::string& out, const std::string& who);
using OnRow = std::function<void(const RunSummary&)>;

class RowFeed {
 public:
  // parse: parse_ferry_reports or parse_gloo_reports. on_row may be empty (no table wanted).
  RowFeed(const BenchArgs& args, RunShape shape, ReportParser parse, OnRow on_row);

  // Looks at what the ranks (in rank-slot order, as summarize() takes them) printed so far.
  void read(const std::vector<tooling::Child*>& ranks);

 private:
  const BenchArgs& args_;
  RunShape shape_;
  ReportParser parse_;
  OnRow on_row_;
  std::size_t next_size_ = 0;
  std::vector<std::size_t> whole_bytes_seen_;  // per rank: the stdout prefix up to its last newline, last time
};

}  // namespace ferry::bench
