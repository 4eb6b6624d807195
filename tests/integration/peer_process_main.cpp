// ferry-test-peer: a peer process for the failure tests (kills, stops, a dying
// master need real processes). It joins, waits for the group, then runs
// rounds of all-reduces of ones (so a result equals the world it ran in) and
// reports every outcome on stdout, one line each, flushed:
//   ready rank=R world=W
//   op round=I result=CODE world=W value=V t=SECONDS        (t: CLOCK_MONOTONIC, comparable across processes)
//   next result=CODE t=SECONDS                              (--probe-after-fatal: the call after a fatal one)
//   starved fds=N t=SECONDS / fed t=SECONDS                 (--starve-fds-on-admit: the table full, then freed)
//   rejoined result=CODE t=SECONDS                          (--rejoin-after-kick: kicked with CODE, joined again)
//   sync result=CODE revision=R received=BYTES t=SECONDS    (--mode sync: one shared-state sync, then done)
//   done
// --mode sync holds one shared tensor "w" of --shared-mib MiB at --revision,
// filled with shared_word(i) (revision > 0) or zeros (0: it receives only).
// A retryable failure is followed by ferry_update_topology, as a training loop would.
// A fatal one (master lost, kicked) ends the process with status 3, except a
// first kick with --rejoin-after-kick: a new communicator joins as a newcomer.
#include <CLI/CLI.hpp>

#include <fcntl.h>
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <ctime>
#include <optional>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "ferry/ferry.h"
#include "one_tensor_state.h"  // tools/common

namespace {

double monotonic_s() {
  timespec t{};
  clock_gettime(CLOCK_MONOTONIC, &t);
  return static_cast<double>(t.tv_sec) + static_cast<double>(t.tv_nsec) * 1e-9;
}

int64_t attr(ferry_comm* comm, ferry_attribute a) {
  int64_t v = -1;
  ferry_comm_get_attribute(comm, a, &v);
  return v;
}

// Fills this process's descriptor table (as ~1000 idle strangers on the p2p
// port would) and empties it again after `hold_ms`, on a thread of its own:
// the caller goes on with a table in which every new descriptor fails (EMFILE).
class FdHog {
 public:
  explicit FdHog(uint32_t hold_ms) {
    for (int fd; (fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC)) >= 0;) fds_.push_back(fd);
    std::printf("starved fds=%zu t=%.6f\n", fds_.size(), monotonic_s());
    std::fflush(stdout);
    freer_ = std::thread([this, hold_ms] {
      std::this_thread::sleep_for(std::chrono::milliseconds(hold_ms));
      for (int fd : fds_) ::close(fd);
      std::printf("fed t=%.6f\n", monotonic_s());
      std::fflush(stdout);
    });
  }
  ~FdHog() { freer_.join(); }
  FdHog(const FdHog&) = delete;
  FdHog& operator=(const FdHog&) = delete;

 private:
  std::vector<int> fds_;
  std::thread freer_;
};

// Word i of a holder's shared tensor: every word differs from its neighbours.
uint32_t shared_word(size_t i) { return static_cast<uint32_t>(i) * 2654435761u + 1u; }

// One shared-state sync of "w"; returns the process's exit status.
int sync_once(ferry_comm* comm, size_t mib, uint64_t revision) {
  std::vector<uint32_t> words(mib << 18);
  if (revision > 0)
    for (size_t i = 0; i < words.size(); ++i) words[i] = shared_word(i);
  ferry_sync_info info{};
  info.struct_size = sizeof info;
  const ferry_sync_strategy strategy = revision > 0 ? FERRY_SYNC_ENFORCE_POPULAR : FERRY_SYNC_RECEIVE_ONLY;
  ferry_result r =
      ferry::tooling::sync_one_tensor(comm, "w", words.data(), words.size(), FERRY_U32, revision, strategy, &info);
  if (r != FERRY_OK) std::fprintf(stderr, "sync: %s: %s\n", ferry_strerror(r), ferry_last_error());
  bool exact = true;
  for (size_t i = 0; i < words.size() && exact; ++i) exact = words[i] == shared_word(i);
  std::printf("sync result=%d revision=%llu received=%llu exact=%d t=%.6f\n", static_cast<int>(r),
              static_cast<unsigned long long>(revision), static_cast<unsigned long long>(info.bytes_received),
              exact ? 1 : 0, monotonic_s());
  std::printf("done\n");
  std::fflush(stdout);
  ferry_comm_destroy(comm);
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"ferry-test-peer: a scripted peer for failure tests"};
  std::string master, mode = "loop";
  int peers = 2, rounds = 10;
  size_t floats = 1 << 20;
  uint32_t connections = 2, heartbeat_ms = 2000, progress_ms = 5000, timeout_ms = 20000, io_threads = 2;
  uint32_t fd_limit = 0, starve_fds_ms = 0;
  bool admit = false, probe_after_fatal = false, shared_memory = false, rejoin_after_kick = false;
  app.add_option("--master", master)->required();
  app.add_option("--peers", peers, "wait until the group has this many peers");
  app.add_option("--rounds", rounds);
  app.add_option("--floats", floats);
  app.add_option("--mode", mode,
                 "loop: one all-reduce per round; retry: ferry_allreduce_multiple_with_retry; sync: one shared-state sync");
  size_t shared_mib = 64;
  uint64_t revision = 5;
  app.add_option("--shared-mib", shared_mib, "--mode sync: the shared tensor's size");
  app.add_option("--revision", revision, "--mode sync: this peer's revision (0: receive only)");
  app.add_option("--connections", connections);
  app.add_option("--heartbeat-ms", heartbeat_ms);
  app.add_option("--progress-ms", progress_ms);
  app.add_option("--timeout-ms", timeout_ms);
  app.add_flag("--admit", admit, "admit pending peers at every round (ferry_peers_pending + update_topology)");
  app.add_flag("--probe-after-fatal", probe_after_fatal,
               "after a fatal failure, make one more all-reduce and report its result (it must fail the same way)");
  app.add_flag("--rejoin-after-kick", rejoin_after_kick,
               "the first time this peer is kicked, destroy the communicator and join again as a newcomer");
  app.add_flag("--shared-memory", shared_memory, "ring bytes through shared memory (default: all on TCP)");
  app.add_option("--io-threads", io_threads);
  uint16_t p2p_port = 0;
  app.add_option("--p2p-port", p2p_port, "listen for ring links on this port (default: any free one)");
  uint16_t advertised_port = 0;
  app.add_option("--advertised-port", advertised_port, "the port neighbours are told to dial (a proxy's)");
  std::optional<uint32_t> reconnect_ms;
  app.add_option("--master-reconnect-ms", reconnect_ms, "master_reconnect_timeout_ms (default: the library's)");
  app.add_option("--fd-limit", fd_limit, "set RLIMIT_NOFILE (soft and hard) to this first, so the library cannot raise it");
  app.add_option("--starve-fds-on-admit", starve_fds_ms,
                 "with --admit: before the first admission's update_topology, fill the descriptor table for this many ms");
  CLI11_PARSE(app, argc, argv);
  if (fd_limit > 0) {
    rlimit limit{fd_limit, fd_limit};
    if (::setrlimit(RLIMIT_NOFILE, &limit) != 0) {
      std::perror("setrlimit");
      return 2;
    }
  }

  ferry_comm_params params;
  ferry_comm_params_init(&params);
  params.master_address = master.c_str();
  params.p2p_listen_host = "127.0.0.1";
  params.p2p_connections = connections;
  params.heartbeat_timeout_ms = heartbeat_ms;
  params.progress_timeout_ms = progress_ms;
  params.timeout_ms = timeout_ms;
  params.shared_memory = shared_memory ? 1 : 0;
  params.io_threads = io_threads;
  params.p2p_port_min = params.p2p_port_max = p2p_port;
  params.advertised_port = advertised_port;
  if (reconnect_ms) params.master_reconnect_timeout_ms = *reconnect_ms;
  ferry_comm* comm = nullptr;
  // Joins and waits for the group; false (said on stderr) when that fails.
  auto join = [&] {
    comm = nullptr;
    if (ferry_comm_create(&params, &comm) != FERRY_OK || ferry_connect(comm) != FERRY_OK) {
      std::fprintf(stderr, "join failed: %s\n", ferry_last_error());
      return false;
    }
    while (attr(comm, FERRY_ATTR_GROUP_WORLD_SIZE) < peers) {
      if (ferry_update_topology(comm) != FERRY_OK) {
        std::fprintf(stderr, "update_topology failed: %s\n", ferry_last_error());
        return false;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    }
    return true;
  };
  if (!join()) return 2;
  // Asked for shared memory on one host: a ring that fell back to TCP would test the wrong thing.
  if (shared_memory && attr(comm, FERRY_ATTR_SHARED_MEMORY_LANES) != 2 * static_cast<int64_t>(connections)) {
    std::fprintf(stderr, "shared memory requested, but %lld of %u lanes use it\n",
                 static_cast<long long>(attr(comm, FERRY_ATTR_SHARED_MEMORY_LANES)), 2 * connections);
    return 2;
  }
  std::printf("ready rank=%lld world=%lld\n", static_cast<long long>(attr(comm, FERRY_ATTR_RANK)),
              static_cast<long long>(attr(comm, FERRY_ATTR_GROUP_WORLD_SIZE)));
  std::fflush(stdout);
  if (mode == "sync") return sync_once(comm, shared_mib, revision);

  std::vector<float> data(floats);
  ferry_allreduce_desc desc;
  ferry_allreduce_desc_init(&desc);
  std::optional<FdHog> hog;
  bool newcomer = true;
  for (int round = 0; round < rounds; ++round) {
    // Not right after joining: a newcomer's ferry_connect was the others' update_topology
    // of its admission, whose next call is the all-reduce (the master fails calls out of order).
    if (admit && !std::exchange(newcomer, false)) {
      uint32_t pending = 0;
      if (ferry_peers_pending(comm, &pending) == FERRY_OK && pending > 0) {
        if (starve_fds_ms > 0 && !hog) hog.emplace(starve_fds_ms);
        ferry_update_topology(comm);
      }
    }
    std::fill(data.begin(), data.end(), 1.0f);
    ferry_op_info info{};
    info.struct_size = sizeof info;
    ferry_result r;
    if (mode == "retry") {
      std::vector<ferry_allreduce_job> jobs(4);
      size_t quarter = floats / 4;
      for (size_t j = 0; j < jobs.size(); ++j) {
        ferry_allreduce_job_init(&jobs[j]);
        jobs[j].send = jobs[j].recv = data.data() + j * quarter;
        jobs[j].count = j + 1 < jobs.size() ? quarter : floats - 3 * quarter;
      }
      r = ferry_allreduce_multiple_with_retry(comm, jobs.data(), jobs.size(), 2, &info);
    } else {
      r = ferry_allreduce(comm, data.data(), data.data(), floats, &desc, &info);
    }
    bool uniform = true;
    for (float v : data) uniform &= v == data[0];
    std::printf("op round=%d result=%d world=%u value=%g uniform=%d t=%.6f\n", round, static_cast<int>(r),
                info.world_size, static_cast<double>(data[0]), uniform ? 1 : 0, monotonic_s());
    std::fflush(stdout);
    if (r == FERRY_OK) continue;
    // The first kick, with --rejoin-after-kick: said, then a newcomer again (from an op or a vote).
    auto rejoined = [&](ferry_result fatal) {
      if (fatal != FERRY_ERR_KICKED || !rejoin_after_kick) return false;
      rejoin_after_kick = false;
      std::fprintf(stderr, "round %d: %s: %s\n", round, ferry_strerror(fatal), ferry_last_error());
      ferry_comm_destroy(comm);
      if (!join()) std::exit(2);
      std::printf("rejoined result=%d t=%.6f\n", static_cast<int>(fatal), monotonic_s());
      std::fflush(stdout);
      newcomer = true;
      return true;
    };
    if (rejoined(r)) continue;
    if (!ferry_result_is_retryable(r)) {
      std::fprintf(stderr, "round %d: %s: %s\n", round, ferry_strerror(r), ferry_last_error());
      if (probe_after_fatal) {
        ferry_result next = ferry_allreduce(comm, data.data(), data.data(), floats, &desc, nullptr);
        std::printf("next result=%d t=%.6f\n", static_cast<int>(next), monotonic_s());
        std::fflush(stdout);
      }
      ferry_comm_destroy(comm);
      return 3;
    }
    for (ferry_result u; (u = ferry_update_topology(comm)) != FERRY_OK;)
      if (rejoined(u)) {
        break;
      } else if (!ferry_result_is_retryable(u)) {
        std::fprintf(stderr, "update_topology: %s: %s\n", ferry_strerror(u), ferry_last_error());
        ferry_comm_destroy(comm);
        return 3;
      }
  }
  std::printf("done\n");
  std::fflush(stdout);
  ferry_comm_destroy(comm);
  return 0;
}
