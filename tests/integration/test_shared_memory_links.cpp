// Same-host ring links through the C API: each link chooses shared memory on
// its own (both ends must want it), beside TLS too, a local process that tries
// to truncate the rings mid-run kills nobody, and whatever carries the
// bytes the results are exact and the same on every peer. (Every wire's
// correctness matrix, a SIGKILLed neighbour and the ring itself are covered
// by test_allreduce_*, test_process_failures and test_net_shm_ring.)
#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "core/hash.h"
#include "harness.h"
#include "shm_ring_files.h"

using namespace ferry::test;

namespace {

struct PeerOutcome {
  int64_t rank = -1;
  int64_t shm_lanes = -1;
  uint64_t hash = 0;
  std::string wrong;
};

// `peers` peers sum a ramp scaled by their rank; want[i] = sum over ranks.
std::vector<PeerOutcome> sum_over(const std::string& master, size_t peers, const std::vector<PeerSettings>& settings) {
  const size_t count = 300007;  // not a multiple of anything
  std::vector<PeerOutcome> out(peers);
  auto results = run_peers(peers, [&](size_t i) {
    ferry_comm* comm = create_peer(master, settings[i]);
    grow_group(comm, static_cast<int64_t>(peers));
    PeerOutcome& o = out[i];
    o.rank = attribute(comm, FERRY_ATTR_RANK);
    o.shm_lanes = attribute(comm, FERRY_ATTR_SHARED_MEMORY_LANES);
    std::vector<float> data(count);
    for (size_t e = 0; e < count; ++e) data[e] = static_cast<float>(e % 1000) * static_cast<float>(o.rank + 1);
    ferry_allreduce_desc desc;
    ferry_allreduce_desc_init(&desc);
    must(ferry_allreduce(comm, data.data(), data.data(), count, &desc, nullptr), "ferry_allreduce");
    const float factor = static_cast<float>(peers * (peers + 1) / 2);
    for (size_t e = 0; e < count && o.wrong.empty(); ++e)
      if (data[e] != static_cast<float>(e % 1000) * factor) o.wrong = "element " + std::to_string(e);
    o.hash = ferry::hash_bytes(data.data(), count * sizeof(float));
    ferry_comm_destroy(comm);
  });
  REQUIRE(failures(results) == "");
  return out;
}

}  // namespace

TEST_CASE("shared memory: a link uses it only when both its ends want it", "[shm]") {
  EmbeddedMaster master;
  const size_t peers = 3;
  const uint32_t connections = 3;
  std::vector<PeerSettings> settings(peers);
  for (auto& s : settings) {
    s.connections = connections;
    s.max_chunk_bytes = 16384;
    s.shared_memory = 1;
  }
  settings[1].shared_memory = 0;  // the odd one out: both its links stay on TCP
  auto out = sum_over(master.address(), peers, settings);
  // Ring order is the master's: find where the peer without shared memory sits.
  int64_t off_rank = out[1].rank;
  for (const PeerOutcome& o : out) {
    INFO("rank " << o.rank);
    CHECK(o.wrong == "");
    CHECK(o.hash == out[0].hash);
    if (o.rank == off_rank) {
      CHECK(o.shm_lanes == 0);
    } else {
      // Its link with the other willing peer is shared memory; its link with the unwilling one is not.
      CHECK(o.shm_lanes == connections);
    }
  }
}

TEST_CASE("shared memory: TLS peers on one host carry ring bytes in shared memory beside their TLS links",
          "[shm][tls]") {
  WireScope scope(Wire::tls);
  EmbeddedMaster master;
  const size_t peers = 3;
  std::vector<PeerSettings> settings(peers);
  for (auto& s : settings) s.shared_memory = 1;
  auto out = sum_over(master.address(), peers, settings);
  for (const PeerOutcome& o : out) {
    CHECK(o.wrong == "");
    CHECK(o.hash == out[0].hash);
    CHECK(o.shm_lanes == 2 * static_cast<int64_t>(settings[0].connections));
  }
}

namespace {

// Another process opens each file and shrinks it to nothing; how many it shrank.
int truncate_from_another_process(const std::vector<std::string>& files) {
  pid_t child = ::fork();
  if (child < 0) return -1;
  if (child == 0) {  // only system calls after fork: the parent has threads
    int shrunk = 0;
    for (const auto& path : files) {
      int fd = ::open(path.c_str(), O_RDWR);
      if (fd < 0) continue;
      if (::ftruncate(fd, 0) == 0) ++shrunk;
      ::close(fd);
    }
    ::_exit(std::min(shrunk, 100));
  }
  int status = 0;
  if (::waitpid(child, &status, 0) != child || !WIFEXITED(status)) return -1;
  return WEXITSTATUS(status);
}

}  // namespace

TEST_CASE(
    "shared memory: a local process that tries to truncate the rings mid-run kills no peer, and results stay exact",
    "[shm]") {
  EmbeddedMaster master;
  const size_t peers = 2, count = 100003, rounds = 6, attack_after = 2;
  PeerSettings settings;
  settings.shared_memory = 1;
  std::atomic<size_t> finished_round{0};
  std::atomic<bool> attacked{false};
  std::vector<std::string> files;
  int shrunk = -2;
  // The attack waits for the rings to carry traffic; the peers wait for the
  // attack before going on, so the next collectives run over the attacked rings.
  std::thread attacker([&] {
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
    while (finished_round.load() < attack_after * peers && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
    files = shm_ring_files(::getpid());
    shrunk = truncate_from_another_process(files);
    attacked = true;
  });
  std::vector<std::string> wrong(peers);
  std::vector<int64_t> shm_lanes(peers, -1);
  auto results = run_peers(peers, [&](size_t i) {
    ferry_comm* comm = create_peer(master.address(), settings);
    grow_group(comm, static_cast<int64_t>(peers));
    const int64_t rank = attribute(comm, FERRY_ATTR_RANK);
    std::vector<float> data(count);
    for (size_t round = 0; round < rounds; ++round) {
      if (round == attack_after) {
        auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
        while (!attacked.load() && std::chrono::steady_clock::now() < deadline)
          std::this_thread::sleep_for(std::chrono::milliseconds(5));
      }
      for (size_t e = 0; e < count; ++e)
        data[e] = static_cast<float>((e + round) % 1000) * static_cast<float>(rank + 1);
      ferry_allreduce_desc desc;
      ferry_allreduce_desc_init(&desc);
      must(ferry_allreduce(comm, data.data(), data.data(), count, &desc, nullptr), "ferry_allreduce");
      for (size_t e = 0; e < count && wrong[i].empty(); ++e)
        if (data[e] != static_cast<float>((e + round) % 1000) * 3.0f)
          wrong[i] = "round " + std::to_string(round) + " element " + std::to_string(e);
      ++finished_round;
    }
    shm_lanes[i] = attribute(comm, FERRY_ATTR_SHARED_MEMORY_LANES);
    ferry_comm_destroy(comm);
  });
  attacker.join();
  REQUIRE(failures(results) == "");
  // As root the mappings are always reachable; otherwise the descriptors are
  // closed once each ring is up and nothing may be left to find.
  INFO(files.size() << " ring files reachable");
  if (::geteuid() == 0) CHECK_FALSE(files.empty());
  CHECK(shrunk == 0);  // sealed: not one could be shrunk
  for (size_t i = 0; i < peers; ++i) {
    CHECK(wrong[i] == "");
    CHECK(shm_lanes[i] == 2 * static_cast<int64_t>(settings.connections));  // still on shared memory
  }
}
