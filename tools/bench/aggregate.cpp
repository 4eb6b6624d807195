#include "aggregate.h"

#include <algorithm>
#include <stdexcept>

namespace ferry::bench {

double median(std::vector<double> values) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  const std::size_t mid = values.size() / 2;
  return values.size() % 2 == 1 ? values[mid] : (values[mid - 1] + values[mid]) / 2;
}

namespace {

void check_report(const BenchArgs& args, const RunShape& shape, std::size_t rank_slot, std::size_t size_index,
                  const RankReport& report) {
  const std::string who = shape.impl + " rank " + std::to_string(rank_slot) + ", size " +
                          std::to_string(args.sizes[size_index]) + ": ";
  if (report.bytes != args.sizes[size_index]) {
    throw std::runtime_error(who + "reported " + std::to_string(report.bytes) + " bytes instead");
  }
  if (report.world != args.peers) {
    throw std::runtime_error(who + "ran in a world of " + std::to_string(report.world) + ", not " +
                             std::to_string(args.peers));
  }
  if (report.times_s.size() != static_cast<std::size_t>(args.iters)) {
    throw std::runtime_error(who + std::to_string(report.times_s.size()) + " timings for " +
                             std::to_string(args.iters) + " iterations");
  }
  if (report.hashes.size() != shape.concurrent) {
    throw std::runtime_error(who + std::to_string(report.hashes.size()) + " result hashes for " +
                             std::to_string(shape.concurrent) + " ops");
  }
}

}  // namespace

RunSummary summarize_size(const BenchArgs& args, const RunShape& shape,
                          const std::vector<std::vector<RankReport>>& per_rank, std::size_t s) {
  const double n = static_cast<double>(args.peers);
  RunSummary run;
  run.impl = shape.impl;
  run.algorithm = shape.algorithm;
  run.peers = args.peers;
  run.bytes = args.sizes[s];
  run.count = run.bytes / elem_type_size(args.dtype);
  run.dtype = elem_type_name(args.dtype);
  run.op = reduce_kind_name(args.op);
  run.connections = shape.connections;
  run.quant = shape.impl == "ferry" ? args.quant : "none";
  run.concurrent = shape.concurrent;
  run.times_s.assign(static_cast<std::size_t>(args.iters), 0.0);
  run.bit_identical = true;
  run.correct = true;
  double sent_total = 0;
  std::size_t sent_samples = 0;
  double cpu_total = 0;
  bool cpu_known = true;
  std::size_t shm_ranks = 0;
  std::vector<double> agreement_s;  // per timed iteration, slowest rank
  for (std::size_t r = 0; r < per_rank.size(); ++r) {
    const RankReport& report = per_rank[r][s];
    check_report(args, shape, r, s, report);
    for (std::size_t i = 0; i < run.times_s.size(); ++i) run.times_s[i] = std::max(run.times_s[i], report.times_s[i]);
    if (agreement_s.size() < report.agreement_s.size()) agreement_s.resize(report.agreement_s.size(), 0.0);
    for (std::size_t i = 0; i < report.agreement_s.size(); ++i)
      agreement_s[i] = std::max(agreement_s[i], report.agreement_s[i]);
    for (const std::uint64_t sent : report.bytes_sent) sent_total += static_cast<double>(sent);
    sent_samples += report.bytes_sent.size();
    cpu_known = cpu_known && report.cpu_s.has_value();
    cpu_total += report.cpu_s.value_or(0.0);
    if (report.shared_memory_lanes.value_or(0) > 0) ++shm_ranks;
    run.correct = run.correct && report.correct;
    run.bit_identical = run.bit_identical && report.hashes == per_rank[0][s].hashes;
  }
  run.collective = args.collective;
  // An all-gather's op is its whole result, N contributions of S (nccl-tests' size), of which
  // each link carries (N-1)/N; an all-reduce's links carry 2(N-1)/N of its S.
  const double op_bytes = static_cast<double>(run.bytes) * shape.concurrent * (is_all_gather(args) ? n : 1.0);
  const double bus_factor = is_all_gather(args) ? (n - 1) / n : 2 * (n - 1) / n;
  run.time_s_median = median(run.times_s);
  run.time_s_min = *std::min_element(run.times_s.begin(), run.times_s.end());
  run.algbw_GBps = run.time_s_median > 0 ? op_bytes / run.time_s_median / 1e9 : 0;
  run.busbw_GBps = run.algbw_GBps * bus_factor;
  run.wire_bytes_ideal = is_sparse_step(args) ? 0 : op_bytes * bus_factor;  // sparse: what the data allows
  if (sent_samples > 0) run.wire_bytes_per_peer = sent_total / static_cast<double>(sent_samples);
  run.links = shm_ranks == 0 ? "tcp" : shm_ranks == per_rank.size() ? "shared_memory" : "mixed";
  if (!agreement_s.empty() && *std::max_element(agreement_s.begin(), agreement_s.end()) > 0)
    run.quant_agreement_s_median = median(agreement_s);
  if (cpu_known && !per_rank.empty()) run.cpu_s_per_GB = cpu_total / (op_bytes * args.iters / 1e9);
  if (run.bit_identical && !per_rank.empty()) run.result_hashes = per_rank[0][s].hashes;
  return run;
}

std::vector<RunSummary> summarize(const BenchArgs& args, const RunShape& shape,
                                  const std::vector<std::vector<RankReport>>& per_rank) {
  for (std::size_t r = 0; r < per_rank.size(); ++r) {
    if (per_rank[r].size() != args.sizes.size()) {
      throw std::runtime_error(shape.impl + " rank " + std::to_string(r) + " reported " +
                               std::to_string(per_rank[r].size()) + " sizes of " + std::to_string(args.sizes.size()));
    }
  }
  std::vector<RunSummary> runs;
  for (std::size_t s = 0; s < args.sizes.size(); ++s) runs.push_back(summarize_size(args, shape, per_rank, s));
  return runs;
}

}  // namespace ferry::bench
