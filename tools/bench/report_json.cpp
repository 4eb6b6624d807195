#include "report_json.h"

#include <ferry/ferry.h>

#include <sys/utsname.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <ctime>
#include <fstream>
#include <stdexcept>

#include "json.h"  // tools/common
#include "wan_link.h"

namespace ferry::bench {

namespace {

// The value after "key" and a colon on the first line of `file` that starts with it.
std::string proc_field(const char* file, const std::string& key) {
  std::ifstream in(file);
  std::string line;
  while (std::getline(in, line)) {
    if (line.rfind(key, 0) != 0) continue;
    const std::size_t colon = line.find(':');
    if (colon == std::string::npos) continue;
    const std::size_t start = line.find_first_not_of(" \t", colon + 1);
    return start == std::string::npos ? "" : line.substr(start);
  }
  return "";
}

}  // namespace

void write_machine(JsonWriter& json) {
  utsname names{};
  ::uname(&names);
  json.key("machine").begin_object();
  json.key("nproc").value(static_cast<std::int64_t>(::sysconf(_SC_NPROCESSORS_ONLN)));
  json.key("kernel").value(names.release);
  json.key("os").value(std::string(names.sysname) + " " + names.version);
  json.key("arch").value(names.machine);
  json.key("hostname").value(names.nodename);
  json.key("cpu_model").value(proc_field("/proc/cpuinfo", "model name"));
  const std::string mem_kib = proc_field("/proc/meminfo", "MemTotal");  // "24576000 kB"
  json.key("mem_total_bytes").value(static_cast<std::uint64_t>(std::strtoull(mem_kib.c_str(), nullptr, 10)) * 1024);
  double load[3] = {0, 0, 0};
  json.key("loadavg").begin_array();
  if (::getloadavg(load, 3) == 3) {
    for (const double l : load) json.value(l);
  }
  json.end_array();
  json.key("ferry_version").value(ferry_version());
  char when[32];
  const std::time_t now = std::time(nullptr);
  std::tm utc{};
  ::gmtime_r(&now, &utc);
  std::strftime(when, sizeof when, "%Y-%m-%dT%H:%M:%SZ", &utc);
  json.key("time_utc").value(when);
  json.end_object();
}

namespace {

void optional_string(JsonWriter& json, const char* key, const std::string& value) {
  json.key(key);
  if (value.empty()) {
    json.null();
  } else {
    json.value(value);
  }
}

void optional_number(JsonWriter& json, const char* key, std::uint64_t value) {
  json.key(key);
  if (value == 0) {
    json.null();
  } else {
    json.value(value);
  }
}

}  // namespace

void write_args(JsonWriter& json, const BenchArgs& args, const std::string& placement) {
  json.key("args").begin_object();
  json.key("peers").value(args.peers);
  json.key("sizes").begin_array();
  for (const std::size_t bytes : args.sizes) json.value(static_cast<std::uint64_t>(bytes));
  json.end_array();
  json.key("dtype").value(elem_type_name(args.dtype));
  json.key("op").value(reduce_kind_name(args.op));
  json.key("connections").value(args.connections);
  json.key("concurrent").value(args.concurrent);
  json.key("iters").value(args.iters);
  json.key("warmup").value(args.warmup);
  optional_string(json, "baseline", args.baseline);
  json.key("gloo_algorithm").value(args.gloo_algorithm);
  optional_string(json, "master", args.master);
  optional_string(json, "cc", args.congestion_control);
  optional_string(json, "secret_file", args.secret_file);
  json.key("tls").value(args.tls);
  json.key("shared_memory").value(args.shared_memory);
  optional_number(json, "io_threads", args.io_threads);
  optional_number(json, "chunk_bytes", args.chunk_bytes);
  json.key("timeout_s").value(run_deadline_s(args));
  json.key("workload").value(args.workload);
  json.key("collective").value(args.collective);
  json.key("holders").value(args.holders);
  json.key("compression").value(args.compression);
  optional_string(json, "state_file", args.state_file);
  json.key("tensors").value(args.tensors);
  optional_string(json, "wan", args.wan);
  optional_string(json, "wan_topology", args.wan_topology);
  // What "the link rate" is for this run (wan_link.h): the spec's rate, or which
  // host's link or pair's cap of the topology is the smallest.
  json.key("link_rate");
  if (const std::optional<WanLinkBudget> link = wan_link_budget(args); link && link->rate_bps > 0) {
    json.begin_object();
    json.key("bits_per_s").value(link->rate_bps);
    json.key("from").value(link->rate_from);
    json.end_object();
  } else {
    json.null();
  }
  json.key("placement").value(placement);
  json.key("argv").begin_array();
  for (const std::string& arg : args.argv) json.value(arg);
  json.end_array();
  json.end_object();
}

namespace {

void write_run(JsonWriter& json, const RunSummary& run, int iters) {
  json.begin_object();
  json.key("impl").value(run.impl);
  json.key("collective").value(run.collective);
  json.key("algorithm").value(run.algorithm);
  json.key("peers").value(run.peers);
  json.key("bytes").value(static_cast<std::uint64_t>(run.bytes));
  json.key("count").value(static_cast<std::uint64_t>(run.count));
  json.key("dtype").value(run.dtype);
  json.key("op").value(run.op);
  json.key("quant").value(run.quant);
  json.key("connections").value(run.connections);
  json.key("concurrent").value(run.concurrent);
  json.key("iters").value(iters);
  json.key("time_s_median").value(run.time_s_median);
  json.key("time_s_min").value(run.time_s_min);
  json.key("algbw_GBps").value(run.algbw_GBps);
  json.key("busbw_GBps").value(run.busbw_GBps);
  json.key("wire_bytes_per_peer");
  if (run.wire_bytes_per_peer) {
    json.value(*run.wire_bytes_per_peer);
  } else {
    json.null();
  }
  json.key("wire_bytes_ideal").value(run.wire_bytes_ideal);
  json.key("bit_identical").value(run.bit_identical);
  json.key("correct").value(run.correct);
  json.key("cpu_s_per_GB");
  if (run.cpu_s_per_GB) {
    json.value(*run.cpu_s_per_GB);
  } else {
    json.null();
  }
  json.key("quant_agreement_s_median");
  if (run.quant_agreement_s_median) {
    json.value(*run.quant_agreement_s_median);
  } else {
    json.null();
  }
  json.key("links").value(run.links);
  json.key("ring").begin_array();
  for (const std::string& member : run.ring) json.value(member);
  json.end_array();
  json.key("ring_order").value(run.ring_order);
  json.key("relayed_hops").begin_array();
  for (const auto& hop : run.relayed_hops) {
    json.begin_object();
    json.key("from").value(hop.from);
    json.key("to").value(hop.to);
    json.key("relay").value(hop.relay);
    json.end_object();
  }
  json.end_array();
  json.key("relayed_bytes").value(run.relayed_bytes);
  json.key("result_hashes").begin_array();
  for (const std::string& hash : run.result_hashes) json.value(hash);
  json.end_array();
  json.key("times_s").begin_array();
  for (const double t : run.times_s) json.value(t);
  json.end_array();
  json.end_object();
}

}  // namespace

void write_json_report(const std::string& path, const BenchArgs& args, const std::string& placement,
                       const std::vector<RunSummary>& runs, const std::vector<LinkMeasurement>& link_matrix) {
  JsonWriter json;
  json.begin_object();
  json.newline(2).key("runs").begin_array();
  for (const RunSummary& run : runs) {
    json.newline(4);
    write_run(json, run, args.iters);
  }
  json.end_array();
  json.newline(2).key("ratios").begin_array();
  for (const RunSummary& ours : runs) {
    if (ours.impl != "ferry" || ours.ring_order != "best") continue;
    for (const RunSummary& theirs : runs) {
      const bool gloo = theirs.impl == "gloo", arrival = theirs.ring_order == "arrival";
      if ((!gloo && !arrival) || theirs.bytes != ours.bytes || theirs.busbw_GBps <= 0) continue;
      json.begin_object();
      json.key("bytes").value(static_cast<std::uint64_t>(ours.bytes));
      json.key(gloo ? "busbw_ferry_over_gloo" : "busbw_ferry_over_arrival_order").value(ours.busbw_GBps / theirs.busbw_GBps);
      json.end_object();
    }
  }
  json.end_array();
  json.newline(2);
  write_link_matrix(json, link_matrix);
  finish_json_report(json, path, args, placement);
}

void finish_json_report(JsonWriter& json, const std::string& path, const BenchArgs& args, const std::string& placement) {
  json.newline(2);
  write_machine(json);
  json.newline(2);
  write_args(json, args, placement);
  json.newline(0).end_object();
  tooling::write_text_file(path, json.str(), "--json");
}

}  // namespace ferry::bench
