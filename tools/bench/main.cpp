// ferry-bench: the nccl-tests of ferry. See README.md in this folder.
//
// Roles: without --role it is the orchestrator (starts a master, N peers and,
// with --baseline gloo, N Gloo ranks; prints the tables; writes --json). With
// the hidden --role peer it is one of those peers (peer_role.h, or
// sync_peer_role.h for --workload sync); --role tcp-source / tcp-sink are the
// ends of the sync workload's TCP baseline (tcp_baseline.h).
#include <cstdio>
#include <exception>
#include <optional>
#include <string>
#include <vector>

#include "aggregate.h"
#include "bench_args.h"
#include "binaries.h"
#include "wan_launcher.h"
#include "wan_link.h"
#include "wan_units.h"  // stress/wan
#include "child_process.h"  // tools/common
#include "orchestrator.h"
#include "peer_role.h"
#include "placement.h"
#include "report_json.h"
#include "report_table.h"
#include "throwaway_certs.h"
#include "sync_orchestrator.h"
#include "sync_peer_role.h"
#include "tcp_baseline.h"

namespace {

using namespace ferry::bench;

constexpr int kExitOk = 0;
constexpr int kExitFailed = 1;
constexpr int kExitBadArgs = 2;
constexpr int kExitWrongResult = 3;

std::string title(const std::string& impl, const BenchArgs& args, const Launcher& launcher) {
  std::string text = impl + (is_all_gather(args)    ? " all-gather (size: bytes per peer)"
                             : is_sparse_step(args) ? " SparseLoCo step (size: f32 bytes per peer)"
                                                    : " all-reduce");
  if (impl == "gloo") text += " (" + (is_all_gather(args) ? std::string("allgather") : args.gloo_algorithm) + ")";
  text += ": " + std::to_string(args.peers) + " peers, " + launcher.describe() + ", " + std::to_string(args.iters) +
          " iters after " + std::to_string(args.warmup) + " warmup";
  if (const std::optional<WanLinkBudget> link = wan_link_budget(args); link && link->rate_bps > 0) {
    const auto bps = static_cast<std::uint64_t>(link->rate_bps);
    text += ", link rate " + ferry::wan::format_rate(bps) + " (" + link->rate_from + ")";
  }
  if (impl.rfind("ferry", 0) == 0 && !args.congestion_control.empty()) text += ", cc " + args.congestion_control;
  if (impl.rfind("ferry", 0) == 0 && args.tls) text += ", TLS 1.3";
  return text;
}

// "# ring: site-a -> site-c -> site-b -> site-d -> (site-a)"
void print_ring(std::FILE* out, const std::vector<RunSummary>& runs) {
  if (runs.empty() || runs.front().ring.empty()) return;
  std::string text;
  for (const std::string& member : runs.front().ring) text += member + " -> ";
  std::fprintf(out, "# ring: %s(%s)\n", text.c_str(), runs.front().ring.front().c_str());
  for (const auto& hop : runs.front().relayed_hops)
    std::fprintf(out, "# relayed: %s -> %s through %s\n", hop.from.c_str(), hop.to.c_str(), hop.relay.c_str());
}

// Says what carried ferry's bytes, as the peers found it (not as asked) in the first size.
std::string with_links(std::string text, const RunSummary& first) {
  const std::string links = links_name({first});
  return text + ", ring links " + (links == "TCP" ? "on " : "in ") + links;
}

bool all_good(const std::vector<RunSummary>& runs) {
  for (const RunSummary& run : runs) {
    if (!run.bit_identical || !run.correct) return false;
  }
  return true;
}

int run_sync_orchestrator(const BenchArgs& args) {
  const Binaries binaries = find_binaries(args.bin_dir, args.master.empty(), false);
  const auto launcher = make_launcher(args);
  std::fprintf(stderr, "ferry-bench: shared-state sync, %d holders + 1 newcomer, %zu sizes, deadline %.0f s per run\n",
               args.holders, args.sizes.size(), run_deadline_s(args));
  std::vector<SyncSummary> runs = run_sync(args, *launcher, binaries);
  if (args.baseline == "tcp") {
    std::fprintf(stderr, "ferry-bench: raw TCP baseline, host 0 -> host %d\n", args.holders);
    std::vector<std::string> hashes;
    for (const SyncSummary& run : runs) hashes.push_back(run.content_hash);
    const std::vector<SyncSummary> tcp = run_tcp_baseline(args, *launcher, binaries, hashes);
    runs.insert(runs.end(), tcp.begin(), tcp.end());
  }
  std::string title = "ferry shared-state sync: " + std::to_string(args.holders) + " holders -> 1 newcomer, " +
                      std::to_string(args.tensors) + " tensors, " + launcher->describe() + ", " +
                      std::to_string(args.iters) + " iters after " + std::to_string(args.warmup) + " warmup, content " +
                      (args.state_file.empty() ? "generated weights-like f32" : args.state_file);
  if (!args.congestion_control.empty()) title += ", cc " + args.congestion_control;
  print_sync_table(stdout, title, runs);
  if (!args.json_path.empty()) write_sync_json(args.json_path, args, launcher->describe(), runs);
  for (const SyncSummary& run : runs) {
    if (!run.correct) {
      std::fprintf(stderr, "ferry-bench: the synced bytes were wrong (see the WRONG lines)\n");
      return kExitWrongResult;
    }
  }
  return kExitOk;
}

int run_orchestrator(const BenchArgs& given) {
  ferry::tooling::install_child_cleanup_on_signals();
  BenchArgs args = given;
  std::optional<ThrowawayCerts> certs;
  if (args.tls && args.tls_dir.empty()) {
    certs.emplace();
    args.tls_dir = certs->dir();
  }
  if (args.workload == "sync") return run_sync_orchestrator(args);
  const bool with_gloo = args.baseline == "gloo", with_arrival = args.baseline == "arrival";
  const Binaries binaries = find_binaries(args.bin_dir, args.master.empty(), with_gloo);
  const auto launcher = make_launcher(args);

  std::fprintf(stderr, "ferry-bench: ferry, %d peers, %zu sizes, deadline %.0f s per implementation\n", args.peers,
               args.sizes.size(), run_deadline_s(args));
  TableStream ferry_table(stdout, [&](const RunSummary& first) { return with_links(title("ferry", args, *launcher), first); });
  const FerryRun ferry = run_ferry(args, *launcher, binaries, [&](const RunSummary& row) { ferry_table.row(row); });
  std::vector<RunSummary> runs = ferry.runs;
  const std::vector<RunSummary>& ferry_runs = ferry.runs;
  ferry_table.finish(ferry_runs);
  print_ring(stdout, ferry_runs);

  if (with_arrival) {
    std::fprintf(stderr, "ferry-bench: ferry again, its master keeping rings in join order\n");
    BenchArgs arrival_args = args;
    arrival_args.ring_order = "arrival";
    TableStream arrival_table(stdout, [&](const RunSummary& first) {
      return with_links(title("ferry (arrival order)", args, *launcher), first);
    });
    const FerryRun arrival =
        run_ferry(arrival_args, *launcher, binaries, [&](const RunSummary& row) { arrival_table.row(row); });
    arrival_table.finish(arrival.runs);
    print_ring(stdout, arrival.runs);
    print_ratios(stdout, ferry_runs, arrival.runs);
    runs.insert(runs.end(), arrival.runs.begin(), arrival.runs.end());
  }

  if (with_gloo) {
    std::fprintf(stderr, "ferry-bench: gloo baseline, %d ranks\n", args.peers);
    TableStream gloo_table(stdout, [&](const RunSummary&) { return title("gloo", args, *launcher); });
    const std::vector<RunSummary> gloo_runs =
        run_gloo(args, *launcher, binaries, [&](const RunSummary& row) { gloo_table.row(row); });
    gloo_table.finish(gloo_runs);
    print_ratios(stdout, ferry_runs, gloo_runs);
    runs.insert(runs.end(), gloo_runs.begin(), gloo_runs.end());
  }
  if (!args.json_path.empty()) write_json_report(args.json_path, args, launcher->describe(), runs, ferry.link_matrix);
  if (!all_good(runs)) {
    std::fprintf(stderr, "ferry-bench: some results were wrong or differed between peers (see the tables)\n");
    return kExitWrongResult;
  }
  return kExitOk;
}

}  // namespace

int main(int argc, char** argv) {
  std::optional<BenchArgs> args;
  try {
    args = parse_bench_args(argc, argv);
  } catch (const ArgsError& e) {
    std::fprintf(stderr, "ferry-bench: %s\nRun with --help for more information.\n", e.what());
    return kExitBadArgs;
  }
  if (!args) return kExitOk;  // --help, --version
  if (args->role == Role::peer) return args->workload == "sync" ? run_sync_peer(*args) : run_peer(*args);
  if (args->role == Role::tcp_source) return run_tcp_source(*args);
  if (args->role == Role::tcp_sink) return run_tcp_sink(*args);
  try {
    return run_orchestrator(*args);
  } catch (const std::exception& e) {
    std::fflush(stdout);
    std::fprintf(stderr, "ferry-bench: %s\n", e.what());
    return kExitFailed;
  }
}
