#include "sync_orchestrator.h"

#include <string>

#include "child_process.h"  // tools/common
#include "orchestrator.h"

namespace ferry::bench {

using tooling::Child;
using tooling::ChildSet;

namespace {

constexpr auto kStopGrace = std::chrono::seconds(3);

}  // namespace

std::vector<SyncSummary> run_sync(const BenchArgs& args, const Launcher& launcher, const Binaries& binaries) {
  return summarize_sync(args, run_ferry_peers(args, launcher, binaries, "ferry sync", [&](int i) {
                          return i == args.holders ? std::string("newcomer") : "holder " + std::to_string(i);
                        }));
}

std::vector<SyncSummary> run_tcp_baseline(const BenchArgs& args, const Launcher& launcher, const Binaries& binaries,
                                          const std::vector<std::string>& content_hashes) {
  ChildSet children(args.verbose);
  const Placement source_at = launcher.place(ProcessRole::tcp_endpoint, 0);
  const Placement sink_at = launcher.place(ProcessRole::tcp_endpoint, args.holders);
  std::vector<std::string> argv = source_at.argv_prefix;
  argv.insert(argv.end(), {binaries.self, "--role", "tcp-source", "--bind-host", source_at.host, "--workload", "sync"});
  if (!args.state_file.empty()) argv.insert(argv.end(), {"--state-file", args.state_file});
  if (!args.congestion_control.empty()) argv.insert(argv.end(), {"--cc", args.congestion_control});
  Child* source = nullptr;
  const std::string address = host_port(source_at.host, start_listener(children, "tcp-source", argv, source_at, source));

  std::vector<std::uint32_t> counts{1};
  if (sync_total_connections(args) != 1) counts.push_back(sync_total_connections(args));
  std::vector<SyncSummary> runs;
  for (const std::uint32_t k : counts) {
    BenchArgs sink_args = args;
    sink_args.connections = k;
    argv = sink_at.argv_prefix;
    argv.insert(argv.end(), {binaries.self, "--role", "tcp-sink", "--tcp-source", address});
    const std::vector<std::string> forwarded = peer_forwarded_args(sink_args);
    argv.insert(argv.end(), forwarded.begin(), forwarded.end());
    Child* sink = &children.spawn("tcp sink x" + std::to_string(k), argv);
    watch(children, {sink}, source, run_deadline(args), run_deadline_s(args), "tcp baseline", args.sizes.size());
    const std::vector<SyncSummary> these = summarize_tcp(args, k, sink->out(), content_hashes);
    runs.insert(runs.end(), these.begin(), these.end());
  }
  children.stop(*source, kStopGrace);
  return runs;
}

}  // namespace ferry::bench
