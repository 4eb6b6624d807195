// Concurrent and asynchronous all-reduces: many in flight with random sizes,
// waited in random order; tag mismatches; every connection count and chunk
// size; results exact and bit-identical across peers.
#include <catch2/catch.hpp>

#include <algorithm>
#include <latch>
#include <random>

#include "core/hash.h"
#include "harness.h"

using namespace ferry::test;

namespace {

// Values whose f32 sums are exact: the check is equality, not tolerance.
float value(size_t rank, size_t op, size_t i) { return static_cast<float>((rank * 7 + op * 3 + i) % 64); }

ferry_allreduce_desc sum_desc(uint64_t tag) {
  ferry_allreduce_desc d;
  ferry_allreduce_desc_init(&d);
  d.tag = tag;
  return d;
}

}  // namespace

TEST_CASE("async: many concurrent tagged all-reduces of random sizes, waited in random order",
          "[allreduce][async][tls]") {
  const Wire wire = GENERATE(Wire::plain, Wire::tls, Wire::shm);
  const size_t peers = GENERATE(2, 3, 4);
  const size_t ops = 12;
  CAPTURE(wire_name(wire), peers);
  WireScope scope(wire);
  EmbeddedMaster master;
  std::mt19937 shared_rng(1234);  // the sizes all peers agree on
  std::vector<size_t> sizes(ops);
  for (auto& s : sizes) s = std::uniform_int_distribution<size_t>(0, 300000)(shared_rng);
  std::vector<std::vector<uint64_t>> hashes(peers, std::vector<uint64_t>(ops));
  std::vector<std::string> wrong(peers);
  std::latch checked(static_cast<std::ptrdiff_t>(peers));

  auto results = run_peers(peers, [&](size_t who) {
    PeerSettings settings;
    settings.connections = 4;
    settings.io_threads = 2;
    settings.max_chunk_bytes = 64 * 1024;
    ferry_comm* comm = create_peer(master.address(), settings);
    grow_group(comm, static_cast<int64_t>(peers));
    size_t rank = static_cast<size_t>(attribute(comm, FERRY_ATTR_RANK));
    std::vector<std::vector<float>> buffers(ops);
    std::vector<ferry_op*> handles(ops, nullptr);
    for (size_t k = 0; k < ops; ++k) {
      buffers[k].resize(sizes[k]);
      for (size_t i = 0; i < sizes[k]; ++i) buffers[k][i] = value(rank, k, i);
      // The last op cannot finish before rank 0 has checked below: the others issue it only after.
      if (k == ops - 1 && rank != 0) checked.arrive_and_wait();
      auto desc = sum_desc(100 + k);
      must(ferry_allreduce_async(comm, buffers[k].data(), buffers[k].data(), sizes[k], &desc, &handles[k]),
           "ferry_allreduce_async");
    }
    if (rank == 0) {
      // While they run, the communicator refuses to change the ring under them.
      if (ferry_update_topology(comm) != FERRY_ERR_INVALID_USAGE) wrong[who] += "update_topology was not refused\n";
      checked.arrive_and_wait();
    }
    std::vector<size_t> order(ops);
    for (size_t k = 0; k < ops; ++k) order[k] = k;
    std::shuffle(order.begin(), order.end(), std::mt19937(static_cast<unsigned>(who)));
    for (size_t k : order) {
      ferry_op_info info{};
      info.struct_size = sizeof info;
      must(ferry_op_wait(handles[k], &info), "ferry_op_wait");
      if (info.world_size != peers) wrong[who] += "op " + std::to_string(k) + ": world size\n";
      for (size_t i = 0; i < sizes[k]; ++i) {
        float want = 0;
        for (size_t r = 0; r < peers; ++r) want += value(r, k, i);
        if (buffers[k][i] != want) {
          wrong[who] += "op " + std::to_string(k) + " element " + std::to_string(i) + "\n";
          break;
        }
      }
      hashes[who][k] = ferry::hash_bytes(buffers[k].data(), buffers[k].size() * sizeof(float));
    }
    ferry_comm_destroy(comm);
  });
  REQUIRE(failures(results) == "");
  for (auto& w : wrong) CHECK(w == "");
  for (size_t r = 1; r < peers; ++r) CHECK(hashes[r] == hashes[0]);
}

TEST_CASE("async: ferry_op_test polls without blocking until the op is done", "[allreduce][async]") {
  EmbeddedMaster master;
  std::vector<int> polls(2, 0);
  auto results = run_peers(2, [&](size_t who) {
    ferry_comm* comm = create_peer(master.address());
    grow_group(comm, 2);
    std::vector<float> data(1 << 20, 1.0f);
    auto desc = sum_desc(7);
    ferry_op* op = nullptr;
    must(ferry_allreduce_async(comm, data.data(), data.data(), data.size(), &desc, &op), "ferry_allreduce_async");
    int done = 0;
    while (!done) {
      must(ferry_op_test(op, &done), "ferry_op_test");
      ++polls[who];
    }
    must(ferry_op_wait(op, nullptr), "ferry_op_wait");
    if (data[12345] != 2.0f) throw std::runtime_error("wrong sum");
    ferry_comm_destroy(comm);
  });
  REQUIRE(failures(results) == "");
  CHECK(polls[0] > 1);  // it did return before the op was done
}

TEST_CASE("async: concurrent ops whose tags disagree fail on every peer, and the next ones work",
          "[allreduce][async][mismatch]") {
  EmbeddedMaster master;
  std::vector<std::vector<ferry_result>> got(3);
  auto results = run_peers(3, [&](size_t) {
    ferry_comm* comm = create_peer(master.address());
    grow_group(comm, 3);
    size_t rank = static_cast<size_t>(attribute(comm, FERRY_ATTR_RANK));
    std::vector<float> a(1000, 1.0f), b(1000, 1.0f), c(1000, 1.0f);
    // Rank 0 issues tag 2 before tag 1; the others tag 1 before tag 2.
    auto first = sum_desc(rank == 0 ? 2 : 1), second = sum_desc(rank == 0 ? 1 : 2), third = sum_desc(3);
    ferry_op *x = nullptr, *y = nullptr, *z = nullptr;
    must(ferry_allreduce_async(comm, a.data(), a.data(), a.size(), &first, &x), "async 1");
    must(ferry_allreduce_async(comm, b.data(), b.data(), b.size(), &second, &y), "async 2");
    must(ferry_allreduce_async(comm, c.data(), c.data(), c.size(), &third, &z), "async 3");
    got[rank] = {ferry_op_wait(y, nullptr), ferry_op_wait(x, nullptr), ferry_op_wait(z, nullptr)};
    if (c[999] != 3.0f) throw std::runtime_error("the matching op after the mismatch is wrong");
    ferry_comm_destroy(comm);
  });
  REQUIRE(failures(results) == "");
  for (auto& g : got) CHECK(g == std::vector<ferry_result>{FERRY_ERR_MISMATCH, FERRY_ERR_MISMATCH, FERRY_OK});
}

TEST_CASE("async: every connection count and chunk size gives the same exact result", "[allreduce][pipeline]") {
  const uint32_t connections = GENERATE(1u, 2u, 4u, 8u);
  const uint32_t chunk = GENERATE(4096u, 12345u, 1u << 20);  // 12345 divides nothing
  const Wire wire = GENERATE(Wire::plain, Wire::shm);
  CAPTURE(connections, chunk, wire_name(wire));
  WireScope scope(wire);
  EmbeddedMaster master;
  const size_t peers = 3, count = 777777;
  std::vector<uint64_t> hashes(peers);
  std::vector<std::string> wrong(peers);
  auto results = run_peers(peers, [&](size_t) {
    PeerSettings settings;
    settings.connections = connections;
    settings.max_chunk_bytes = chunk;
    ferry_comm* comm = create_peer(master.address(), settings);
    grow_group(comm, peers);
    size_t rank = static_cast<size_t>(attribute(comm, FERRY_ATTR_RANK));
    std::vector<float> send(count), recv(count);
    for (size_t i = 0; i < count; ++i) send[i] = value(rank, 0, i);
    auto desc = sum_desc(0);
    ferry_op_info info{};
    info.struct_size = sizeof info;
    must(ferry_allreduce(comm, send.data(), recv.data(), count, &desc, &info), "ferry_allreduce");
    for (size_t i = 0; i < count; ++i)
      if (recv[i] != value(0, 0, i) + value(1, 0, i) + value(2, 0, i)) {
        wrong[rank] = "element " + std::to_string(i);
        break;
      }
    // Ring optimum: 2(N-1)/N of the buffer leaves each peer.
    double optimum = 2.0 * (peers - 1) / peers * count * sizeof(float);
    if (std::abs(static_cast<double>(info.bytes_sent) - optimum) > 0.01 * optimum)
      wrong[rank] += " sent " + std::to_string(info.bytes_sent) + " bytes";
    hashes[rank] = ferry::hash_bytes(recv.data(), count * sizeof(float));
    ferry_comm_destroy(comm);
  });
  REQUIRE(failures(results) == "");
  for (auto& w : wrong) CHECK(w == "");
  CHECK(hashes[1] == hashes[0]);
  CHECK(hashes[2] == hashes[0]);
}
