// A model of the ring the integer-domain quantization (core/int_quant.h) is made for: normal
// inputs, the group's agreed scales, and a reduce-scatter's sum in any contributor order.
// Shared by the unit tests (core_int_quant.cpp) and the error report
// (tools/microbench/int_quant_error_report.cpp); a failed call throws ferry::Error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

#include "core/error.h"
#include "core/int_quant.h"

namespace ferry::int_quant_ring {

using Bytes = std::vector<uint8_t>;

template <class T>
std::vector<T> normal_input(size_t count, uint64_t seed, double sigma = 1.0) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, sigma);
  std::vector<T> x(count);
  for (T& v : x) v = static_cast<T>(normal(rng));
  return x;
}

// The group's agreed scales: each peer's absmax, merged as the max all-reduce would.
template <class T>
std::vector<T> agreed_absmax(IntQuantSpec spec, const std::vector<std::vector<T>>& inputs) {
  std::vector<T> agreed(int_quant_block_count(spec, inputs[0].size()), T(0));
  for (const auto& x : inputs) {
    std::vector<T> mine(agreed.size(), T(0));
    int_quant_absmax(spec, x.data(), x.size(), 0, mine.data());
    int_quant_merge_absmax(agreed.data(), mine.data(), agreed.size());
  }
  return agreed;
}

// A ring's reduce-scatter over elements [first, first + count) with the
// contributions in `order`: the first encodes, each next one adds its own.
// Peer p's stable id (its stochastic stream) is peer_id(p), whatever its place.
uint64_t peer_id(size_t p) { return 0x5eed0000 + 7 * p; }

template <class T>
Bytes ring_sum(IntQuantSpec spec, const std::vector<T>& absmax, const std::vector<std::vector<T>>& inputs,
               const std::vector<size_t>& order, size_t first, size_t count) {
  Bytes partial(int_quant_packed_bytes(spec, count, 1));
  int_quant_encode(spec, peer_id(order[0]), absmax.data(), first, inputs[order[0]].data() + first, count,
                   partial.data());
  for (uint32_t k = 1; k < order.size(); ++k) {
    Bytes next(int_quant_packed_bytes(spec, count, k + 1));
    const Status status =
        int_quant_encode_add(spec, peer_id(order[k]), absmax.data(), first, inputs[order[k]].data() + first, count,
                             partial.data(), partial.size(), k, next.data());
    if (!status.ok()) throw Error(status.code, status.message);
    partial = std::move(next);
  }
  return partial;
}

template <class T>
std::vector<T> decode_sum(IntQuantSpec spec, const std::vector<T>& absmax, const Bytes& sum, uint32_t contributors,
                          ReduceOp op, size_t first, size_t count) {
  std::vector<T> out(count);
  const Status status =
      int_quant_decode(spec, absmax.data(), first, sum.data(), sum.size(), contributors, op, count, out.data());
  if (!status.ok()) throw Error(status.code, status.message);
  return out;
}

}  // namespace ferry::int_quant_ring
