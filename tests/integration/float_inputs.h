// Float test data for the quantized all-reduce tests: one element of any
// float ferry_dtype read or written as a double, deterministic N(0, 1)
// inputs, and quantized sums of them over a fresh group.
#pragma once

#include <catch2/catch.hpp>

#include <cstdint>
#include <cstring>
#include <random>
#include <vector>

#include "core/half.h"
#include "ferry/ferry.h"
#include "harness.h"

namespace ferry::test {

inline double read_value(ferry_dtype t, const uint8_t* p, size_t i) {
  switch (t) {
    case FERRY_F16: { uint16_t h; std::memcpy(&h, p + 2 * i, 2); return ferry::f16_to_f32(h); }
    case FERRY_BF16: { uint16_t h; std::memcpy(&h, p + 2 * i, 2); return ferry::bf16_to_f32(h); }
    case FERRY_F32: { float f; std::memcpy(&f, p + 4 * i, 4); return f; }
    default: { double d; std::memcpy(&d, p + 8 * i, 8); return d; }
  }
}

inline void write_value(ferry_dtype t, uint8_t* p, size_t i, double v) {
  switch (t) {
    case FERRY_F16: { uint16_t h = ferry::f32_to_f16(static_cast<float>(v)); std::memcpy(p + 2 * i, &h, 2); return; }
    case FERRY_BF16: { uint16_t h = ferry::f32_to_bf16(static_cast<float>(v)); std::memcpy(p + 2 * i, &h, 2); return; }
    case FERRY_F32: { float f = static_cast<float>(v); std::memcpy(p + 4 * i, &f, 4); return; }
    default: std::memcpy(p + 8 * i, &v, 8); return;
  }
}

// Normal(0, 1) inputs of dtype t, deterministic per (seed, index).
inline std::vector<uint8_t> normal_input(ferry_dtype t, size_t count, size_t index, uint64_t seed) {
  std::mt19937_64 rng(seed * 131 + index);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::vector<uint8_t> out(count * ferry_dtype_size(t));
  for (size_t i = 0; i < count; ++i) write_value(t, out.data(), i, normal(rng));
  return out;
}

// Every rank's N(0, 1) f32 input (seed 99) and the result of one sum with each of `quants`
// in turn over one group of `peers` peers with `connections` each (one group for all: its
// set-up is most of the time, 16 peers on 2 cores); REQUIREs that every peer succeeded.
struct QuantizedSums {
  std::vector<std::vector<float>> inputs;                // by rank
  std::vector<std::vector<std::vector<float>>> outputs;  // by quant, then rank
};

inline QuantizedSums quantized_sums(size_t peers, const std::vector<ferry_quant>& quants, size_t count,
                                    uint32_t connections) {
  EmbeddedMaster master;
  QuantizedSums run{std::vector<std::vector<float>>(peers),
                    std::vector<std::vector<std::vector<float>>>(quants.size(), std::vector<std::vector<float>>(peers))};
  auto results = run_peers(peers, [&](size_t) {
    PeerSettings settings;
    settings.connections = connections;
    ferry_comm* comm = create_peer(master.address(), settings);
    grow_group(comm, static_cast<int64_t>(peers));
    size_t rank = static_cast<size_t>(attribute(comm, FERRY_ATTR_RANK));
    auto bytes = normal_input(FERRY_F32, count, rank, 99);
    run.inputs[rank].resize(count);
    std::memcpy(run.inputs[rank].data(), bytes.data(), bytes.size());
    for (size_t q = 0; q < quants.size(); ++q) {
      auto& out = run.outputs[q][rank];
      out = run.inputs[rank];
      auto desc = allreduce_desc(FERRY_F32, FERRY_OP_SUM, quants[q]);
      must(ferry_allreduce(comm, out.data(), out.data(), count, &desc, nullptr), "allreduce");
    }
    ferry_comm_destroy(comm);
  });
  REQUIRE(failures(results) == "");
  return run;
}

}  // namespace ferry::test
