// Command line of ferry-bench. The public options are a product interface
// (scripts and CI call them): rename nothing, only add.
//
// One parse serves both roles: the orchestrator (what users run) and the peer
// processes it starts, which get the same options plus the hidden --role peer,
// --peer-index and --bind-host.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <vector>

#include "byte_size.h"
#include "element_type.h"

namespace ferry::bench {

// A command line that cannot be run; what() is the message for the user.
class ArgsError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// peer: a ferry peer (all-reduce or sync workload); tcp_source / tcp_sink: the
// two ends of the sync workload's raw TCP baseline (tcp_baseline.h).
enum class Role { orchestrator, peer, tcp_source, tcp_sink };
// The dtypes the Gloo baseline also runs, and every op of ferry's: each with an
// exact expected result on the bench's inputs (input_pattern.h).
using tooling::ElemType;
using tooling::ReduceKind;
using tooling::elem_type_name;
using tooling::elem_type_size;
using tooling::reduce_kind_name;
using tooling::format_byte_size;

struct BenchArgs {
  Role role = Role::orchestrator;
  std::string workload = "allreduce";  // "allreduce" or "sync" (ferry_sync_shared_state; sync_orchestrator.h)
  // The allreduce workload's collective: "allreduce", or "all_gather" (ferry_all_gather; --sizes are
  // then the bytes each peer contributes; gather_bench.h).
  std::string collective = "allreduce";
  // --collective sparseloco: the sparse codec's density of each chunk of 4096 and bits a value.
  double sparse_density = 0.02;
  std::uint32_t sparse_bits = 2;
  int peers = 3;
  std::vector<std::size_t> sizes;  // bytes per operation, in run order
  ElemType dtype = ElemType::f32;
  ReduceKind op = ReduceKind::sum;
  std::uint32_t connections = 0;  // ferry_comm_params.p2p_connections; 0: adapted per link
  std::uint32_t concurrent = 1;   // all-reduces in flight per iteration
  int iters = 10;
  int warmup = 3;
  std::string baseline;           // "" or "gloo"
  std::string gloo_algorithm = "allreduce";
  std::string master;             // HOST:PORT of a running master; "" starts one
  std::string json_path;          // "" writes no JSON
  std::string congestion_control; // "" keeps the system's
  std::uint32_t peer_timeout_ms = 0;  // each peer's ferry_comm_params.timeout_ms; 0 keeps the library's
  std::string quant = "none";     // a ferry_quant_name (ferry only; lossy: results checked for bit-identity only)
  std::string wan;                // "" on loopback; else an emulated WAN spec: rtt=50ms,loss=0.1%,rate=200mbit[,cc=...]
  std::string wan_topology;       // "" or an emulated WAN's topology file (stress/wan/topology.h); exclusive with wan
  // With wan_topology: the host of peer (and Gloo rank) i, by name; the peers
  // then start one second apart in this order, so they join in it. Empty: host i.
  std::vector<std::string> hosts;
  std::string ring_order = "best";  // the master's --ring-order; "arrival" for the arrival baseline's run
  std::uint32_t io_threads = 0;   // 0 keeps ferry's default
  std::uint32_t chunk_bytes = 0;  // 0 keeps ferry's default
  std::string secret_file;        // run secret for master and peers; "" for none
  bool tls = false;               // TLS on every connection of ferry's run
  bool shared_memory = true;      // ferry_comm_params.shared_memory (same-host ring links)
  std::vector<int> dial_out_only;  // peer indices with ferry_comm_params.dial_out_only (no p2p listener)
  std::string tls_dir;            // ca.pem, master.pem/.key, peer.pem/.key; "" (with tls): throwaway ones
  std::string bin_dir;            // "" looks next to this executable
  double timeout_s = 0;           // 0 derives one from the work (run_deadline_s)
  bool verbose = false;           // forward children's stderr live

  // Sync workload only. --peers is then holders + 1 (the newcomer).
  int holders = 2;                // peers holding the state; the newcomer fetches from them
  std::uint32_t compression = 0;  // ferry_shared_state.compression_level the newcomer asks for
  std::string state_file;         // raw bytes for the tensors' content; "" generates weights-like f32
  std::uint32_t tensors = 1;      // the state is split into this many tensors of (nearly) equal size

  // Peer role only (hidden options).
  int peer_index = -1;
  std::string bind_host;          // address the p2p listener binds
  int fault_peer = -1;            // test hook: this peer index dies before its first timed iteration
  std::string tcp_source;         // tcp_sink role: HOST:PORT of the tcp_source

  std::vector<std::string> argv;  // the command line as given, for the JSON record
};

// Returns std::nullopt when --help was printed. Throws ArgsError.
std::optional<BenchArgs> parse_bench_args(int argc, char** argv);

// The options a peer process needs to replay this run (without --role etc.).
std::vector<std::string> peer_forwarded_args(const BenchArgs& args);

// The sync workload's newcomer is the peer after the holders.
inline bool is_sync_newcomer(const BenchArgs& args) { return args.peer_index == args.holders; }

inline bool is_all_gather(const BenchArgs& args) { return args.collective == "all_gather"; }
// SparseLoCo's outer step (sparse_step_bench.h): encode, all-gather, decode-and-sum of --sizes of f32.
inline bool is_sparse_step(const BenchArgs& args) { return args.collective == "sparseloco"; }

// Whether the run's hosts are an emulated WAN (--wan or --wan-topology).
inline bool on_emulated_wan(const BenchArgs& args) { return !args.wan.empty() || !args.wan_topology.empty(); }

// The busbw (bytes/s) below which a run is taken for hung: 20 MB/s on loopback; on an
// emulated WAN what one TCP stream surely gets from its rate, delay and loss (wan_link.h).
double slowest_plausible_Bps(const BenchArgs& args);

// The wall-clock budget of one implementation's run, in seconds: --timeout-s, or
// a generous estimate from the bytes to move (slow machines must not fail it).
double run_deadline_s(const BenchArgs& args);

}  // namespace ferry::bench
