// The sparse codec (core/sparse_codec.h) in ferry_core_bench: top-k
// selection plus encoding of 64 MiB of normal(0, 1) f32, chunk 4096, at
// 1 / 2 / 3 % density and 2 / 4 / 8 bits; the same with the error-feedback
// residual written in place (SparseLoCo's use) and from bf16; the selection
// alone against a whole-chunk std::nth_element; and the decode-and-sum of 4
// contributions. Bytes per second count the f32 tensor (64 MiB) once, as the
// other codecs' cases do. Target (issue 38): encode >= 1 GB/s on one core.
#include <benchmark/benchmark.h>

#include <algorithm>
#include <bit>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "bench_data.h"
#include "core/half.h"
#include "core/sparse_codec.h"

namespace {

using ferry::DType;
using ferry::SparseSpec;

constexpr size_t kCount = ferry::bench::kNormalFloats;
constexpr uint32_t kChunk = 4096;

using ferry::bench::normal_floats;

SparseSpec spec_of(double density, uint32_t bits) {
  return SparseSpec{kChunk, ferry::sparse_k_for_density(kChunk, density), bits};
}

void bytes_of_tensor(benchmark::State& state) {
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(kCount * sizeof(float)));
}

void sparse_encode(benchmark::State& state, double density, uint32_t bits) {
  const SparseSpec spec = spec_of(density, bits);
  const std::vector<float>& x = normal_floats(1);
  std::vector<uint8_t> out(ferry::sparse_max_encoded_bytes(spec, kCount));
  size_t bytes = 0;
  for (auto _ : state) {
    bytes = ferry::sparse_encode(spec, DType::f32, x.data(), kCount, out.data(), nullptr);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  bytes_of_tensor(state);
  state.counters["wire_%"] = 100.0 * static_cast<double>(bytes) / static_cast<double>(kCount * sizeof(float));
}

// The accumulator is encoded and its residual written in place: each
// iteration starts from a fresh copy (the copy is outside the timing).
void sparse_encode_residual_in_place(benchmark::State& state, double density, uint32_t bits) {
  const SparseSpec spec = spec_of(density, bits);
  std::vector<float> acc(kCount);
  std::vector<uint8_t> out(ferry::sparse_max_encoded_bytes(spec, kCount));
  for (auto _ : state) {
    state.PauseTiming();
    acc = normal_floats(1);
    state.ResumeTiming();
    ferry::sparse_encode(spec, DType::f32, acc.data(), kCount, out.data(), acc.data());
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  bytes_of_tensor(state);
}

void sparse_encode_bf16(benchmark::State& state, double density, uint32_t bits) {
  const SparseSpec spec = spec_of(density, bits);
  std::vector<uint16_t> x(kCount);
  ferry::f32_to_bf16(normal_floats(1).data(), x.data(), kCount);
  std::vector<uint8_t> out(ferry::sparse_max_encoded_bytes(spec, kCount));
  for (auto _ : state) {
    ferry::sparse_encode(spec, DType::bf16, x.data(), kCount, out.data(), nullptr);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  bytes_of_tensor(state);  // still 4 bytes an element: the f32 tensor's size
}

// Selection only, per chunk: the codec's histogram select, and the baseline
// it replaced: std::nth_element over the whole chunk on (magnitude, index)
// keys, then a sort of the k chosen indices.
void sparse_select(benchmark::State& state, double density, bool baseline) {
  const uint32_t k = ferry::sparse_k_for_density(kChunk, density);
  const std::vector<float>& x = normal_floats(1);
  std::vector<uint32_t> mag(kChunk), scratch(2 * kChunk), selected(k);
  std::vector<uint64_t> keys(kChunk);
  for (auto _ : state) {
    for (size_t first = 0; first < kCount; first += kChunk) {
      for (uint32_t i = 0; i < kChunk; ++i) mag[i] = std::bit_cast<uint32_t>(x[first + i]) & 0x7fffffffu;
      if (baseline) {
        // Larger magnitude first, then the lower index: ~i in the low half.
        for (uint32_t i = 0; i < kChunk; ++i) keys[i] = (uint64_t{mag[i]} << 32) | (0xffffffffu - i);
        std::nth_element(keys.begin(), keys.begin() + (k - 1), keys.end(), std::greater<uint64_t>());
        for (uint32_t j = 0; j < k; ++j) selected[j] = 0xffffffffu - static_cast<uint32_t>(keys[j]);
        std::sort(selected.begin(), selected.end());
      } else {
        ferry::sparse_detail::select_top_k(mag.data(), kChunk, k, scratch.data(), selected.data());
      }
      benchmark::DoNotOptimize(selected.data());
    }
  }
  bytes_of_tensor(state);
}

void sparse_decode_sum(benchmark::State& state, double density, uint32_t bits) {
  const SparseSpec spec = spec_of(density, bits);
  std::vector<std::vector<uint8_t>> wire(4, std::vector<uint8_t>(ferry::sparse_max_encoded_bytes(spec, kCount)));
  std::vector<std::span<const uint8_t>> views;
  for (uint64_t r = 0; r < 4; ++r) {
    wire[r].resize(ferry::sparse_encode(spec, DType::f32, normal_floats(r).data(), kCount, wire[r].data(), nullptr));
    views.emplace_back(wire[r]);
  }
  std::vector<float> out(kCount);
  for (auto _ : state) {
    const auto status = ferry::sparse_decode_sum(views, out.data(), kCount);
    if (!status.ok()) state.SkipWithError(status.message.c_str());
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  bytes_of_tensor(state);
}

#define FERRY_SPARSE_ENCODE(name, density, bits) \
  BENCHMARK_CAPTURE(sparse_encode, name, density, bits)->Unit(benchmark::kMillisecond)
FERRY_SPARSE_ENCODE(d1_b2, 0.01, 2);
FERRY_SPARSE_ENCODE(d2_b2, 0.02, 2);
FERRY_SPARSE_ENCODE(d3_b2, 0.03, 2);
FERRY_SPARSE_ENCODE(d1_b4, 0.01, 4);
FERRY_SPARSE_ENCODE(d2_b4, 0.02, 4);
FERRY_SPARSE_ENCODE(d3_b4, 0.03, 4);
FERRY_SPARSE_ENCODE(d1_b8, 0.01, 8);
FERRY_SPARSE_ENCODE(d2_b8, 0.02, 8);
FERRY_SPARSE_ENCODE(d3_b8, 0.03, 8);
BENCHMARK_CAPTURE(sparse_encode_residual_in_place, d2_b2, 0.02, 2)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(sparse_encode_bf16, d2_b2, 0.02, 2)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(sparse_select, d2_histogram, 0.02, false)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(sparse_select, d2_nth_element, 0.02, true)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(sparse_decode_sum, d2_b2_4peers, 0.02, 2)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(sparse_decode_sum, d3_b8_4peers, 0.03, 8)->Unit(benchmark::kMillisecond);

}  // namespace
