// The link matrix through the C API: three peers are admitted (every pair is
// probed before the ring commits: link_probe.h), all-reduce over loopback,
// each reports its link to the next peer, and every peer's query returns the
// same matrix (the master's) of every ordered pair, with plausible figures;
// entries then age out.
#include <catch2/catch.hpp>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <thread>
#include <tuple>
#include <vector>

#include "harness.h"

using namespace ferry::test;

namespace {

// Long enough that the probes taken at admission outlive an all-reduce and
// the queries on a loaded sanitizer build (2 s did not: CI saw every entry gone).
constexpr uint32_t kMaxAgeMs = 6000;

struct PeerView {
  std::vector<uint64_t> ring;
  std::vector<ferry_link_info> links;
  std::vector<ferry_link_info> after_max_age;
};

std::vector<ferry_link_info> query(ferry_comm* comm) {
  std::vector<ferry_link_info> links(16);  // more than 3 peers' 6 ordered pairs
  for (auto& l : links) l.struct_size = sizeof l;
  size_t count = 0;
  must(ferry_comm_link_matrix(comm, links.data(), links.size(), &count), "ferry_comm_link_matrix");
  links.resize(std::min(count, links.size()));
  return links;
}

// Everything but the age, which moves on between queries.
auto measured(const ferry_link_info& l) {
  return std::make_tuple(l.from_peer, l.to_peer, l.shared_memory, l.goodput_bytes_per_s, l.delivery_rate_bytes_per_s,
                         l.rtt_ms, l.retransmit_ratio, l.bytes, l.connections);
}

}  // namespace

TEST_CASE("link matrix: every peer reads the master's matrix of every pair (probed at admission, the ring's links measured), until it ages out",
          "[links]") {
  const Wire wire = GENERATE(Wire::plain, Wire::shm);
  WireScope scope(wire);
  INFO(wire_name(wire));
  EmbeddedMaster master(kMaxAgeMs);
  const size_t peers = 3;
  std::vector<PeerView> views(peers);
  std::atomic<size_t> read{0}, aged{0};
  auto wait_all = [&](std::atomic<size_t>& counter) {
    ++counter;
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(20);
    while (counter.load() < peers && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(std::chrono::milliseconds(5));
  };
  auto results = run_peers(peers, [&](size_t i) {
    ferry_comm* comm = create_peer(master.address());
    grow_group(comm, static_cast<int64_t>(peers));
    std::vector<float> data(1 << 20, 1.0f);  // 4 MiB: each peer sends 5.3 MiB, enough for a rate
    ferry_allreduce_desc desc;
    ferry_allreduce_desc_init(&desc);
    must(ferry_allreduce(comm, data.data(), data.data(), data.size(), &desc, nullptr), "ferry_allreduce");
    PeerView& v = views[i];
    // The other peers' reports may still be on their way: until then their
    // ring links show the probes' figures (8 connections, or none over shared memory).
    auto reported = [&] {
      return std::count_if(v.links.begin(), v.links.end(),
                           [](const ferry_link_info& l) { return l.connections == 1 || l.connections == 2; });
    };
    auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    do {
      v.links = query(comm);
    } while ((v.links.size() < peers * (peers - 1) || reported() < static_cast<long>(peers)) &&
             std::chrono::steady_clock::now() < deadline);
    v.ring.resize(peers);
    size_t count = 0;
    must(ferry_comm_ring(comm, v.ring.data(), v.ring.size(), &count), "ferry_comm_ring");
    wait_all(read);  // nobody leaves (which would take its links along) before everyone read
    if (wire == Wire::plain) {  // the master ages entries the same way whatever the wire: once is enough
      std::this_thread::sleep_for(std::chrono::milliseconds(kMaxAgeMs + 500));
      v.after_max_age = query(comm);
      wait_all(aged);
    }
    ferry_comm_destroy(comm);
  });
  REQUIRE(failures(results) == "");
  const auto& ring = views[0].ring;
  auto ring_link = [&](const ferry_link_info& l) {
    for (size_t r = 0; r < peers; ++r)
      if (l.from_peer == ring[r] && l.to_peer == ring[(r + 1) % peers]) return true;
    return false;
  };
  for (const PeerView& v : views) {
    REQUIRE(v.links.size() == peers * (peers - 1));
    if (wire == Wire::plain) CHECK(v.after_max_age.empty());
    for (size_t k = 0; k < v.links.size(); ++k) {
      const ferry_link_info& l = v.links[k];
      INFO("link " << l.from_peer << " -> " << l.to_peer);
      CHECK(measured(l) == measured(views[0].links[k]));
      CHECK(l.age_s >= 0);
      CHECK(l.age_s < kMaxAgeMs / 1e3);
      CHECK(l.shared_memory == (wire == Wire::shm ? 1u : 0u));
      if (ring_link(l)) {  // measured by the all-reduce
        CHECK(l.goodput_bytes_per_s > 0);
        CHECK(l.bytes >= (5u << 20));
        // The harness pins 2 connections; over shared memory one of them writes.
        CHECK(l.connections == (wire == Wire::shm ? 1u : 2u));
      } else if (wire == Wire::plain) {  // probed: the probe's own connections
        CHECK(l.goodput_bytes_per_s > 0);
        CHECK(l.connections == 8u);
      } else {  // a probe to a peer on this host stops at its welcome: shared memory
        CHECK(l.bytes == 0);
      }
      if (wire == Wire::plain) {
        CHECK(l.rtt_ms > 0);
        CHECK(l.delivery_rate_bytes_per_s > 0);
        CHECK(l.retransmit_ratio >= 0);
        CHECK(l.retransmit_ratio <= 1);
      } else {
        CHECK(l.rtt_ms == 0);
      }
    }
  }
  // Every ordered pair, each reported by its sender, in (from, to) order.
  std::vector<std::pair<uint64_t, uint64_t>> want, got;
  for (uint64_t from : ring)
    for (uint64_t to : ring)
      if (from != to) want.push_back({from, to});
  std::sort(want.begin(), want.end());
  for (const auto& l : views[0].links) got.push_back({l.from_peer, l.to_peer});
  CHECK(got == want);
}

TEST_CASE("link matrix: bad arguments are refused before anything is asked", "[links][misuse]") {
  EmbeddedMaster master;
  ferry_comm* comm = create_peer(master.address());
  size_t count = 0;
  CHECK(ferry_comm_link_matrix(nullptr, nullptr, 0, &count) == FERRY_ERR_INVALID_ARGUMENT);
  CHECK(ferry_comm_link_matrix(comm, nullptr, 0, nullptr) == FERRY_ERR_INVALID_ARGUMENT);
  CHECK(ferry_comm_link_matrix(comm, nullptr, 1, &count) == FERRY_ERR_INVALID_ARGUMENT);
  ferry_link_info unset{};
  CHECK(ferry_comm_link_matrix(comm, &unset, 1, &count) == FERRY_ERR_INVALID_ARGUMENT);
  CHECK(ferry_comm_link_matrix(comm, nullptr, 0, &count) == FERRY_ERR_INVALID_USAGE);  // not connected
  ferry_comm_destroy(comm);
}
