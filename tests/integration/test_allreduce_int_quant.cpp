// The integer-domain modes through the engine (i8h, i4h, i8h-sr, i4h-sr):
// bit-identical on every peer; with round-to-nearest the same bytes whatever
// the ring order, connection count and chunk size; within ferry.h's error
// bound of an f64 reference; NaN blocks stay NaN. (Bytes, refusals and a mode
// that differs between peers: test_allreduce_quant.cpp.)
#include <catch2/catch.hpp>

#include <cmath>
#include <condition_variable>
#include <cstring>
#include <mutex>

#include "core/hash.h"
#include "float_inputs.h"
#include "harness.h"
#include "sanitized_build.h"

using namespace ferry::test;

namespace {

constexpr ferry_quant kIntModes[] = {FERRY_QUANT_I8H, FERRY_QUANT_I4H, FERRY_QUANT_I8H_SR, FERRY_QUANT_I4H_SR};

bool stochastic(ferry_quant q) { return q == FERRY_QUANT_I8H_SR || q == FERRY_QUANT_I4H_SR; }
double levels(ferry_quant q) { return q == FERRY_QUANT_I8H || q == FERRY_QUANT_I8H_SR ? 127.0 : 7.0; }

struct Case {
  ferry_dtype dtype;
  ferry_reduce_op op;
  ferry_quant quant;
  size_t count;
};

std::vector<Case> every_case() {
  std::vector<Case> cases;
  for (ferry_quant q : kIntModes)
    for (ferry_dtype t : {FERRY_F32, FERRY_F64, FERRY_F16, FERRY_BF16})
      for (ferry_reduce_op op : {FERRY_OP_SUM, FERRY_OP_AVG})
        for (size_t count : {size_t{1}, size_t{257}, size_t{10007}})  // tails, a block and a bit, primes
          cases.push_back({t, op, q, count});
  return cases;
}

// One run of every case: input k goes to the peer that joined k-th in
// `join_order` (a permutation of 0..peers-1), so the ring order differs
// between orders while each input stays the same. Returns, per input index,
// the hashes of every case's result, and each input index's ring position.
struct RunResult {
  std::vector<std::vector<uint64_t>> hashes;  // [input index][case]
  std::vector<size_t> rank_of_input;
  std::string failures;
};

RunResult run_cases(const std::vector<Case>& cases, const std::vector<size_t>& join_order, uint32_t connections,
                    uint32_t max_chunk_bytes) {
  const size_t peers = join_order.size();
  EmbeddedMaster master;
  RunResult out;
  out.hashes.assign(peers, std::vector<uint64_t>(cases.size()));
  out.rank_of_input.assign(peers, 0);
  std::mutex mu;
  std::condition_variable turn_cv;
  size_t turn = 0;
  auto results = run_peers(peers, [&](size_t thread) {
    const size_t input = join_order[thread];
    PeerSettings settings;
    settings.connections = connections;
    settings.max_chunk_bytes = max_chunk_bytes;
    ferry_comm* comm = create_peer(master.address(), settings);
    {
      // Join one after another in the given order.
      std::unique_lock lock(mu);
      turn_cv.wait(lock, [&] { return turn == thread; });
      must(ferry_connect(comm), "ferry_connect");
      ++turn;
      turn_cv.notify_all();
    }
    wait_for_group(comm, static_cast<int64_t>(peers));
    out.rank_of_input[input] = static_cast<size_t>(attribute(comm, FERRY_ATTR_RANK));
    for (size_t c = 0; c < cases.size(); ++c) {
      const Case& k = cases[c];
      auto data = normal_input(k.dtype, k.count, input, c);
      auto desc = allreduce_desc(k.dtype, k.op, k.quant, c);
      must(ferry_allreduce(comm, data.data(), data.data(), k.count, &desc, nullptr), "ferry_allreduce");
      out.hashes[input][c] = ferry::hash_bytes(data.data(), data.size());
    }
    ferry_comm_destroy(comm);
  });
  out.failures = failures(results);
  return out;
}

}  // namespace

TEST_CASE("int quant: every float dtype x sum/avg x mode is bit-identical on 2..5 peers, over TCP, TLS and shared memory",
          "[allreduce][int_quant][tls][shm]") {
  // Other wires than plain TCP: one world size is enough.
  const auto [wire, peers] = GENERATE(table<Wire, size_t>(
      {{Wire::plain, 2}, {Wire::plain, 3}, {Wire::plain, 5}, {Wire::tls, 3}, {Wire::shm, 3}}));
  CAPTURE(wire_name(wire), peers);
  WireScope scope(wire);
  const auto cases = every_case();
  std::vector<size_t> order(peers);
  for (size_t i = 0; i < peers; ++i) order[i] = i;
  RunResult run = run_cases(cases, order, 3, 4096);
  REQUIRE(run.failures == "");
  for (size_t p = 1; p < peers; ++p) CHECK(run.hashes[p] == run.hashes[0]);
}

TEST_CASE("int quant: round-to-nearest gives the same bytes whatever the ring order, connections and chunk size",
          "[allreduce][int_quant][ring]") {
  const size_t peers = 4;
  std::vector<Case> cases;
  for (const Case& k : every_case())
    if (!stochastic(k.quant) && k.dtype != FERRY_BF16) cases.push_back(k);
  struct Config {
    std::vector<size_t> join_order;
    uint32_t connections;
    uint32_t max_chunk_bytes;
  };
  const std::vector<Config> configs = {
      {{0, 1, 2, 3}, 1, 1 << 20}, {{3, 2, 1, 0}, 3, 4096}, {{2, 0, 3, 1}, 2, 8192}, {{1, 3, 0, 2}, 4, 1 << 16}};
  std::vector<uint64_t> first;
  std::vector<std::vector<size_t>> ranks;
  for (const Config& config : configs) {
    RunResult run = run_cases(cases, config.join_order, config.connections, config.max_chunk_bytes);
    REQUIRE(run.failures == "");
    for (size_t p = 1; p < peers; ++p) REQUIRE(run.hashes[p] == run.hashes[0]);
    if (first.empty()) first = run.hashes[0];
    CHECK(run.hashes[0] == first);
    ranks.push_back(run.rank_of_input);
  }
  // The orders really differed: otherwise the comparison above proves nothing about them.
  CHECK(ranks[0] != ranks[1]);
  CHECK(ranks[1] != ranks[2]);
}

TEST_CASE("int quant: the error stays within ferry.h's bound of an f64 reference, N = 2..8 and 16",
          "[allreduce][int_quant][accuracy]") {
  const size_t peers = GENERATE(from_range(ferry::test::swept_world_sizes({2, 3, 4, 5, 6, 7, 8, 16})));
  const std::vector<ferry_quant> quants{FERRY_QUANT_I8H, FERRY_QUANT_I8H_SR, FERRY_QUANT_I4H, FERRY_QUANT_I4H_SR};
  const size_t count = 65536, block = 256;
  const auto run = quantized_sums(peers, quants, count, 1);
  const auto& inputs = run.inputs;
  for (size_t q = 0; q < quants.size(); ++q) {
    const ferry_quant quant = quants[q];
    const auto& outputs = run.outputs[q];
    CAPTURE(peers, ferry_quant_name(quant));
    // ferry.h: |y - sum| <= N * s * (1/2 + 2^-14) + 2^-23 |y| (stochastic: 1 for 1/2), s = A / L
    // and A the largest |x| of the block over every peer; blocks are aligned to the tensor.
    const double n = static_cast<double>(peers), half = stochastic(quant) ? 1.0 : 0.5;
    double max_err = 0, sum_sq = 0, worst_ratio = 0;
    for (size_t b = 0; b < count / block; ++b) {
      double a = 0;
      for (size_t r = 0; r < peers; ++r)
        for (size_t i = b * block; i < (b + 1) * block; ++i) a = std::max(a, std::fabs(static_cast<double>(inputs[r][i])));
      const double s = a / levels(quant);
      for (size_t i = b * block; i < (b + 1) * block; ++i) {
        double want = 0;
        for (size_t r = 0; r < peers; ++r) want += inputs[r][i];
        const double y = outputs[0][i];
        const double bound = n * s * (half + 0x1p-14) + 0x1p-23 * std::fabs(y);
        const double err = std::fabs(y - want);
        max_err = std::max(max_err, err);
        sum_sq += err * err;
        worst_ratio = std::max(worst_ratio, err / bound);
      }
    }
    WARN("N=" << peers << " quant=" << ferry_quant_name(quant) << ": max error " << max_err << ", RMS "
              << std::sqrt(sum_sq / count) << ", worst error / bound " << worst_ratio);
    CHECK(worst_ratio <= 1.0);
    for (size_t r = 1; r < peers; ++r) CHECK(outputs[r] == outputs[0]);
  }
}

TEST_CASE("int quant: a NaN or an infinity makes its block NaN on every peer, zeros stay zero", "[allreduce][int_quant]") {
  const ferry_quant quant = GENERATE(FERRY_QUANT_I8H, FERRY_QUANT_I4H_SR);
  EmbeddedMaster master;
  std::vector<std::vector<float>> out(3);
  auto results = run_peers(3, [&](size_t) {
    ferry_comm* comm = create_peer(master.address());
    grow_group(comm, 3);
    size_t rank = static_cast<size_t>(attribute(comm, FERRY_ATTR_RANK));
    std::vector<float> v(4096, 0.0f);
    for (size_t i = 0; i < 512; ++i) v[i] = 1.0f;  // blocks 0 and 1: codes L, decoded as 3L * fl(1/L)
    if (rank == 1) v[1000] = NAN;                 // block [768, 1024)
    if (rank == 2) v[2000] = -INFINITY;           // block [1792, 2048)
    auto desc = allreduce_desc(FERRY_F32, FERRY_OP_SUM, quant);
    must(ferry_allreduce(comm, v.data(), v.data(), v.size(), &desc, nullptr), "allreduce");
    out[rank] = v;
    ferry_comm_destroy(comm);
  });
  REQUIRE(failures(results) == "");
  for (size_t r = 0; r < 3; ++r) {
    CHECK(std::fabs(out[r][0] - 3.0f) <= 0x1p-21f);  // within the rounding of fl(1/L) and the product
    CHECK(out[r][511] == out[r][0]);
    CHECK(std::isnan(out[r][768]));
    CHECK(std::isnan(out[r][1023]));
    CHECK(std::isnan(out[r][1792]));
    CHECK(out[r][1024] == 0.0f);
    CHECK(out[r][4095] == 0.0f);
    CHECK(std::memcmp(out[r].data(), out[0].data(), out[0].size() * sizeof(float)) == 0);
  }
}
