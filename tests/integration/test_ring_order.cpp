// Ring order through the C API: ferry_optimize_topology re-measures every
// pair (the probes' own connections), every peer sees the same ring, and an
// all-reduce over whatever order it chose is bit-identical everywhere.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cstring>
#include <future>
#include <vector>

#include "harness.h"

using namespace ferry::test;

TEST_CASE("ring choice: ferry_optimize_topology re-measures every pair, and the ring it keeps is the same everywhere",
          "[ring]") {
  WireScope scope(Wire::plain);
  EmbeddedMaster master;
  const size_t peers = 4;
  struct View {
    std::vector<uint64_t> ring = std::vector<uint64_t>(peers);
    std::vector<ferry_link_info> links = std::vector<ferry_link_info>(16);
    size_t link_count = 0;
    std::vector<double> result;
  };
  std::vector<View> views(peers);
  auto results = run_peers(peers, [&](size_t i) {
    ferry_comm* comm = create_peer(master.address());
    grow_group(comm, static_cast<int64_t>(peers));
    must(ferry_optimize_topology(comm), "ferry_optimize_topology");
    View& v = views[i];
    size_t count = 0;
    must(ferry_comm_ring(comm, v.ring.data(), v.ring.size(), &count), "ferry_comm_ring");
    for (auto& l : v.links) l.struct_size = sizeof l;
    must(ferry_comm_link_matrix(comm, v.links.data(), v.links.size(), &v.link_count), "ferry_comm_link_matrix");
    // Values whose sum depends on the order of additions: the same bits everywhere or a test failure.
    std::vector<double> data(1 << 16);
    for (size_t k = 0; k < data.size(); ++k) data[k] = 1.0 / static_cast<double>(k + 1 + 7 * i) + 1e-17 * static_cast<double>(i);
    ferry_allreduce_desc desc = allreduce_desc(FERRY_F64, FERRY_OP_SUM);
    must(ferry_allreduce(comm, data.data(), data.data(), data.size(), &desc, nullptr), "ferry_allreduce");
    v.result = data;
    ferry_comm_destroy(comm);
  });
  REQUIRE(failures(results) == "");
  for (const View& v : views) {
    CHECK(v.ring == views[0].ring);
    CHECK(std::memcmp(v.result.data(), views[0].result.data(), v.result.size() * sizeof(double)) == 0);
    // Every ordered pair measured afresh, by probes (no collective ran yet): 8 connections each.
    REQUIRE(v.link_count == peers * (peers - 1));
    for (size_t k = 0; k < v.link_count; ++k) {
      CHECK(v.links[k].connections == 8u);
      CHECK(v.links[k].goodput_bytes_per_s > 0);
      CHECK(v.links[k].age_s < 30);
    }
  }
}

TEST_CASE("ring choice: ferry_optimize_topology refuses a NULL communicator and one not connected", "[ring][misuse]") {
  EmbeddedMaster master;
  CHECK(ferry_optimize_topology(nullptr) == FERRY_ERR_INVALID_ARGUMENT);
  ferry_comm* comm = create_peer(master.address());
  CHECK(ferry_optimize_topology(comm) == FERRY_ERR_INVALID_USAGE);
  ferry_comm_destroy(comm);
}

// Churn after the ring was ordered by its links: the member at rank 2 leaves
// and a newcomer arrives at once. Every peer must end on the same ring, and
// an order-sensitive f64 sum must be the same bits everywhere.
TEST_CASE("ring choice: a member leaves and a newcomer arrives after a reorder: one view, results bit-identical",
          "[ring][churn]") {
  WireScope scope(Wire::plain);
  EmbeddedMaster master;
  const size_t first = 5, peers = 6;  // index 5 is the newcomer
  std::promise<void> left;
  auto left_future = left.get_future().share();
  std::vector<std::vector<uint64_t>> rings(peers);
  std::vector<std::vector<double>> results(peers);
  std::vector<int> stayed(peers, 1);  // not vector<bool>: peers write their own entries at once
  auto outcome = run_peers(peers, [&](size_t i) {
    ferry_comm* comm = create_peer(master.address());
    if (i == first) {
      left_future.wait();
      must(ferry_connect(comm), "ferry_connect (newcomer)");  // admitted by the survivors' votes
    } else {
      grow_group(comm, static_cast<int64_t>(first));
      must(ferry_optimize_topology(comm), "ferry_optimize_topology");
      if (attribute(comm, FERRY_ATTR_RANK) == 2) {
        stayed[i] = 0;
        ferry_comm_destroy(comm);
        left.set_value();
        return;
      }
      left_future.wait();
      // The ring lost a member: vote it out (the newcomer may or may not be in yet).
      must(ferry_update_topology(comm), "ferry_update_topology");
    }
    wait_for_group(comm, static_cast<int64_t>(first));  // 4 survivors and the newcomer
    rings[i].resize(first);
    size_t count = 0;
    must(ferry_comm_ring(comm, rings[i].data(), rings[i].size(), &count), "ferry_comm_ring");
    rings[i].resize(count);
    std::vector<double> data(1 << 15);
    for (size_t k = 0; k < data.size(); ++k) data[k] = 1.0 / static_cast<double>(k + 1 + 11 * i) + 1e-17 * static_cast<double>(i);
    ferry_allreduce_desc desc = allreduce_desc(FERRY_F64, FERRY_OP_SUM);
    must(ferry_allreduce(comm, data.data(), data.data(), data.size(), &desc, nullptr), "ferry_allreduce");
    results[i] = std::move(data);
    ferry_comm_destroy(comm);
  });
  REQUIRE(failures(outcome) == "");
  REQUIRE(std::count(stayed.begin(), stayed.end(), 0) == 1);
  const size_t ref = stayed[0] ? 0 : 1;
  for (size_t i = 0; i < peers; ++i) {
    if (!stayed[i]) continue;
    INFO("peer " << i);
    CHECK(rings[i].size() == first);
    CHECK(rings[i] == rings[ref]);
    REQUIRE(results[i].size() == results[ref].size());
    CHECK(std::memcmp(results[i].data(), results[ref].data(), results[i].size() * sizeof(double)) == 0);
  }
}
