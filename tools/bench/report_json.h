// --json FILE: every run's figures, the machine, and the arguments, for scripts
// and for comparing runs later. Schema (keys only ever added):
//   {"runs": [{"impl": "ferry"|"gloo", "algorithm", "peers", "bytes", "count", "dtype", "op",
//              "quant": "none", "connections", "concurrent", "iters",
//              "time_s_median", "time_s_min", "algbw_GBps", "busbw_GBps",
//              "wire_bytes_per_peer" (null for gloo: not measured), "wire_bytes_ideal",
//              "bit_identical", "correct", "cpu_s_per_GB" (null for gloo),
//              "quant_agreement_s_median" (null but for ferry's integer-domain quantizations),
//              "result_hashes": [per op, when bit_identical], "times_s": [...]}],
//    "ratios": [{"bytes", "busbw_ferry_over_gloo"}],
//    "machine": {"nproc", "kernel", "os", "arch", "hostname", "cpu_model", "mem_total_bytes",
//                "loadavg", "ferry_version", "time_utc"},
//    "args": {"peers", "sizes", "dtype", "op", "connections", "concurrent", "iters", "warmup",
//             "baseline", "gloo_algorithm", "master", "cc", "secret_file", "io_threads", "chunk_bytes",
//             "timeout_s", "workload", "holders", "compression", "state_file", "tensors", "wan",
//             "wan_topology", "link_rate": null | {"bits_per_s", "from"}, "placement", "argv"},
//    "link_matrix": [{"from": {"rank", "peer_index", "peer_id", "host"}, "to": {...},
//                     "goodput_bytes_per_s", "delivery_rate_bytes_per_s", "rtt_ms", "retransmit_ratio",
//                     "bytes", "shared_memory", "age_s"}]}   (link_matrix.h)
#pragma once

#include <string>
#include <vector>

#include "aggregate.h"
#include "bench_args.h"
#include "json.h"  // tools/common
#include "link_matrix.h"

namespace ferry::bench {

using tooling::JsonWriter;

// The "machine" and "args" members, shared by every workload's record.
void write_machine(JsonWriter& json);
void write_args(JsonWriter& json, const BenchArgs& args, const std::string& placement);

// Appends "machine" and "args", closes the top-level object `json` holds, and
// writes it to `path`. Throws std::runtime_error when the file cannot be written.
void finish_json_report(JsonWriter& json, const std::string& path, const BenchArgs& args, const std::string& placement);

// Throws std::runtime_error when the file cannot be written.
void write_json_report(const std::string& path, const BenchArgs& args, const std::string& placement,
                       const std::vector<RunSummary>& runs, const std::vector<LinkMeasurement>& link_matrix);

}  // namespace ferry::bench
