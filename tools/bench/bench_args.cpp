#include "bench_args.h"

#include <CLI/CLI.hpp>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <map>
#include <set>

#include "ferry/ferry.h"
#include "quant_names.h"  // tools/common
#include "sync_content.h"
#include "topology.h"  // stress/wan
#include "wan_config.h"
#include "wan_link.h"
#include "tool_cli.h"  // tools/common

namespace ferry::bench {

namespace {

constexpr const char* kDescription =
    "ferry-bench: all-reduce bandwidth of ferry, nccl-tests style, with Gloo's ring\n"
    "all-reduce as a baseline in the same run. Starts a ferry-master and N peer\n"
    "processes (this binary again) and prints, per size: time, algbw, busbw =\n"
    "algbw*2(N-1)/N, wire bytes per peer, and whether every peer ended with the same\n"
    "bits and the exact result.\n"
    "Exit status: 0 ok, 1 a process failed or a deadline passed, 2 bad arguments,\n"
    "3 a result was wrong or differed between peers.";

// The choices of an option, from tools/common's one table of names.
template <class Value, std::size_t N>
std::map<std::string, Value> by_name(const Value (&values)[N], std::string_view (*name)(Value)) {
  std::map<std::string, Value> out;
  for (const Value value : values) out.emplace(name(value), value);
  return out;
}

const std::map<std::string, ElemType> kElemTypeByName = by_name(tooling::kElemTypes, tooling::elem_type_name);
const std::map<std::string, ReduceKind> kReduceKindByName = by_name(tooling::kReduceKinds, tooling::reduce_kind_name);
const std::map<std::string, Role> kRoles{{"orchestrator", Role::orchestrator},
                                         {"peer", Role::peer},
                                         {"tcp-source", Role::tcp_source},
                                         {"tcp-sink", Role::tcp_sink}};

// The orchestrator places peer (or Gloo rank) i on host i and the master on host 0.
void check_topology(const BenchArgs& args) {
  if (!args.wan.empty()) throw ArgsError("--wan and --wan-topology are exclusive: give one emulated WAN");
  int hosts = 0;
  try {
    hosts = wan::Topology::load(args.wan_topology).size();
  } catch (const std::invalid_argument& e) {
    throw ArgsError(e.what());  // "topology FILE: hosts[2] ..."
  }
  if (!args.hosts.empty()) {
    const wan::Topology topology = wan::Topology::load(args.wan_topology);
    if (static_cast<int>(args.hosts.size()) != args.peers)
      throw ArgsError("--hosts names " + std::to_string(args.hosts.size()) + " hosts; there are " +
                      std::to_string(args.peers) + " peers (one host each)");
    std::set<std::string> seen;
    for (const std::string& name : args.hosts) {
      if (!seen.insert(name).second) throw ArgsError("--hosts names " + name + " twice (one peer per host)");
      if (std::none_of(topology.hosts.begin(), topology.hosts.end(), [&](const auto& h) { return h.name == name; }))
        throw ArgsError("--hosts: " + args.wan_topology + " has no host named " + name);
    }
  }
  if (hosts < args.peers) {
    throw ArgsError("--wan-topology " + args.wan_topology + " has " + std::to_string(hosts) +
                    " hosts; this run needs " + std::to_string(args.peers) + " (one per peer; the master shares host 0)");
  }
}

void check_consistency(const BenchArgs& args) {
  const std::size_t element = elem_type_size(args.dtype);
  for (const std::size_t bytes : args.sizes) {
    if (bytes % element != 0) {
      throw ArgsError("size " + std::to_string(bytes) + " is not a multiple of the " +
                      std::string(elem_type_name(args.dtype)) + " element size");
    }
  }
  if (args.quant != "none" && args.dtype == ElemType::i32) throw ArgsError("--quant applies to f32 and f64 data");
  if (!args.baseline.empty() && args.baseline != "gloo" && args.baseline != "tcp" && args.baseline != "arrival") {
    throw ArgsError("--baseline: 'gloo' or 'arrival' (all-reduce) or 'tcp' (sync) are known");
  }
  if (!args.hosts.empty() && args.wan_topology.empty()) throw ArgsError("--hosts needs --wan-topology");
  for (int i : args.dial_out_only)
    if (i >= args.peers) {
      throw ArgsError("--dial-out-only names peer " + std::to_string(i) + ", but there are " +
                      std::to_string(args.peers) + " (from 0)");
    }
  if (args.tls && args.tls_dir.empty() && !args.master.empty()) {
    throw ArgsError("--tls with --master: pass --tls-dir with the certificates that master trusts");
  }
  if (args.workload == "sync" ? args.baseline != "tcp" && !args.baseline.empty() : args.baseline == "tcp") {
    throw ArgsError("--baseline " + args.baseline + " does not apply to --workload " + args.workload +
                    " (all-reduce: gloo or arrival; sync: tcp)");
  }
  if (args.workload == "sync" && args.quant != "none") throw ArgsError("--quant applies to the all-reduce workload");
  if (is_all_gather(args) && args.workload != "allreduce")
    throw ArgsError("--collective all_gather runs in the allreduce workload (the default), not --workload sync");
  if (is_all_gather(args) && args.quant != "none") throw ArgsError("--quant applies to all-reduces, not all_gather");
  if (is_sparse_step(args)) {
    if (args.workload != "allreduce" || args.quant != "none" || !args.baseline.empty() || args.dtype != ElemType::f32)
      throw ArgsError("--collective sparseloco runs in the allreduce workload on f32, with no --quant and no "
                      "--baseline (the sparse codec quantizes itself; Gloo has no such step)");
  }
  if (!args.wan.empty()) {
    try {
      wan::WanConfig::parse(args.wan).validate();
    } catch (const std::invalid_argument& e) {
      throw ArgsError(e.what());  // "wan spec: bad rtt=..."
    }
  }
  if (!args.wan_topology.empty()) check_topology(args);
  if (args.baseline == "gloo" && args.op != ReduceKind::sum) {
    throw ArgsError("--baseline gloo measures sum only; drop --op or the baseline");
  }
  if (args.role == Role::tcp_sink && args.tcp_source.empty()) {
    throw ArgsError("--role tcp-sink needs --tcp-source (ferry-bench starts it itself)");
  }
  if (args.role == Role::peer) {
    if (args.master.empty() || args.peer_index < 0 || args.bind_host.empty()) {
      throw ArgsError("--role peer needs --master, --peer-index and --bind-host (ferry-bench starts peers itself)");
    }
  }
}

}  // namespace

std::optional<BenchArgs> parse_bench_args(int argc, char** argv) {
  BenchArgs args;
  args.argv.assign(argv, argv + argc);
  std::string sizes_text = "1M,16M,64M";
  std::string dtype_text = "f32";
  std::string op_text = "sum";
  std::string role_text = "orchestrator";
  std::string shared_memory_text = "on";

  CLI::App app(kDescription, "ferry-bench");
  app.add_option("--peers", args.peers, "Peer processes in the ring")->capture_default_str()->check(CLI::Range(2, 64));
  app.add_option("--sizes", sizes_text, "Comma-separated bytes per all-reduce; K/M/G are binary (1M = 1048576)")
      ->capture_default_str();
  app.add_option("--dtype", dtype_text, "Element type")
      ->check(CLI::IsMember(kElemTypeByName, CLI::ignore_case))
      ->capture_default_str();
  app.add_option("--op", op_text, "Reduction (the Gloo baseline runs sum only)")
      ->check(CLI::IsMember(kReduceKindByName, CLI::ignore_case))
      ->capture_default_str();
  app.add_option("--connections", args.connections,
                 "TCP connections per ring neighbour (p2p_connections); 0 adapts them to each link")
      ->capture_default_str()
      ->check(CLI::Range(0u, 64u));
  app.add_option("--concurrent", args.concurrent, "All-reduces in flight per iteration (tags 0..C-1)")
      ->capture_default_str()
      ->check(CLI::Range(1u, 256u));
  app.add_option("--iters", args.iters, "Timed iterations per size")->capture_default_str()->check(CLI::Range(1, 1000000));
  app.add_option("--warmup", args.warmup, "Untimed iterations per size before the timed ones")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000000));
  app.add_option("--baseline", args.baseline,
                 "Also run this baseline with the same sizes: gloo, or arrival (ferry again with its master keeping "
                 "rings in join order, not ordered by the measured links)");
  app.add_option("--gloo-algorithm", args.gloo_algorithm, "Gloo's all-reduce: allreduce, ring or ring_chunked")
      ->check(CLI::IsMember({"allreduce", "ring", "ring_chunked"}))
      ->capture_default_str();
  app.add_option("--master", args.master, "HOST:PORT of a running ferry-master to join instead of starting one");
  app.add_option("--json", args.json_path, "Write every run's figures to this file as JSON");
  app.add_option("--cc", args.congestion_control, "TCP congestion control of the p2p links (bbr, cubic, ...)");
  app.add_option("--peer-timeout-ms", args.peer_timeout_ms,
                 "Each peer's timeout_ms (ferry_comm_params: admission, votes, a collective's start and verdict); "
                 "0 keeps the library's default");
  app.add_option("--quant", args.quant, "Wire quantization of ferry's all-reduces (ferry_quant_name)")
      ->check(CLI::IsMember(tooling::quant_names()))
      ->capture_default_str();
  app.add_option("--wan", args.wan,
                 "Run master, peers and the baseline on an emulated WAN (network namespaces; needs root), e.g. "
                 "rtt=50ms,loss=0.1%,rate=200mbit,cc=cubic");
  app.add_option("--hosts", args.hosts,
                 "With --wan-topology: the topology's host of each peer (and Gloo rank), by name, comma-separated; "
                 "peers start one second apart in this order, so they join in it (default: host i, all at once)")
      ->delimiter(',');
  app.add_option("--wan-topology", args.wan_topology,
                 "Run master, peers and the baseline on an emulated WAN built from this topology file (JSON; "
                 "stress/wan/topologies/; needs root): peer i on host i, the master on host 0")
      ->check(CLI::ExistingFile);
  app.add_option("--shared-memory", shared_memory_text,
                 "Ring links between peers on this host through shared memory (ferry_comm_params.shared_memory); "
                 "off keeps every byte on TCP")
      ->check(CLI::IsMember({"on", "off"}))
      ->capture_default_str();
  app.add_option("--dial-out-only", args.dial_out_only,
                 "Peer indices (comma-separated, from 0) that accept no connection (ferry_comm_params.dial_out_only: "
                 "no p2p listener, their links dialed from their side), as behind NAT or an inbound firewall")
      ->delimiter(',')
      ->check(CLI::Range(0, 63));
  app.add_option("--io-threads", args.io_threads, "Communicator I/O threads per peer (default: ferry's)")
      ->check(CLI::Range(1u, 64u));
  app.add_option("--chunk-bytes", args.chunk_bytes, "Largest pipelining chunk, bytes (default: ferry's)")
      ->check(CLI::Range(4096u, 64u << 20));
  app.add_option("--secret-file", args.secret_file,
                 "Run secret for the master this starts and the peers (default: $FERRY_SECRET_FILE)");
  app.add_flag("--tls", args.tls,
               "TLS 1.3 on every connection of ferry's run (master and p2p links), with the certificates of "
               "--tls-dir, or throwaway ones made by tools/gen-test-certs");
  app.add_option("--tls-dir", args.tls_dir,
                 "Directory holding ca.pem, master.pem, master.key, peer.pem, peer.key (as `tools/gen-test-certs "
                 "DIR master peer` writes them); implies --tls")
      ->check(CLI::ExistingDirectory);
  app.add_option("--bin-dir", args.bin_dir, "Directory holding ferry-master and ferry-gloo-bench (default: the build tree)");
  app.add_option("--timeout-s", args.timeout_s, "Deadline of each implementation's run (default: from the sizes)")
      ->check(CLI::Range(1.0, 86400.0));
  app.add_flag("--verbose", args.verbose, "Show the child processes' logs as they come (the master's at info level)");
  app.add_option("--workload", args.workload,
                 "What to measure: allreduce, or sync (a newcomer's ferry_sync_shared_state from --holders peers; "
                 "--sizes is then the state's bytes, default 64M or the --state-file's size)")
      ->check(CLI::IsMember({"allreduce", "sync"}))
      ->capture_default_str();
  app.add_option("--collective", args.collective,
                 "The collective the allreduce workload times: allreduce, or all_gather (every peer contributes "
                 "--sizes bytes; busbw = (N-1)/N * algbw, algbw = N * size / time, as nccl-tests; the Gloo "
                 "baseline runs gloo::allgather), or sparseloco (one SparseLoCo outer step of --sizes of f32: "
                 "each peer's top-k encoded, all-gathered, summed; timed whole, bandwidths as an all-reduce's "
                 "of that size, so the time compares with --quant u8's)")
      ->check(CLI::IsMember({"allreduce", "all_gather", "sparseloco"}))
      ->capture_default_str();
  app.add_option("--sparse-density", args.sparse_density,
                 "--collective sparseloco: the share of each chunk of 4096 sent (ferry_sparse_k_for_density)")
      ->capture_default_str()
      ->check(CLI::Range(1e-6, 1.0));
  app.add_option("--sparse-bits", args.sparse_bits, "--collective sparseloco: bits a value (2, 4 or 8)")
      ->capture_default_str()
      ->check(CLI::IsMember({2u, 4u, 8u}));
  app.add_option("--holders", args.holders, "sync: peers holding identical state (the newcomer is one more)")
      ->capture_default_str()
      ->check(CLI::Range(1, 63));
  app.add_option("--compression", args.compression,
                 "sync: zstd level the newcomer asks holders for (ferry_shared_state.compression_level; 0: raw)")
      ->capture_default_str()
      ->check(CLI::Range(0u, 22u));
  app.add_option("--state-file", args.state_file,
                 "sync: raw bytes to use as the state's content (the first --sizes bytes; default: generated "
                 "weights-like f32)")
      ->check(CLI::ExistingFile);
  app.add_option("--tensors", args.tensors, "sync: tensors the state is split into")
      ->capture_default_str()
      ->check(CLI::Range(1u, 4096u));

  // The peer role: ferry-bench re-executed by its orchestrator. Hidden from --help.
  app.add_option("--role", role_text)->group("")->check(CLI::IsMember(kRoles));
  app.add_option("--peer-index", args.peer_index)->group("");
  app.add_option("--bind-host", args.bind_host)->group("");
  app.add_option("--fault-peer", args.fault_peer)->group("");
  app.add_option("--tcp-source", args.tcp_source)->group("");

  tooling::add_version_flag(app, tooling::version_text("ferry-bench", ferry_version()));

  if (!tooling::parse_or_throw<ArgsError>(app, argc, argv)) return std::nullopt;  // --help, --version
  if (args.workload == "sync") {
    // Its own children get the whole forwarded command line; refuse only what a user typed.
    for (const char* option : {"--peers", "--op", "--concurrent", "--gloo-algorithm", "--quant"}) {
      if (role_text == "orchestrator" && app.count(option) > 0) {
        throw ArgsError(std::string(option) + " does not apply to --workload sync" +
                        (std::string(option) == "--peers" ? " (the world is --holders plus the newcomer)" : ""));
      }
    }
    args.peers = args.holders + 1;
    if (app.count("--sizes") == 0) {
      try {
        sizes_text = args.state_file.empty() ? "64M" : std::to_string(state_file_bytes(args.state_file));
      } catch (const std::runtime_error& e) {
        throw ArgsError(e.what());
      }
    }
  }
  try {
    args.sizes = tooling::parse_byte_sizes(sizes_text);
  } catch (const std::invalid_argument& e) {
    throw ArgsError(e.what());  // "bad size '1MB': ..."
  }
  args.dtype = kElemTypeByName.at(CLI::detail::to_lower(dtype_text));
  args.op = kReduceKindByName.at(CLI::detail::to_lower(op_text));
  args.role = kRoles.at(role_text);
  args.shared_memory = shared_memory_text == "on";
  if (!args.tls_dir.empty()) args.tls = true;
  // The peers would take it from the environment anyway; the master must get it too.
  if (const char* env = std::getenv("FERRY_SECRET_FILE"); args.secret_file.empty() && env != nullptr) {
    args.secret_file = env;
  }
  check_consistency(args);
  return args;
}

std::vector<std::string> peer_forwarded_args(const BenchArgs& args) {
  std::string sizes;
  for (const std::size_t bytes : args.sizes) {
    if (!sizes.empty()) sizes += ',';
    sizes += std::to_string(bytes);
  }
  std::vector<std::string> out{"--peers",       std::to_string(args.peers),
                               "--sizes",       sizes,
                               "--dtype",       std::string(elem_type_name(args.dtype)),
                               "--op",          std::string(reduce_kind_name(args.op)),
                               "--connections", std::to_string(args.connections),
                               "--concurrent",  std::to_string(args.concurrent),
                               "--iters",       std::to_string(args.iters),
                               "--warmup",      std::to_string(args.warmup)};
  if (!args.congestion_control.empty()) out.insert(out.end(), {"--cc", args.congestion_control});
  if (args.peer_timeout_ms != 0) out.insert(out.end(), {"--peer-timeout-ms", std::to_string(args.peer_timeout_ms)});
  if (args.quant != "none") out.insert(out.end(), {"--quant", args.quant});
  if (args.collective != "allreduce") out.insert(out.end(), {"--collective", args.collective});
  if (is_sparse_step(args))
    out.insert(out.end(), {"--sparse-density", std::to_string(args.sparse_density), "--sparse-bits",
                           std::to_string(args.sparse_bits)});
  if (args.io_threads != 0) out.insert(out.end(), {"--io-threads", std::to_string(args.io_threads)});
  if (args.chunk_bytes != 0) out.insert(out.end(), {"--chunk-bytes", std::to_string(args.chunk_bytes)});
  if (!args.shared_memory) out.insert(out.end(), {"--shared-memory", "off"});
  if (!args.dial_out_only.empty()) {
    std::string peers;
    for (int i : args.dial_out_only) peers += (peers.empty() ? "" : ",") + std::to_string(i);
    out.insert(out.end(), {"--dial-out-only", peers});
  }
  if (!args.secret_file.empty()) out.insert(out.end(), {"--secret-file", args.secret_file});
  if (!args.tls_dir.empty()) out.insert(out.end(), {"--tls-dir", args.tls_dir});
  if (args.workload == "sync") {
    out.insert(out.end(), {"--workload", "sync", "--holders", std::to_string(args.holders), "--compression",
                           std::to_string(args.compression), "--tensors", std::to_string(args.tensors)});
    if (!args.state_file.empty()) out.insert(out.end(), {"--state-file", args.state_file});
  }
  if (args.fault_peer >= 0) out.insert(out.end(), {"--fault-peer", std::to_string(args.fault_peer)});
  return out;
}

double slowest_plausible_Bps(const BenchArgs& args) {
  constexpr double kLoopbackFloor = 20e6;  // loopback gives ~1 GB/s on 2 cores
  const std::optional<WanLinkBudget> link = wan_link_budget(args);
  if (!link) return kLoopbackFloor;
  double floor = kLoopbackFloor;
  if (link->rate_bps > 0) floor = std::min(floor, link->rate_bps / 8);
  // One loss-limited Reno/cubic stream: Gloo's ring (one stream a neighbour) measured just that.
  floor = std::min(floor, loss_limited_stream_Bps(link->rtt_ms, link->loss));
  return floor / 2;  // the forwarder shares the cores with the peers
}

double run_deadline_s(const BenchArgs& args) {
  if (args.timeout_s > 0) return args.timeout_s;
  const double rate = slowest_plausible_Bps(args);
  double seconds = 60 + 2.0 * args.peers;  // start-up
  if (args.workload == "sync") {
    // A newcomer's syncs, or one baseline's transfers, plus filling every process's state.
    for (const std::size_t bytes : args.sizes) {
      seconds += (args.iters + args.warmup) * static_cast<double>(bytes) / rate +
                 static_cast<double>(bytes) * args.peers / 50e6;
    }
    return seconds;
  }
  // Every round moves under 2x the op's bytes per peer (an all-gather: N - 1 times
  // each contribution); plus the input fill and the exact-sum check per size.
  const double rounds = static_cast<double>(args.iters + args.warmup);
  const double moved = is_all_gather(args) ? args.peers - 1.0 : 2.0;
  for (const std::size_t bytes : args.sizes) {
    const double op_bytes = static_cast<double>(bytes) * args.concurrent;
    seconds += rounds * op_bytes * moved / rate + op_bytes * args.peers * moved / 50e6;
  }
  return seconds;
}

}  // namespace ferry::bench
