// The sync workload's figures: from the newcomer's, the holders' and the TCP
// sinks' report lines (sync_peer_role.h, tcp_baseline.h) to one row per
// (implementation, size), the table, and --json.
//
//   time of an iteration = the newcomer's ferry_sync_shared_state, call to
//                          return (tcp: the sink's first connect to last byte)
//   throughput           = bytes / median time (GB/s, 1e9; and Mbit/s)
//   wire_bytes_received  = ferry_sync_info.bytes_received, median over iterations
//                          (frame headers included; compressed bytes when compressed)
//   compression_ratio    = bytes / wire_bytes_received
//   correct              = after every timed sync the newcomer's state hashed to
//                          the holders' content, every holder kept it, and every
//                          tensor was reported changed (tcp: the sink received
//                          the holders' content)
//   sync_over_tcp        = ferry's throughput / the baseline's, same size
//
// JSON (keys only ever added):
//   {"workload": "sync",
//    "runs": [{"impl": "ferry-sync"|"tcp", "bytes", "holders", "tensors", "compression",
//              "connections" (ferry: per holder, p2p_connections; tcp: K), "total_connections",
//              "iters", "time_s_median", "time_s_min", "throughput_GBps", "throughput_Mbps",
//              "wire_bytes_received" (null for tcp), "compression_ratio" (null for tcp),
//              "sync_duration_s_median" (ferry_sync_info.duration_s; null for tcp),
//              "newcomer_cpu_s_per_GB", "holder_cpu_s_per_GB" (null for tcp),
//              "correct", "content_hash", "times_s": [...]}],
//    "ratios": [{"bytes", "tcp_connections", "sync_over_tcp"}],
//    "machine": {...}, "args": {... as ferry-bench's, plus "workload", "holders",
//    "compression", "state_file", "tensors"}}
#pragma once

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "bench_args.h"

namespace ferry::bench {

struct SyncSummary {
  std::string impl;  // "ferry-sync" or "tcp"
  std::size_t bytes = 0;
  int holders = 0;
  std::uint32_t tensors = 0;
  std::uint32_t compression = 0;
  std::uint32_t connections = 0;
  std::uint32_t total_connections = 0;
  std::vector<double> times_s;
  double time_s_median = 0;
  double time_s_min = 0;
  double throughput_GBps = 0;
  std::optional<double> wire_bytes_received;
  std::optional<double> compression_ratio;
  std::optional<double> sync_duration_s_median;
  std::optional<double> newcomer_cpu_s_per_GB;
  std::optional<double> holder_cpu_s_per_GB;
  bool correct = false;
  std::string content_hash;  // the holders'
  std::vector<std::string> problems;  // why not correct
};

// The TCP connections the newcomer opens: p2p_connections per holder, at most 16 in all
// (src/peer/shared_state_sync.cpp), at least one per holder.
std::uint32_t sync_total_connections(const BenchArgs& args);

// peer_outs: each ferry peer's stdout, holders first, the newcomer last. Throws
// std::runtime_error on a missing or malformed line.
std::vector<SyncSummary> summarize_sync(const BenchArgs& args, const std::vector<std::string>& peer_outs);

// A sink's stdout; content_hashes: the holders' per size (from summarize_sync), to check the bytes.
std::vector<SyncSummary> summarize_tcp(const BenchArgs& args, std::uint32_t connections, const std::string& sink_out,
                                       const std::vector<std::string>& content_hashes);

void print_sync_table(std::FILE* out, const std::string& title, const std::vector<SyncSummary>& runs);

// Throws std::runtime_error when the file cannot be written.
void write_sync_json(const std::string& path, const BenchArgs& args, const std::string& placement,
                     const std::vector<SyncSummary>& runs);

}  // namespace ferry::bench
