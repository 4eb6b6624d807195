// What one rank (a ferry peer process or a Gloo rank) measured for one size: the
// JSON line it prints on stdout, and its parsed form for the orchestrator.
//
// ferry peer line (one per size, in --sizes order):
//   {"impl":"ferry","peer_index":1,"rank":0,"peer_id":7,"world":3,"bytes":1048576,"dtype":"f32","op":"sum",
//    "connections":4,"concurrent":2,"times_s":[...],"bytes_sent":[...],"agreement_s":[...],"cpu_s":0.12,
//    "hashes":["<xxh3 hex per op>",...],"correct":true}
//   times_s / bytes_sent: one entry per timed iteration (bytes_sent summed over the
//   concurrent ops); agreement_s: the longest ferry_op_info.quant_agreement_s of the
//   iteration's ops (0 but for the integer-domain quantizations);
//   cpu_s: this process's user+sys CPU over the timed iterations;
//   hashes: every op's result in the last iteration, tag order; peer_id: FERRY_ATTR_PEER_ID;
//   "next_link_relay", "relayed_bytes": FERRY_ATTR_NEXT_LINK_RELAY and FERRY_ATTR_RELAYED_BYTES.
// After the sizes, rank 0 prints one link-matrix line (link_matrix.h).
// Gloo rank line: see tools/gloo_baseline/README.md (one hash, no bytes_sent; a
// "cpu_s" over the timed iterations is used when present).
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "bench_args.h"

namespace ferry::bench {

struct RankReport {
  int rank = -1;        // ring position (ferry) or Gloo rank
  int peer_index = -1;  // ferry: which process of the orchestrator's; Gloo: the rank
  std::uint64_t peer_id = 0;  // ferry: FERRY_ATTR_PEER_ID; 0 for Gloo
  int world = 0;
  std::size_t bytes = 0;
  std::vector<double> times_s;
  std::vector<std::uint64_t> bytes_sent;  // empty when not measured (Gloo)
  std::vector<double> agreement_s;        // empty when not measured (Gloo)
  std::optional<double> cpu_s;            // empty when not measured (Gloo)
  std::optional<int> shared_memory_lanes; // ferry: FERRY_ATTR_SHARED_MEMORY_LANES; empty for Gloo
  std::uint64_t next_link_relay = 0;      // ferry: FERRY_ATTR_NEXT_LINK_RELAY (0: direct)
  std::uint64_t relayed_bytes = 0;        // ferry: FERRY_ATTR_RELAYED_BYTES after this size's iterations
  std::vector<std::string> hashes;        // per op, last iteration
  bool correct = false;
};

std::string ferry_report_line(const BenchArgs& args, const RankReport& report);

// Parses every line of a child's stdout (ferry: but the link-matrix line). Throws
// std::runtime_error naming `who` and the offending line.
std::vector<RankReport> parse_ferry_reports(const std::string& out, const std::string& who);
std::vector<RankReport> parse_gloo_reports(const std::string& out, const std::string& who);

}  // namespace ferry::bench
