#include "sync_report.h"

#include <algorithm>
#include <stdexcept>

#include "aggregate.h"
#include "json.h"  // tools/common
#include "report_json.h"

namespace ferry::bench {

using tooling::for_each_json_line;
using tooling::json_field;
using tooling::json_number;
using tooling::json_numbers;
using tooling::json_strings;
using tooling::JsonFieldError;
using tooling::JsonValue;

namespace {

constexpr std::uint32_t kMaxFetchConnections = 16;  // kMaxFetchThreads in src/peer/shared_state_sync.cpp

struct PeerLine {
  std::string role;
  std::size_t bytes = 0;
  std::uint32_t tensors = 0;
  std::vector<double> times_s, sync_duration_s, bytes_received, tensors_changed;
  double cpu_s = 0;
  std::vector<std::string> hashes;
};

std::vector<PeerLine> parse_peer(const std::string& out, const std::string& who) {
  std::vector<PeerLine> lines;
  for_each_json_line(out, who, [&](const JsonValue& line) {
    PeerLine p;
    p.role = json_field(line, "role", JsonValue::Kind::string).string;
    p.bytes = static_cast<std::size_t>(json_number(line, "bytes"));
    p.tensors = static_cast<std::uint32_t>(json_number(line, "tensors"));
    p.times_s = json_numbers(line, "times_s");
    p.sync_duration_s = json_numbers(line, "sync_duration_s");
    p.bytes_received = json_numbers(line, "bytes_received");
    p.tensors_changed = json_numbers(line, "tensors_changed");
    p.cpu_s = json_number(line, "cpu_s");
    p.hashes = json_strings(line, "hashes");
    lines.push_back(std::move(p));
  });
  return lines;
}

void finish_times(SyncSummary& run) {
  run.time_s_median = median(run.times_s);
  run.time_s_min = run.times_s.empty() ? 0 : *std::min_element(run.times_s.begin(), run.times_s.end());
  run.throughput_GBps = run.time_s_median > 0 ? static_cast<double>(run.bytes) / run.time_s_median / 1e9 : 0;
  run.correct = run.problems.empty();
}

std::string which(const std::string& who, std::size_t bytes) { return who + ", " + format_byte_size(bytes) + ": "; }

}  // namespace

std::uint32_t sync_total_connections(const BenchArgs& args) {
  const auto holders = static_cast<std::uint32_t>(args.holders);
  // p2p_connections 0 (adapted ring links) fetches over 4 per holder, the library's starting count.
  const std::uint32_t asked = args.connections > 0 ? args.connections : 4;
  const std::uint32_t per_holder = std::max(1u, std::min(asked, kMaxFetchConnections / holders));
  return per_holder * holders;
}

std::vector<SyncSummary> summarize_sync(const BenchArgs& args, const std::vector<std::string>& peer_outs) {
  std::vector<std::vector<PeerLine>> per_peer;
  for (std::size_t i = 0; i < peer_outs.size(); ++i) {
    const std::string who = i + 1 == peer_outs.size() ? "the newcomer" : "holder " + std::to_string(i);
    per_peer.push_back(parse_peer(peer_outs[i], who));
    if (per_peer.back().size() != args.sizes.size()) {
      throw std::runtime_error(who + " reported " + std::to_string(per_peer.back().size()) + " sizes of " +
                               std::to_string(args.sizes.size()));
    }
  }
  std::vector<SyncSummary> runs;
  for (std::size_t s = 0; s < args.sizes.size(); ++s) {
    const PeerLine& newcomer = per_peer.back()[s];
    SyncSummary run;
    run.impl = "ferry-sync";
    run.bytes = args.sizes[s];
    run.holders = args.holders;
    run.tensors = newcomer.tensors;
    run.compression = args.compression;
    run.connections = args.connections;
    run.total_connections = sync_total_connections(args);
    run.times_s = newcomer.times_s;
    run.content_hash = per_peer.front()[s].hashes.empty() ? "" : per_peer.front()[s].hashes.front();
    double holder_cpu_s = 0;
    for (std::size_t p = 0; p < per_peer.size(); ++p) {
      const PeerLine& line = per_peer[p][s];
      const bool is_newcomer = p + 1 == per_peer.size();
      const std::string who = which(is_newcomer ? "the newcomer" : "holder " + std::to_string(p), run.bytes);
      if (line.role != (is_newcomer ? "newcomer" : "holder") || line.bytes != run.bytes) {
        throw std::runtime_error(who + "reported role " + line.role + ", " + std::to_string(line.bytes) + " bytes");
      }
      if (line.times_s.size() != static_cast<std::size_t>(args.iters) || line.hashes.size() != line.times_s.size()) {
        throw std::runtime_error(who + std::to_string(line.times_s.size()) + " timings for " + std::to_string(args.iters) +
                                 " iterations");
      }
      for (std::size_t i = 0; i < line.hashes.size(); ++i) {
        if (line.hashes[i] != run.content_hash) {
          run.problems.push_back(who + "state hashed to " + line.hashes[i] + " after timed sync " + std::to_string(i) +
                                 ", the holders' content is " + run.content_hash);
        }
      }
      if (!is_newcomer) holder_cpu_s += line.cpu_s;
    }
    for (std::size_t i = 0; i < newcomer.tensors_changed.size(); ++i) {
      if (newcomer.tensors_changed[i] != run.tensors) {
        run.problems.push_back(which("the newcomer", run.bytes) + "sync " + std::to_string(i) + " changed " +
                               std::to_string(static_cast<long>(newcomer.tensors_changed[i])) + " of " +
                               std::to_string(run.tensors) + " tensors");
      }
    }
    run.wire_bytes_received = median(newcomer.bytes_received);
    if (*run.wire_bytes_received > 0) run.compression_ratio = static_cast<double>(run.bytes) / *run.wire_bytes_received;
    run.sync_duration_s_median = median(newcomer.sync_duration_s);
    const double gb = static_cast<double>(run.bytes) * args.iters / 1e9;
    run.newcomer_cpu_s_per_GB = newcomer.cpu_s / gb;
    run.holder_cpu_s_per_GB = holder_cpu_s / gb;
    finish_times(run);
    runs.push_back(std::move(run));
  }
  return runs;
}

std::vector<SyncSummary> summarize_tcp(const BenchArgs& args, std::uint32_t connections, const std::string& sink_out,
                                       const std::vector<std::string>& content_hashes) {
  const std::string who = "tcp sink (" + std::to_string(connections) + " connections)";
  std::vector<SyncSummary> runs;
  for_each_json_line(sink_out, who, [&](const JsonValue& line) {
    SyncSummary run;
    run.impl = "tcp";
    run.bytes = static_cast<std::size_t>(json_number(line, "bytes"));
    run.holders = 1;
    run.connections = connections;
    run.total_connections = connections;
    run.times_s = json_numbers(line, "times_s");
    const std::vector<std::string> hashes = json_strings(line, "hashes");
    const std::size_t s = runs.size();
    if (s >= args.sizes.size() || run.bytes != args.sizes[s] || hashes.size() != 1 ||
        run.times_s.size() != static_cast<std::size_t>(args.iters)) {
      throw JsonFieldError("not the report of size " + std::to_string(s) + " with one hash and --iters times");
    }
    run.content_hash = content_hashes.at(s);
    if (hashes.front() != run.content_hash) {
      run.problems.push_back(which(who, run.bytes) + "received bytes hashing to " + hashes.front() +
                             ", the holders' content is " + run.content_hash);
    }
    finish_times(run);
    runs.push_back(std::move(run));
  });
  if (runs.size() != args.sizes.size()) throw std::runtime_error(who + " reported " + std::to_string(runs.size()) + " sizes");
  return runs;
}

void print_sync_table(std::FILE* out, const std::string& title, const std::vector<SyncSummary>& runs) {
  constexpr const char* kHeader = "#%11s %10s %6s %5s %9s %9s %8s %9s %10s %6s %7s %7s %7s\n";
  std::fprintf(out, "#\n# %s\n#\n", title.c_str());
  std::fprintf(out, kHeader, "size", "impl", "zstd", "conns", "time(ms)", "min(ms)", "GB/s", "Mbit/s", "wire MB",
               "ratio", "correct", "cpu s/GB", "cpu s/GB");
  std::fprintf(out, kHeader, "(B)", "", "level", "total", "median", "", "", "", "received", "", "", "newcomer",
               "holders");
  for (const SyncSummary& run : runs) {
    auto optional = [](const std::optional<double>& value, double scale, const char* format) {
      char text[32] = "-";
      if (value) std::snprintf(text, sizeof text, format, *value * scale);
      return std::string(text);
    };
    std::fprintf(out, " %11zu %10s %6s %5u %9.1f %9.1f %8.3f %9.1f %10s %6s %7s %7s %7s\n", run.bytes,
                 run.impl.c_str(), run.impl == "tcp" ? "-" : std::to_string(run.compression).c_str(),
                 run.total_connections, run.time_s_median * 1e3, run.time_s_min * 1e3, run.throughput_GBps,
                 run.throughput_GBps * 8e3, optional(run.wire_bytes_received, 1e-6, "%.2f").c_str(),
                 optional(run.compression_ratio, 1, "%.3f").c_str(), run.correct ? "yes" : "NO",
                 optional(run.newcomer_cpu_s_per_GB, 1, "%.2f").c_str(),
                 optional(run.holder_cpu_s_per_GB, 1, "%.2f").c_str());
  }
  for (const SyncSummary& sync : runs) {
    if (sync.impl != "ferry-sync") continue;
    std::fprintf(out, "#\n# %s: sync/tcp throughput:", format_byte_size(sync.bytes).c_str());
    for (const SyncSummary& tcp : runs) {
      if (tcp.impl == "tcp" && tcp.bytes == sync.bytes && tcp.throughput_GBps > 0) {
        std::fprintf(out, "  %.2f (tcp x%u)", sync.throughput_GBps / tcp.throughput_GBps, tcp.connections);
      }
    }
    std::fprintf(out, "\n");
  }
  for (const SyncSummary& run : runs)
    for (const std::string& problem : run.problems) std::fprintf(out, "# WRONG: %s\n", problem.c_str());
  std::fprintf(out, "#\n");
  std::fflush(out);
}

void write_sync_json(const std::string& path, const BenchArgs& args, const std::string& placement,
                     const std::vector<SyncSummary>& runs) {
  auto optional = [](JsonWriter& json, const char* key, const std::optional<double>& value) {
    json.key(key);
    if (value) {
      json.value(*value);
    } else {
      json.null();
    }
  };
  JsonWriter json;
  json.begin_object();
  json.newline(2).key("workload").value("sync");
  json.newline(2).key("runs").begin_array();
  for (const SyncSummary& run : runs) {
    json.newline(4).begin_object();
    json.key("impl").value(run.impl);
    json.key("bytes").value(static_cast<std::uint64_t>(run.bytes));
    json.key("holders").value(run.holders);
    json.key("tensors").value(run.tensors);
    json.key("compression").value(run.compression);
    json.key("connections").value(run.connections);
    json.key("total_connections").value(run.total_connections);
    json.key("iters").value(args.iters);
    json.key("time_s_median").value(run.time_s_median);
    json.key("time_s_min").value(run.time_s_min);
    json.key("throughput_GBps").value(run.throughput_GBps);
    json.key("throughput_Mbps").value(run.throughput_GBps * 8e3);
    optional(json, "wire_bytes_received", run.wire_bytes_received);
    optional(json, "compression_ratio", run.compression_ratio);
    optional(json, "sync_duration_s_median", run.sync_duration_s_median);
    optional(json, "newcomer_cpu_s_per_GB", run.newcomer_cpu_s_per_GB);
    optional(json, "holder_cpu_s_per_GB", run.holder_cpu_s_per_GB);
    json.key("correct").value(run.correct);
    json.key("content_hash").value(run.content_hash);
    json.key("times_s").begin_array();
    for (const double t : run.times_s) json.value(t);
    json.end_array();
    json.end_object();
  }
  json.end_array();
  json.newline(2).key("ratios").begin_array();
  for (const SyncSummary& sync : runs) {
    if (sync.impl != "ferry-sync") continue;
    for (const SyncSummary& tcp : runs) {
      if (tcp.impl != "tcp" || tcp.bytes != sync.bytes || tcp.throughput_GBps <= 0) continue;
      json.begin_object();
      json.key("bytes").value(static_cast<std::uint64_t>(sync.bytes));
      json.key("tcp_connections").value(tcp.connections);
      json.key("sync_over_tcp").value(sync.throughput_GBps / tcp.throughput_GBps);
      json.end_object();
    }
  }
  json.end_array();
  finish_json_report(json, path, args, placement);
}

}  // namespace ferry::bench
