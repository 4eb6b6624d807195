// ferry-chaos's summary: the table people read and the JSON scripts read.
#include <cstdio>

#include "chaos_data.h"
#include "chaos_run.h"
#include "json.h"  // tools/common

namespace ferry::chaos {

namespace {

std::string format(const char* fmt, auto... args) {
  char text[256];
  std::snprintf(text, sizeof text, fmt, args...);
  return text;
}

void percentiles_json(tooling::JsonWriter& w, const Percentiles& p) {
  w.begin_object().key("p50").value(p.p50).key("p99").value(p.p99).key("max").value(p.max).key("samples").value(
      static_cast<std::uint64_t>(p.samples));
  w.end_object();
}

void counts_json(tooling::JsonWriter& w, const std::map<std::string, std::uint64_t>& counts) {
  w.begin_object();
  for (const auto& [name, n] : counts) w.key(name).value(n);
  w.end_object();
}

}  // namespace

std::string summary_text(const ChaosArgs& args, const ChaosSummary& s) {
  std::string out = format("ferry-chaos: %d peers, %.0f s, seed %llu, %zu bytes, quant %s, %u concurrent\n", args.peers,
                           args.duration_s, static_cast<unsigned long long>(args.seed), args.size_bytes,
                           ferry_quant_name(args.quant), args.concurrent);
  out += format("  ops ok      %llu (unique ops cross-checked %llu, against the reference %llu; last step %llu)\n",
                static_cast<unsigned long long>(s.ops_ok), static_cast<unsigned long long>(s.unique_ops_checked),
                static_cast<unsigned long long>(s.references_checked), static_cast<unsigned long long>(s.max_step));
  out += format("  syncs ok    %llu, failed %llu (reports checked %llu; %llu bytes fetched; %llu newcomers left "
                "with the state lost)\n",
                static_cast<unsigned long long>(s.syncs_ok), static_cast<unsigned long long>(s.syncs_failed),
                static_cast<unsigned long long>(s.syncs_checked),
                static_cast<unsigned long long>(s.sync_bytes_received),
                static_cast<unsigned long long>(s.state_lost));
  out += format("  ops failed  %llu:", static_cast<unsigned long long>(s.ops_failed));
  for (const auto& [name, n] : s.failed_by_error) out += format(" %s %llu;", name.c_str(), static_cast<unsigned long long>(n));
  out += format("\n  kills %llu (of relays %llu), joins %llu, removed by the master %llu; dial-out-only peers started %llu; "
                "relayed links seen %llu\n  faults     ",
                static_cast<unsigned long long>(s.kills), static_cast<unsigned long long>(s.relay_kills),
                static_cast<unsigned long long>(s.joins), static_cast<unsigned long long>(s.removed),
                static_cast<unsigned long long>(s.dial_out_only_started),
                static_cast<unsigned long long>(s.relayed_links_seen));
  for (const auto& [name, n] : s.faults) out += format(" %s %llu;", name.c_str(), static_cast<unsigned long long>(n));
  out += "\n  detection   (fault -> first failure on another peer of its ring)\n";
  for (const auto& [kind, p] : s.detect_latency_by_fault)
    out += format("    %-10s p50 %.3f s  p99 %.3f s  max %.3f s  (%zu)\n", kind.c_str(), p.p50, p.p99, p.max, p.samples);
  out += format("  longest gap between successful ops %.1f s; membership %s after %.1f s of quiescence\n",
                s.longest_progress_gap_s, s.converged ? "converged" : "did NOT converge", s.convergence_s);
  out += format("  master RSS %llu -> %llu KiB; proxy: %llu connections, %llu MiB relayed, %llu bytes corrupted\n",
                static_cast<unsigned long long>(s.master_rss_start_kib), static_cast<unsigned long long>(s.master_rss_end_kib),
                static_cast<unsigned long long>(s.proxy_connections),
                static_cast<unsigned long long>(s.proxy_bytes >> 20), static_cast<unsigned long long>(s.proxy_corrupted));
  out += format("  violations  %llu\n", static_cast<unsigned long long>(s.violation_count));
  for (const std::string& v : s.violations) out += "    " + v + "\n";
  return out;
}

std::string summary_json(const ChaosArgs& args, const ChaosSummary& s) {
  tooling::JsonWriter w;
  w.begin_object();
  w.newline(2).key("peers").value(args.peers);
  w.newline(2).key("duration_s").value(args.duration_s);
  w.newline(2).key("seed").value(args.seed);
  w.newline(2).key("size_bytes").value(static_cast<std::uint64_t>(args.size_bytes));
  w.newline(2).key("quant").value(ferry_quant_name(args.quant));
  w.newline(2).key("concurrent").value(args.concurrent);
  w.newline(2).key("ops_ok").value(s.ops_ok);
  w.newline(2).key("ops_failed").value(s.ops_failed);
  w.newline(2).key("ops_failed_by_error");
  counts_json(w, s.failed_by_error);
  w.newline(2).key("unique_ops_checked").value(s.unique_ops_checked);
  w.newline(2).key("references_checked").value(s.references_checked);
  w.newline(2).key("last_step").value(s.max_step);
  w.newline(2).key("state_every").value(args.state_every);
  w.newline(2).key("syncs_ok").value(s.syncs_ok);
  w.newline(2).key("syncs_failed").value(s.syncs_failed);
  w.newline(2).key("syncs_checked").value(s.syncs_checked);
  w.newline(2).key("sync_bytes_received").value(s.sync_bytes_received);
  w.newline(2).key("state_lost").value(s.state_lost);
  w.newline(2).key("kills").value(s.kills);
  w.newline(2).key("joins").value(s.joins);
  w.newline(2).key("removed").value(s.removed);
  w.newline(2).key("dial_out_only_every").value(args.dial_out_only_every);
  w.newline(2).key("dial_out_only_started").value(s.dial_out_only_started);
  w.newline(2).key("punch").value(args.punch);
  w.newline(2).key("relayed_links_seen").value(s.relayed_links_seen);
  w.newline(2).key("relay_kills").value(s.relay_kills);
  w.newline(2).key("faults");
  counts_json(w, s.faults);
  w.newline(2).key("detect_latency_s");
  percentiles_json(w, s.detect_latency_s);
  w.newline(2).key("detect_latency_by_fault_s").begin_object();
  for (const auto& [kind, p] : s.detect_latency_by_fault) {
    w.newline(4).key(kind);
    percentiles_json(w, p);
  }
  w.newline(2).end_object();
  w.newline(2).key("longest_progress_gap_s").value(s.longest_progress_gap_s);
  w.newline(2).key("converged").value(s.converged);
  w.newline(2).key("convergence_s").value(s.convergence_s);
  w.newline(2).key("master_rss_kib").begin_object().key("start").value(s.master_rss_start_kib).key("end").value(
      s.master_rss_end_kib);
  w.end_object();
  w.newline(2).key("proxy").begin_object().key("connections").value(s.proxy_connections).key("bytes").value(
      s.proxy_bytes).key("corrupted").value(s.proxy_corrupted);
  w.end_object();
  w.newline(2).key("wall_s").value(s.wall_s);
  w.newline(2).key("violation_count").value(s.violation_count);
  w.newline(2).key("violations").begin_array();
  for (const std::string& v : s.violations) w.newline(4).value(v);
  if (!s.violations.empty()) w.newline(2);
  w.end_array();
  w.newline(0).end_object();
  return w.str() + "\n";
}

}  // namespace ferry::chaos
