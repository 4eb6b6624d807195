// Throughput of the reduce kernels and the 16-bit float conversions on
// buffers far larger than the caches, so the figures are memory-bound and
// comparable with the machine's bandwidth.
//
// Bytes per second count the output buffer once: for reduce, one 64 MiB
// array per iteration (the memory traffic is three times that: two reads and
// a write); for conversions, the f32 side (64 MiB) whichever the direction.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <vector>

#include "core/half.h"
#include "core/reduce.h"

namespace {

using ferry::DType;
using ferry::ReduceOp;

constexpr size_t kBufferBytes = size_t{64} << 20;

void reduce_sum(benchmark::State& state, DType dtype) {
  const size_t count = kBufferBytes / ferry::dtype_size(dtype);
  // Small values in every format, so sums stay finite and no NaN slows anything down.
  std::vector<unsigned char> incoming(kBufferBytes, 0x01), local(kBufferBytes, 0x02), out(kBufferBytes, 0);
  for (auto _ : state) {
    ferry::reduce(dtype, ReduceOp::sum, out.data(), incoming.data(), local.data(), count);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(kBufferBytes));
}

void reduce_sum_in_place(benchmark::State& state, DType dtype) {
  const size_t count = kBufferBytes / ferry::dtype_size(dtype);
  std::vector<unsigned char> incoming(kBufferBytes, 0x01), local(kBufferBytes, 0);
  for (auto _ : state) {
    ferry::reduce(dtype, ReduceOp::sum, local.data(), incoming.data(), local.data(), count);
    benchmark::DoNotOptimize(local.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(kBufferBytes));
}

BENCHMARK_CAPTURE(reduce_sum, f32, DType::f32)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(reduce_sum, bf16, DType::bf16)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(reduce_sum, f16, DType::f16)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(reduce_sum, i32, DType::i32)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(reduce_sum_in_place, f32, DType::f32)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(reduce_sum_in_place, bf16, DType::bf16)->Unit(benchmark::kMillisecond);

constexpr size_t kConvertCount = kBufferBytes / sizeof(float);

template <void (*Convert)(const uint16_t*, float*, size_t)>
void widen(benchmark::State& state) {
  std::vector<uint16_t> in(kConvertCount, 0x3c01);
  std::vector<float> out(kConvertCount, 0.0f);
  for (auto _ : state) {
    Convert(in.data(), out.data(), kConvertCount);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(kBufferBytes));
}

template <void (*Convert)(const float*, uint16_t*, size_t)>
void narrow(benchmark::State& state) {
  std::vector<float> in(kConvertCount);
  for (size_t i = 0; i < kConvertCount; ++i) in[i] = static_cast<float>(i % 4099) * 0.37f;
  std::vector<uint16_t> out(kConvertCount, 0);
  for (auto _ : state) {
    Convert(in.data(), out.data(), kConvertCount);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(kBufferBytes));
}

BENCHMARK(widen<ferry::f16_to_f32>)->Name("f16_to_f32")->Unit(benchmark::kMillisecond);
BENCHMARK(narrow<ferry::f32_to_f16>)->Name("f32_to_f16")->Unit(benchmark::kMillisecond);
BENCHMARK(widen<ferry::bf16_to_f32>)->Name("bf16_to_f32")->Unit(benchmark::kMillisecond);
BENCHMARK(narrow<ferry::f32_to_bf16>)->Name("f32_to_bf16")->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
