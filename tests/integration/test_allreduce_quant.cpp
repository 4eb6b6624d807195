// Quantized all-reduce: bit-identical on every peer for every float dtype x op
// x codec x connection count; within a stated error bound of an f64
// reference; NaN blocks stay NaN; fewer bytes on the wire.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <deque>
#include <map>
#include <random>

#include "core/hash.h"
#include "float_inputs.h"
#include "harness.h"
#include "sanitized_build.h"

using namespace ferry::test;

namespace {

// Every wire x world size x connection count, less what adds nothing. TLS: one
// world size is enough. Shared memory is where quantized payloads are decoded
// in place, straight from the ring: both neighbours in one direction (2) and a
// longer ring (3).
std::vector<WireRun> wire_runs() {
  std::vector<WireRun> runs;
  for (Wire wire : {Wire::plain, Wire::tls, Wire::shm})
    for (size_t peers : {2, 3, 5})
      for (uint32_t connections : {1u, 3u})
        if ((wire != Wire::tls || peers == 3) && (wire != Wire::shm || peers != 5))
          runs.push_back({wire, peers, connections});
  return runs;
}

// For each element i, the widest max - min of any peer's input over [i - half, i + half)
// clipped to the tensor: both ends only move forward, so monotone deques give it in O(n).
std::vector<double> widest_window_range(const std::vector<std::vector<float>>& inputs, size_t half) {
  const size_t count = inputs.empty() ? 0 : inputs[0].size();
  std::vector<double> widest(count, 0.0);
  for (const auto& x : inputs) {
    std::deque<size_t> lows, highs;  // indices whose values increase / decrease along the deque
    size_t end = 0;
    for (size_t i = 0; i < count; ++i) {
      for (const size_t hi = std::min(count, i + half); end < hi; ++end) {
        while (!lows.empty() && x[lows.back()] >= x[end]) lows.pop_back();
        while (!highs.empty() && x[highs.back()] <= x[end]) highs.pop_back();
        lows.push_back(end);
        highs.push_back(end);
      }
      const size_t lo = i >= half ? i - half : 0;
      while (lows.front() < lo) lows.pop_front();
      while (highs.front() < lo) highs.pop_front();
      widest[i] = std::max(widest[i], static_cast<double>(x[highs.front()] - x[lows.front()]));
    }
  }
  return widest;
}

}  // namespace

TEST_CASE("quant: every float dtype x op x codec x connection count is bit-identical on 2..5 peers",
          "[allreduce][quant][tls][shm]") {
  const WireRun run = GENERATE(from_range(wire_runs()));
  const Wire wire = run.wire;
  const size_t peers = run.peers;
  const uint32_t connections = run.connections;
  CAPTURE(wire_name(wire), peers, connections);
  WireScope scope(wire);
  struct Case {
    ferry_dtype dtype;
    ferry_reduce_op op;
    ferry_quant quant;
    size_t count;
  };
  std::vector<Case> cases;
  for (ferry_quant q : {FERRY_QUANT_U8, FERRY_QUANT_I8, FERRY_QUANT_U4, FERRY_QUANT_F16, FERRY_QUANT_BF16})
    for (ferry_dtype t : {FERRY_F32, FERRY_F64, FERRY_F16, FERRY_BF16}) {
      bool half_data = t == FERRY_F16 || t == FERRY_BF16;
      if (half_data && (q == FERRY_QUANT_F16 || q == FERRY_QUANT_BF16)) continue;
      for (int op = FERRY_OP_SUM; op <= FERRY_OP_MAX; ++op)
        for (size_t count : {size_t{1}, size_t{257}, size_t{10007}})  // tails, a block and a bit, primes
          cases.push_back({t, static_cast<ferry_reduce_op>(op), q, count});
    }
  EmbeddedMaster master;
  std::vector<std::vector<uint64_t>> hashes(peers, std::vector<uint64_t>(cases.size()));
  std::vector<int64_t> shm_lanes(peers, -1);
  auto results = run_peers(peers, [&](size_t) {
    PeerSettings settings;
    settings.connections = connections;
    settings.max_chunk_bytes = 4096;
    ferry_comm* comm = create_peer(master.address(), settings);
    grow_group(comm, static_cast<int64_t>(peers));
    size_t rank = static_cast<size_t>(attribute(comm, FERRY_ATTR_RANK));
    shm_lanes[rank] = attribute(comm, FERRY_ATTR_SHARED_MEMORY_LANES);
    for (size_t c = 0; c < cases.size(); ++c) {
      const Case& k = cases[c];
      auto data = normal_input(k.dtype, k.count, rank, c);
      if (k.op == FERRY_OP_PROD)  // keep products finite and away from zero
        for (size_t i = 0; i < k.count; ++i)
          write_value(k.dtype, data.data(), i, 1.0 + 0.1 * read_value(k.dtype, data.data(), i));
      auto desc = allreduce_desc(k.dtype, k.op, k.quant, c);
      must(ferry_allreduce(comm, data.data(), data.data(), k.count, &desc, nullptr), "ferry_allreduce");
      hashes[rank][c] = ferry::hash_bytes(data.data(), data.size());
    }
    ferry_comm_destroy(comm);
  });
  REQUIRE(failures(results) == "");
  // Every lane in and out goes through shared memory exactly when asked to.
  const int64_t want_shm_lanes = wire == Wire::shm ? 2 * static_cast<int64_t>(connections) : 0;
  CHECK(shm_lanes == std::vector<int64_t>(peers, want_shm_lanes));
  for (size_t r = 1; r < peers; ++r) CHECK(hashes[r] == hashes[0]);
  // The transport carries bytes, it does not change them: TLS and shared
  // memory give the plain run's bits (GENERATE runs every plain case first).
  static std::map<std::pair<size_t, uint32_t>, std::vector<uint64_t>> plain_hashes;
  if (wire == Wire::plain) {
    plain_hashes[{peers, connections}] = hashes[0];
  } else {
    REQUIRE(plain_hashes.count({peers, connections}) == 1);
    CHECK(hashes[0] == plain_hashes[{peers, connections}]);
  }
}

TEST_CASE("quant: sum error stays within N(N+1)/2 * block range / (2L) of an f64 reference, N = 2..8",
          "[allreduce][quant][accuracy]") {
  // Each of the N encodes a segment goes through (N-1 hops, then the owner's)
  // rounds to half a step of its block's range / L; partial sums of k inputs
  // span at most k input ranges. Summed: N(N+1)/2 * R / (2L), R the widest input
  // range in the block. The test asserts it and prints the measured figures.
  const size_t peers = GENERATE(from_range(swept_world_sizes({2, 3, 4, 5, 6, 7, 8})));
  const std::vector<ferry_quant> quants{FERRY_QUANT_U8, FERRY_QUANT_U4};
  const size_t count = 65536, block = 256;
  const auto run = quantized_sums(peers, quants, count, 2);
  const auto& inputs = run.inputs;
  // Blocks start at every chunk (and so segment) boundary, so measure the
  // range over the element's segment-aligned 256-element window conservatively:
  // the widest input range over a window of 2 blocks around the element,
  // [i - block, i + block) clipped to the tensor.
  const std::vector<double> range = widest_window_range(inputs, block);
  for (size_t q = 0; q < quants.size(); ++q) {
    const ferry_quant quant = quants[q];
    const auto& outputs = run.outputs[q];
    CAPTURE(peers, ferry_quant_name(quant));
    const double levels = quant == FERRY_QUANT_U8 ? 255.0 : 15.0;
    double max_err = 0, sum_sq = 0, worst_ratio = 0;
    double n = static_cast<double>(peers);
    for (size_t i = 0; i < count; ++i) {
      double want = 0;
      for (size_t r = 0; r < peers; ++r) want += inputs[r][i];
      double bound = n * (n + 1) / 2 * range[i] / (2 * levels) * 1.001 + 1e-5;
      double err = std::fabs(outputs[0][i] - want);
      max_err = std::max(max_err, err);
      sum_sq += err * err;
      worst_ratio = std::max(worst_ratio, err / bound);
    }
    WARN("N=" << peers << " quant=" << (quant == FERRY_QUANT_U8 ? "u8" : "u4") << ": max error " << max_err
              << ", RMS " << std::sqrt(sum_sq / count) << ", worst error / bound " << worst_ratio);
    CHECK(worst_ratio <= 1.0);
    for (size_t r = 1; r < peers; ++r) CHECK(outputs[r] == outputs[0]);
  }
}

TEST_CASE("quant: a NaN makes its block NaN on every peer, constant blocks are exact", "[allreduce][quant]") {
  EmbeddedMaster master;
  std::vector<std::vector<float>> out(3);
  auto results = run_peers(3, [&](size_t) {
    ferry_comm* comm = create_peer(master.address());
    grow_group(comm, 3);
    size_t rank = static_cast<size_t>(attribute(comm, FERRY_ATTR_RANK));
    std::vector<float> v(4096, 2.5f);        // constant: exact through u8
    if (rank == 1) v[1000] = NAN;            // one NaN, in the block [768, 1024)
    auto desc = allreduce_desc(FERRY_F32, FERRY_OP_SUM, FERRY_QUANT_U8);
    must(ferry_allreduce(comm, v.data(), v.data(), v.size(), &desc, nullptr), "allreduce");
    out[rank] = v;
    ferry_comm_destroy(comm);
  });
  REQUIRE(failures(results) == "");
  for (size_t r = 0; r < 3; ++r) {
    CHECK(out[r][0] == 7.5f);
    CHECK(out[r][4095] == 7.5f);
    CHECK(std::isnan(out[r][1000]));
    CHECK(std::isnan(out[r][1023]));
    CHECK(std::memcmp(out[r].data(), out[0].data(), out[0].size() * sizeof(float)) == 0);
  }
}

TEST_CASE("quant: bytes on the wire shrink as promised, bad combinations are refused",
          "[allreduce][quant][int_quant]") {
  // 8 peers: the integer-domain modes' widths grow with the group (ferry.h gives their bytes at 8).
  const size_t peers = 8;
  EmbeddedMaster master;
  const size_t count = 1 << 20;
  std::vector<uint64_t> sent(FERRY_QUANT_I4H_SR + 1);
  std::vector<double> agreement(FERRY_QUANT_I4H_SR + 1, -1.0);
  auto results = run_peers(peers, [&](size_t) {
    ferry_comm* comm = create_peer(master.address());
    grow_group(comm, static_cast<int64_t>(peers));
    size_t rank = static_cast<size_t>(attribute(comm, FERRY_ATTR_RANK));
    std::vector<float> v(count, 1.0f);
    for (ferry_quant q : {FERRY_QUANT_NONE, FERRY_QUANT_U8, FERRY_QUANT_U4, FERRY_QUANT_F16, FERRY_QUANT_I8H, FERRY_QUANT_I4H}) {
      auto desc = allreduce_desc(FERRY_F32, FERRY_OP_SUM, q);
      ferry_op_info info{};
      info.struct_size = sizeof info;
      must(ferry_allreduce(comm, v.data(), v.data(), count, &desc, &info), "allreduce");
      if (rank == 0) sent[q] = info.bytes_sent;
      if (rank == 0) agreement[q] = info.quant_agreement_s;
    }
    ferry_comm_destroy(comm);
  });
  REQUIRE(failures(results) == "");
  auto ratio = [&](ferry_quant q) { return static_cast<double>(sent[q]) / static_cast<double>(sent[FERRY_QUANT_NONE]); };
  double raw = static_cast<double>(sent[FERRY_QUANT_NONE]);
  CHECK(raw > 0);
  CHECK(ratio(FERRY_QUANT_U8) <= 0.26);
  CHECK(ratio(FERRY_QUANT_U4) <= 0.135);
  CHECK(ratio(FERRY_QUANT_F16) <= 0.51);
  CHECK(ratio(FERRY_QUANT_I8H) <= 0.345);  // ferry.h: 34.4 %
  CHECK(ratio(FERRY_QUANT_I4H) <= 0.22);   // 21.9 %
  // Only the integer-domain modes agree scales first, and the time it took is reported.
  CHECK(agreement[FERRY_QUANT_NONE] == 0.0);
  CHECK(agreement[FERRY_QUANT_U8] == 0.0);
  CHECK(agreement[FERRY_QUANT_I8H] > 0.0);
  CHECK(agreement[FERRY_QUANT_I4H] > 0.0);
  WARN("bytes against f32 at 8 peers: u8 " << ratio(FERRY_QUANT_U8) << ", u4 " << ratio(FERRY_QUANT_U4) << ", i8h "
                                           << ratio(FERRY_QUANT_I8H) << ", i4h " << ratio(FERRY_QUANT_I4H));

  ferry_comm* comm = create_peer(master.address());
  REQUIRE(ferry_connect(comm) == FERRY_OK);
  std::vector<int32_t> ints(10);
  auto bad = allreduce_desc(FERRY_I32, FERRY_OP_SUM, FERRY_QUANT_U8);
  CHECK(ferry_allreduce(comm, ints.data(), ints.data(), ints.size(), &bad, nullptr) == FERRY_ERR_INVALID_ARGUMENT);
  std::vector<uint16_t> halves(10);
  bad = allreduce_desc(FERRY_BF16, FERRY_OP_SUM, FERRY_QUANT_F16);
  CHECK(ferry_allreduce(comm, halves.data(), halves.data(), 10, &bad, nullptr) == FERRY_ERR_INVALID_ARGUMENT);
  bad = allreduce_desc(FERRY_F32, FERRY_OP_SUM, FERRY_QUANT_U8);
  bad.quant_block = 100000;
  CHECK(ferry_allreduce(comm, ints.data(), ints.data(), 10, &bad, nullptr) == FERRY_ERR_INVALID_ARGUMENT);
  // The integer-domain modes add integers: sum and avg of float data only.
  std::vector<float> floats(10, 1.0f);
  for (ferry_reduce_op op : {FERRY_OP_PROD, FERRY_OP_MIN, FERRY_OP_MAX}) {
    bad = allreduce_desc(FERRY_F32, op, FERRY_QUANT_I8H);
    CHECK(ferry_allreduce(comm, floats.data(), floats.data(), floats.size(), &bad, nullptr) == FERRY_ERR_INVALID_ARGUMENT);
    CHECK(std::string(ferry_last_error()).find("FERRY_OP_SUM") != std::string::npos);
  }
  bad = allreduce_desc(FERRY_I32, FERRY_OP_SUM, FERRY_QUANT_I4H_SR);
  CHECK(ferry_allreduce(comm, ints.data(), ints.data(), ints.size(), &bad, nullptr) == FERRY_ERR_INVALID_ARGUMENT);
  // After refusals the collective numbering is intact: a matching op still works.
  float one = 1.0f;
  auto good = allreduce_desc(FERRY_F32, FERRY_OP_SUM, FERRY_QUANT_U8);
  CHECK(ferry_allreduce(comm, &one, &one, 1, &good, nullptr) == FERRY_OK);
  ferry_comm_destroy(comm);
}

TEST_CASE("quant: peers that disagree on the codec get FERRY_ERR_MISMATCH", "[allreduce][quant][int_quant][mismatch]") {
  // A per-hop pair, and the integer-domain mode against its stochastic twin.
  const auto [quant0, quant1] = GENERATE(std::pair{FERRY_QUANT_U8, FERRY_QUANT_U4},
                                         std::pair{FERRY_QUANT_I8H, FERRY_QUANT_I8H_SR});
  EmbeddedMaster master;
  std::vector<ferry_result> got(2);
  auto results = run_peers(2, [&](size_t) {
    ferry_comm* comm = create_peer(master.address());
    grow_group(comm, 2);
    size_t rank = static_cast<size_t>(attribute(comm, FERRY_ATTR_RANK));
    std::vector<float> v(1000, 1.0f);
    auto desc = allreduce_desc(FERRY_F32, FERRY_OP_SUM, rank == 0 ? quant0 : quant1);
    got[rank] = ferry_allreduce(comm, v.data(), v.data(), v.size(), &desc, nullptr);
    ferry_comm_destroy(comm);
  });
  REQUIRE(failures(results) == "");
  CHECK(got == std::vector<ferry_result>{FERRY_ERR_MISMATCH, FERRY_ERR_MISMATCH});
}
