// ferry-chaos-peer: one training-like peer of a ferry-chaos run. It joins,
// then loops: admit waiting peers when ferry_peers_pending says so, agree on
// the step number with the world (a max all-reduce after every topology
// change, so newcomers catch up), and run `concurrent` async all-reduces whose
// inputs derive from (seed, step, k, peer id) (chaos_data.h). A retryable
// failure leads to ferry_update_topology and the same step again; master lost
// or kicked ends the process with status 4. Every outcome is one stdout line:
//   connect result=R t=T                             (every attempt)
//   joined id=ID t=T
//   topo result=R epoch=E world=W t=T
//   relay epoch=E relay=ID                (once per ring: the peer relaying its next link, 0: direct)
//   sync result=R step=S t=T
//   pending result=R n=N t=T                        (only when N > 0 or it failed)
//   op step=S k=K epoch=E ring=ID,ID,.. result=R hash=H err=X t0=T t1=T start=S stall=S commit=S
//   (the last three: ferry_op_info's phases, in seconds; k = kGatherK: the step's all-gather,
//   after its all-reduces, hashing the whole result, err 1 when a rank's block is not its input)
//   state step=S epoch=E ring=ID,ID,.. result=R revision=V hash=H received=B t0=T t1=T
//   (after every topology change, so a newcomer receives the state at once, and every --state-every steps)
//   fatal call=NAME result=R t=T
// T is CLOCK_MONOTONIC seconds, comparable with the harness's clock.
#include <CLI/CLI.hpp>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "chaos_data.h"
#include "one_tensor_state.h"  // tools/common
#include "quant_names.h"       // tools/common
#include "tool_cli.h"          // tools/common
#include "ferry/ferry.h"

namespace {

using ferry::chaos::op_seed;

constexpr int kExitFatal = 4;     // master lost or kicked: expected under chaos
constexpr int kExitMisuse = 5;    // ferry called us wrong, or a bug: a violation
// This peer never held the shared state and no member offers it any more (every holder
// left before it could receive: the revision rule refuses a group that restarts from 0).
constexpr int kExitStateLost = 6;

// steady_clock is CLOCK_MONOTONIC on Linux, as the harness reads it.
double monotonic_s() { return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count(); }

long long attr(const ferry_comm* comm, ferry_attribute which) {
  int64_t value = -1;
  return ferry_comm_get_attribute(comm, which, &value) == FERRY_OK ? static_cast<long long>(value) : -1;
}

void line(const char* format, auto... args) {
  std::printf(format, args...);
  std::fflush(stdout);
}

// Ends the process when r leaves the communicator unusable or says we are buggy.
void exit_if_fatal(ferry_comm* comm, const char* call, ferry_result r) {
  if (r == FERRY_OK || r == FERRY_ERR_TIMEOUT || r == FERRY_ERR_PEER_LOST || r == FERRY_ERR_PROTOCOL ||
      r == FERRY_ERR_MISMATCH || r == FERRY_ERR_CONNECT || r == FERRY_ERR_SYSTEM)
    return;
  line("fatal call=%s result=%d t=%.6f\n", call, static_cast<int>(r), monotonic_s());
  std::fprintf(stderr, "%s: %s: %s\n", call, ferry_strerror(r), ferry_last_error());
  ferry_comm_destroy(comm);
  std::exit(r == FERRY_ERR_MASTER_LOST || r == FERRY_ERR_KICKED ? kExitFatal : kExitMisuse);
}

// This peer's copy of the run's shared state.
struct ChaosState {
  bool synced = false;    // it took part in a successful sync
  uint64_t revision = 0;  // the group's revision after that sync
  std::vector<float> data;
};

// After every topology change and every --state-every steps the world syncs
// its shared state before the all-reduces, as DiLoCo syncs its outer model
// (newcomers receive it at admission): a peer that never synced
// offers revision 0 and receives what the others hold; every other peer
// offers the next revision, which a successful sync makes the group's. The
// bytes at each revision are chaos_data's state_content, so the harness knows
// what every successful sync must leave.
std::string ring_text(const std::vector<uint64_t>& ring) {
  std::string out;
  for (uint64_t id : ring) {
    if (!out.empty()) out += ',';
    out += std::to_string(id);
  }
  return out.empty() ? "-" : out;
}

std::vector<uint64_t> ring_of(ferry_comm* comm) {
  size_t ring_size = 0;
  ferry_comm_ring(comm, nullptr, 0, &ring_size);
  std::vector<uint64_t> ring(ring_size);
  ferry_comm_ring(comm, ring.data(), ring.size(), &ring_size);
  return ring;
}

ferry_result sync_state(ferry_comm* comm, uint64_t seed, uint64_t step, ChaosState& state) {
  const uint64_t offered = state.synced ? state.revision + 1 : 0;
  state.data = ferry::chaos::state_content(seed, offered);
  uint64_t revision = offered;
  ferry_sync_info info{};
  info.struct_size = sizeof info;
  const long long epoch = attr(comm, FERRY_ATTR_EPOCH);
  const std::vector<uint64_t> ring = ring_of(comm);
  const double t0 = monotonic_s();
  const ferry_result r = ferry::tooling::sync_one_tensor(comm, "state", state.data.data(), state.data.size(), FERRY_F32,
                                                         revision, FERRY_SYNC_ENFORCE_POPULAR, &info);
  std::string hash = "-";
  if (r == FERRY_OK) {
    state.synced = true;
    state.revision = revision;
    hash = ferry::chaos::result_hash(state.data.data(), state.data.size() * sizeof(float));
  }
  line("state step=%llu epoch=%lld ring=%s result=%d revision=%llu hash=%s received=%llu t0=%.6f t1=%.6f\n",
       static_cast<unsigned long long>(step), epoch, ring_text(ring).c_str(), static_cast<int>(r),
       static_cast<unsigned long long>(revision), hash.c_str(),
       static_cast<unsigned long long>(info.bytes_received), t0, monotonic_s());
  return r;
}

// The step's all-gather: this peer's contribution (chaos_data.h) to every member, each block checked
// here against its member's recipe (err) and hashed whole for the harness's reference.
ferry_result run_gather(ferry_comm* comm, uint64_t seed, uint64_t step, uint64_t id, size_t max_bytes,
                        const std::vector<uint64_t>& ring, long long epoch) {
  const auto mine = ferry::chaos::gather_contribution(seed, step, id, max_bytes);
  ferry_all_gather_desc desc;
  ferry_all_gather_desc_init(&desc);
  desc.tag = step;
  ferry_op_info info{};
  info.struct_size = sizeof info;
  ferry_gathered* result = nullptr;
  const double t0 = monotonic_s();
  const ferry_result r = ferry_all_gather(comm, mine.data(), mine.size(), &desc, &result, &info);
  const double t1 = monotonic_s();
  std::string hash = "-";
  double error = 0;
  if (r == FERRY_OK) {
    const void* data = nullptr;
    size_t total = 0;
    uint32_t members = 0;
    ferry_gathered_layout(result, &members, &data, &total);
    hash = ferry::chaos::result_hash(data, total);
    for (uint32_t rank = 0; rank < members; ++rank) {
      const void* part = nullptr;
      size_t bytes = 0;
      ferry_gathered_part(result, rank, &part, &bytes);
      const auto want = ferry::chaos::gather_contribution(seed, step, rank < ring.size() ? ring[rank] : 0, max_bytes);
      if (members != ring.size() || bytes != want.size() || (bytes > 0 && std::memcmp(part, want.data(), bytes) != 0))
        error = 1;
    }
  }
  ferry_gathered_destroy(result);
  line("op step=%llu k=%u epoch=%lld ring=%s result=%d hash=%s err=%.6g t0=%.6f t1=%.6f start=%.3f stall=%.3f "
       "commit=%.3f\n",
       static_cast<unsigned long long>(step), ferry::chaos::kGatherK, epoch, ring_text(ring).c_str(),
       static_cast<int>(r), hash.c_str(), error, t0, t1, info.start_s, info.longest_stall_s, info.commit_s);
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ferry-chaos-peer: a training-like peer for ferry-chaos"};
  std::string master, quant_text = "none";
  uint64_t seed = 1;
  size_t count = 1 << 20;
  uint32_t concurrent = 2, connections = 2, timeout_ms = 10000, progress_ms = 5000, heartbeat_ms = 3000;
  uint16_t advertise_port = 0, p2p_port = 0;
  uint64_t state_every = 0;
  size_t gather_bytes = 0;
  double max_seconds = 3600;
  app.add_option("--master", master)->required();
  app.add_option("--seed", seed);
  app.add_option("--count", count, "f32 elements per all-reduce");
  app.add_option("--quant", quant_text);
  app.add_option("--concurrent", concurrent)->check(CLI::Range(1u, 64u));
  app.add_option("--connections", connections);
  app.add_option("--advertise-port", advertise_port, "the chaos proxy's port in front of this peer");
  app.add_option("--p2p-port", p2p_port, "the port this peer's p2p listener binds");
  bool dial_out_only = false;
  app.add_flag("--dial-out-only", dial_out_only, "no p2p listener: this peer dials every link it takes part in");
  app.add_option("--timeout-ms", timeout_ms);
  app.add_option("--progress-ms", progress_ms);
  app.add_option("--heartbeat-ms", heartbeat_ms);
  app.add_option("--state-every", state_every, "sync the shared state every this many steps (0: never)");
  app.add_option("--gather-bytes", gather_bytes, "the largest all-gather contribution (0: no all-gather)");
  app.add_option("--max-seconds", max_seconds, "leave cleanly after this long");
  ferry::tooling::add_version_flag(app, ferry::tooling::version_text("ferry-chaos-peer", ferry_version()));
  if (const auto status = ferry::tooling::parse_command_line(app, argc, argv)) return *status;
  const std::optional<ferry_quant> parsed_quant = ferry::tooling::parse_quant(quant_text);
  if (!parsed_quant) {
    std::fprintf(stderr, "unknown --quant %s\n", quant_text.c_str());
    return ferry::tooling::kExitBadArguments;
  }
  const ferry_quant quant = *parsed_quant;

  ferry_comm_params params;
  ferry_comm_params_init(&params);
  params.master_address = master.c_str();
  params.p2p_listen_host = "127.0.0.1";
  params.dial_out_only = dial_out_only ? 1 : 0;
  if (!dial_out_only) {
    params.p2p_port_min = params.p2p_port_max = p2p_port;
    params.advertised_host = "127.0.0.1";
    params.advertised_port = advertise_port;
  }
  params.p2p_connections = connections;
  params.timeout_ms = timeout_ms;
  params.progress_timeout_ms = progress_ms;
  params.heartbeat_timeout_ms = heartbeat_ms;
  params.io_threads = 1;
  // The faults live in the proxies between peers: bytes must cross them, not a shared-memory ring.
  params.shared_memory = 0;
  ferry_comm* comm = nullptr;
  if (ferry_result r = ferry_comm_create(&params, &comm); r != FERRY_OK) {
    std::fprintf(stderr, "ferry_comm_create: %s\n", ferry_last_error());
    return 2;
  }
  // Admission waits for the accepted peers' next topology vote; under chaos that can take a while.
  ferry_result joined = FERRY_ERR_TIMEOUT;
  for (int attempt = 0; attempt < 30 && joined == FERRY_ERR_TIMEOUT; ++attempt) {
    joined = ferry_connect(comm);
    line("connect result=%d t=%.6f\n", static_cast<int>(joined), monotonic_s());
  }
  exit_if_fatal(comm, "connect", joined);
  if (joined != FERRY_OK) {
    line("fatal call=connect result=%d t=%.6f\n", static_cast<int>(joined), monotonic_s());
    ferry_comm_destroy(comm);
    return kExitFatal;
  }
  const uint64_t id = static_cast<uint64_t>(attr(comm, FERRY_ATTR_PEER_ID));
  line("joined id=%llu t=%.6f\n", static_cast<unsigned long long>(id), monotonic_s());

  ferry_allreduce_desc desc;
  ferry_allreduce_desc_init(&desc);
  desc.quant = quant;
  std::vector<std::vector<float>> send(concurrent, std::vector<float>(count)), recv = send;
  std::vector<ferry_op*> ops(concurrent);
  std::vector<ferry_result> results(concurrent);
  uint64_t step = 0;
  ChaosState state;
  bool need_topology = false, need_sync = true, need_state = true;
  long long relay_said_for = -1;  // the epoch of the last "relay" line
  const double end = monotonic_s() + max_seconds;
  while (monotonic_s() < end) {
    if (need_topology) {
      ferry_result r = ferry_update_topology(comm);
      line("topo result=%d epoch=%lld world=%lld t=%.6f\n", static_cast<int>(r),
           attr(comm, FERRY_ATTR_EPOCH), attr(comm, FERRY_ATTR_GROUP_WORLD_SIZE),
           monotonic_s());
      exit_if_fatal(comm, "update_topology", r);
      if (r != FERRY_OK) {
        std::this_thread::sleep_for(std::chrono::milliseconds(50));
        continue;
      }
      need_topology = false;
      need_sync = true;
      need_state = true;
    }
    if (need_sync) {  // newcomers start at 0: the world's largest step wins
      uint64_t agreed = step;
      ferry_allreduce_desc max_desc;
      ferry_allreduce_desc_init(&max_desc);
      max_desc.dtype = FERRY_U64;
      max_desc.op = FERRY_OP_MAX;
      max_desc.tag = ~uint64_t{0};
      ferry_result r = ferry_allreduce(comm, &agreed, &agreed, 1, &max_desc, nullptr);
      line("sync result=%d step=%llu t=%.6f\n", static_cast<int>(r), static_cast<unsigned long long>(agreed),
           monotonic_s());
      exit_if_fatal(comm, "sync", r);
      if (r != FERRY_OK) {
        need_topology = true;
        continue;
      }
      step = agreed;
      need_sync = false;
    }
    uint32_t pending = 0;
    ferry_result r = ferry_peers_pending(comm, &pending);
    if (r != FERRY_OK || pending > 0) line("pending result=%d n=%u t=%.6f\n", static_cast<int>(r), pending, monotonic_s());
    exit_if_fatal(comm, "peers_pending", r);
    if (r != FERRY_OK || pending > 0) {
      need_topology = true;
      continue;
    }

    if (state_every > 0 && (need_state || step % state_every == 0)) {
      r = sync_state(comm, seed, step, state);
      if (r == FERRY_ERR_INVALID_USAGE && !state.synced) {
        std::fprintf(stderr, "sync_shared_state: %s: the state is lost to this peer\n", ferry_last_error());
        ferry_comm_destroy(comm);
        return kExitStateLost;
      }
      exit_if_fatal(comm, "sync_shared_state", r);
      if (r != FERRY_OK) {
        need_topology = true;
        continue;
      }
      need_state = false;
    }

    const std::vector<uint64_t> ring = ring_of(comm);
    const long long epoch = attr(comm, FERRY_ATTR_EPOCH);
    if (epoch != relay_said_for) {  // once per ring: who relays this peer's next link (0: nobody)
      line("relay epoch=%lld relay=%lld\n", epoch, attr(comm, FERRY_ATTR_NEXT_LINK_RELAY));
      relay_said_for = epoch;
    }
    std::vector<double> started(concurrent);
    for (uint32_t k = 0; k < concurrent; ++k) {
      ferry::chaos::fill_peer_input(send[k].data(), count, op_seed(seed, step, k), id);
      desc.tag = step * concurrent + k;
      started[k] = monotonic_s();
      results[k] = ferry_allreduce_async(comm, send[k].data(), recv[k].data(), count, &desc, &ops[k]);
      if (results[k] != FERRY_OK) ops[k] = nullptr;
    }
    bool all_ok = true;
    for (uint32_t k = 0; k < concurrent; ++k) {
      ferry_op_info info{};
      info.struct_size = sizeof info;
      if (ops[k] != nullptr) results[k] = ferry_op_wait(ops[k], &info);
      const double finished = monotonic_s();
      std::string hash = "-";
      double error = 0;
      if (results[k] == FERRY_OK) {
        hash = ferry::chaos::result_hash(recv[k].data(), count * sizeof(float));
        if (quant != FERRY_QUANT_NONE) {
          const std::vector<float> expected = ferry::chaos::reference_sum(count, op_seed(seed, step, k), ring);
          for (size_t i = 0; i < count; ++i)
            error = std::max(error, std::fabs(static_cast<double>(recv[k][i]) - static_cast<double>(expected[i])));
          if (std::isnan(error)) error = 1e30;
        }
      }
      line("op step=%llu k=%u epoch=%lld ring=%s result=%d hash=%s err=%.6g t0=%.6f t1=%.6f start=%.3f stall=%.3f "
           "commit=%.3f\n",
           static_cast<unsigned long long>(step), k, epoch, ring_text(ring).c_str(), static_cast<int>(results[k]),
           hash.c_str(), error, started[k], finished, info.start_s, info.longest_stall_s, info.commit_s);
      all_ok &= results[k] == FERRY_OK;
    }
    for (uint32_t k = 0; k < concurrent; ++k) exit_if_fatal(comm, "allreduce", results[k]);
    if (all_ok && gather_bytes > 0) {
      r = run_gather(comm, seed, step, id, gather_bytes, ring, epoch);
      exit_if_fatal(comm, "all_gather", r);
      all_ok = r == FERRY_OK;
    }
    if (all_ok) {
      ++step;
    } else {
      need_topology = true;
    }
  }
  ferry_comm_destroy(comm);
  return 0;
}
