// From what every rank measured to one row per size, nccl-tests style:
//   time of an iteration  = the slowest rank's (max over ranks)
//   time_s_median / _min  = over the timed iterations
//   algbw = C * S / time_s_median   (GB/s, 1e9; C concurrent ops of S bytes)
//   busbw = algbw * 2(N-1)/N        (what each link carries in a ring)
//   all_gather (S per peer): algbw = C * N * S / time_s_median, busbw = algbw * (N-1)/N,
//                           wire ideal (N-1) * C * S, as nccl-tests' all_gather_perf
//   wire_bytes_per_peer   = bytes a peer sent per iteration, mean over peers and
//                           iterations (the ring's ideal: 2(N-1)/N * C * S)
//   bit_identical         = for every op, every rank's result hash is the same
//   correct               = every rank's every result is the exact expected one
//   cpu_s_per_GB          = the peers' CPU seconds in the timed iterations,
//                           summed, per GB all-reduced (C * S * iters)
//   quant_agreement_s_median = the integer-domain quantizations' scale agreement
//                           (ferry_op_info.quant_agreement_s), slowest rank per
//                           iteration, median over iterations
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "bench_args.h"
#include "rank_report.h"

namespace ferry::bench {

struct RunSummary {
  std::string impl;  // "ferry" or "gloo"
  std::string collective = "allreduce";  // BenchArgs::collective
  std::string algorithm;  // what ran: "ring" (ferry), Gloo's --gloo-algorithm
  int peers = 0;
  std::size_t bytes = 0;
  std::size_t count = 0;  // elements per op
  std::string dtype;
  std::string op;
  std::string quant = "none";
  std::uint32_t connections = 0;
  std::uint32_t concurrent = 0;
  std::vector<double> times_s;  // per timed iteration, slowest rank
  double time_s_median = 0;
  double time_s_min = 0;
  double algbw_GBps = 0;
  double busbw_GBps = 0;
  std::optional<double> wire_bytes_per_peer;  // not measured for Gloo
  double wire_bytes_ideal = 0;                // 2(N-1)/N * C * S (0 for a SparseLoCo step: data-dependent)
  bool bit_identical = false;
  bool correct = false;
  std::optional<double> cpu_s_per_GB;  // not measured for Gloo
  std::optional<double> quant_agreement_s_median;  // ferry with i8h, i4h, ...
  // What carried the ring's bytes: "tcp", "shared_memory" (every peer's every
  // lane) or "mixed"; always "tcp" for Gloo.
  std::string links = "tcp";
  std::vector<std::string> result_hashes;  // per op, when bit_identical
  // The ring it ran, from rank 0 on: each peer's host name (emulated WAN) or
  // "peer I" (loopback). Gloo's is rank order. ring_order: how the master
  // chose it ("best", or "arrival" for the arrival baseline; "rank" for Gloo).
  std::vector<std::string> ring;
  std::string ring_order;
  // The ring's links that went through a relay (ferry only): their ends and the relay, named
  // as in `ring`; and the bytes relays forwarded since the peers started (FERRY_ATTR_RELAYED_BYTES).
  struct RelayedHop {
    std::string from, to, relay;
  };
  std::vector<RelayedHop> relayed_hops;
  std::uint64_t relayed_bytes = 0;
};

struct RunShape {
  std::string impl;
  std::string algorithm;
  std::uint32_t connections = 0;
  std::uint32_t concurrent = 0;
};

// per_rank[r] holds rank r's reports, one per size in args.sizes order. Throws
// std::runtime_error naming the rank when a report is missing or inconsistent.
std::vector<RunSummary> summarize(const BenchArgs& args, const RunShape& shape,
                                  const std::vector<std::vector<RankReport>>& per_rank);

// The row of size args.sizes[s] alone, as summarize() makes it: every per_rank[r]
// must hold at least s + 1 reports (the table prints a size as soon as it has them).
RunSummary summarize_size(const BenchArgs& args, const RunShape& shape,
                          const std::vector<std::vector<RankReport>>& per_rank, std::size_t s);

double median(std::vector<double> values);

}  // namespace ferry::bench
