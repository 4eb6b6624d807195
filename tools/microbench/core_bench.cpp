// Throughput of the reduce kernels and the 16-bit float conversions on
// buffers far larger than the caches, so the figures are memory-bound and
// comparable with the machine's bandwidth.
//
// Bytes per second count the output buffer once: for reduce, one 64 MiB
// array per iteration (the memory traffic is three times that: two reads and
// a write); for conversions, the f32 side (64 MiB) whichever the direction;
// for the quantization codecs, the f32 data (64 MiB of input to encode, of
// output from decode, of local for the add variants), so the figures compare
// with memcpy_64MiB, the single-core bandwidth ceiling.
#include <benchmark/benchmark.h>

#include <cstdint>
#include <cstring>
#include <vector>

#include "bench_data.h"
#include "core/half.h"
#include "core/int_quant.h"
#include "core/quant.h"
#include "core/quant_kernels.h"
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

void memcpy_64MiB(benchmark::State& state) {
  std::vector<unsigned char> in(kBufferBytes, 0x01), out(kBufferBytes, 0);
  for (auto _ : state) {
    std::memcpy(out.data(), in.data(), kBufferBytes);
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(kBufferBytes));
}
BENCHMARK(memcpy_64MiB)->Unit(benchmark::kMillisecond);

// ---- quantization codecs, 64 MiB of f32 (normal(0, 1) data, block 256)

using ferry::Quant;
using ferry::QuantSpec;
using ferry::quant_detail::QuantPath;

using ferry::bench::normal_floats;

std::vector<uint8_t> encoded(QuantSpec spec, const std::vector<float>& x) {
  std::vector<uint8_t> wire(ferry::quant_encoded_bytes<float>(spec, x.size()));
  ferry::quant_encode(spec, x.data(), x.size(), wire.data());
  return wire;
}

void set_f32_bytes(benchmark::State& state) {
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(kBufferBytes));
}

void quant_encode(benchmark::State& state, Quant kind, QuantPath path) {
  const QuantSpec spec{kind};
  const std::vector<float>& x = normal_floats(1);
  std::vector<uint8_t> wire(ferry::quant_encoded_bytes<float>(spec, x.size()), 0);
  for (auto _ : state) {
    ferry::quant_detail::encode_with(path, spec, x.data(), x.size(), wire.data());
    benchmark::DoNotOptimize(wire.data());
    benchmark::ClobberMemory();
  }
  set_f32_bytes(state);
}

// decode (local = nullptr) or decode-add into a separate output.
void quant_decode(benchmark::State& state, Quant kind, QuantPath path, bool add) {
  const QuantSpec spec{kind};
  const std::vector<uint8_t> wire = encoded(spec, normal_floats(1));
  const std::vector<float>& local = normal_floats(2);
  std::vector<float> out(kConvertCount, 0.0f);
  for (auto _ : state) {
    const auto status = ferry::quant_detail::decode_with<float>(path, spec, wire.data(), wire.size(), out.size(),
                                                                add ? local.data() : nullptr, out.data());
    if (!status.ok()) state.SkipWithError(status.message.c_str());
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  set_f32_bytes(state);
}

void quant_decode_add_encode(benchmark::State& state, Quant kind, QuantPath path) {
  const QuantSpec spec{kind};
  const std::vector<uint8_t> wire = encoded(spec, normal_floats(1));
  const std::vector<float>& local = normal_floats(2);
  std::vector<uint8_t> out(wire.size(), 0);
  for (auto _ : state) {
    const auto status = ferry::quant_detail::decode_add_encode_with<float>(path, spec, wire.data(), wire.size(),
                                                                           local.data(), local.size(), out.data());
    if (!status.ok()) state.SkipWithError(status.message.c_str());
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  set_f32_bytes(state);
}

#define FERRY_QUANT_BENCH(kind, path)                                                                            \
  BENCHMARK_CAPTURE(quant_encode, kind##_##path, Quant::kind, QuantPath::path)->Unit(benchmark::kMillisecond);   \
  BENCHMARK_CAPTURE(quant_decode, kind##_##path, Quant::kind, QuantPath::path, false)                            \
      ->Unit(benchmark::kMillisecond);                                                                           \
  BENCHMARK_CAPTURE(quant_decode, kind##_add_##path, Quant::kind, QuantPath::path, true)                         \
      ->Unit(benchmark::kMillisecond);                                                                           \
  BENCHMARK_CAPTURE(quant_decode_add_encode, kind##_##path, Quant::kind, QuantPath::path)                        \
      ->Unit(benchmark::kMillisecond)

FERRY_QUANT_BENCH(u8, scalar);
#if defined(__AVX2__)
FERRY_QUANT_BENCH(u8, avx2);
#endif
#if defined(FERRY_QUANT_AVX512)
FERRY_QUANT_BENCH(u8, avx512);
#endif
FERRY_QUANT_BENCH(u4, scalar);
#if defined(__AVX2__)
FERRY_QUANT_BENCH(u4, avx2);
#endif
#if defined(FERRY_QUANT_AVX512)
FERRY_QUANT_BENCH(u4, avx512);
#endif
// f16/bf16 use half.h's conversions whatever the path.
FERRY_QUANT_BENCH(f16, scalar);
FERRY_QUANT_BENCH(bf16, scalar);


// ---- integer-domain quantization (int_quant.h), 64 MiB of f32, block 256:
// one peer's absmax, its encode (what the first hop sends), a reduce-scatter
// hop (encode-add onto a partial of 3 contributions), the integer reduce of
// two partials of 4 contributions (no floats at all), and the owner's decode
// of a sum of 8. Bytes count the f32 data, as above.

using ferry::IntQuantKind;
using ferry::IntQuantSpec;
using ferry::IntRounding;

std::vector<float> agreed_absmax(IntQuantSpec spec) {
  std::vector<float> absmax(ferry::int_quant_block_count(spec, kConvertCount), 0.0f);
  ferry::int_quant_absmax(spec, normal_floats(1).data(), kConvertCount, 0, absmax.data());
  ferry::int_quant_absmax(spec, normal_floats(2).data(), kConvertCount, 0, absmax.data());
  return absmax;
}

std::vector<uint8_t> int_partial(IntQuantSpec spec, const std::vector<float>& absmax, uint32_t contributors) {
  std::vector<uint8_t> wire(ferry::int_quant_packed_bytes(spec, kConvertCount, 1));
  ferry::int_quant_encode(spec, 1, absmax.data(), 0, normal_floats(1).data(), kConvertCount, wire.data());
  for (uint32_t k = 1; k < contributors; ++k) {
    std::vector<uint8_t> next(ferry::int_quant_packed_bytes(spec, kConvertCount, k + 1));
    const float* x = normal_floats(k % 2 + 1).data();
    (void)ferry::int_quant_encode_add(spec, k + 1, absmax.data(), 0, x, kConvertCount, wire.data(), wire.size(), k,
                                      next.data());
    wire = std::move(next);
  }
  return wire;
}

void int_quant_absmax(benchmark::State& state) {
  const IntQuantSpec spec{IntQuantKind::i8h};
  std::vector<float> absmax(ferry::int_quant_block_count(spec, kConvertCount));
  for (auto _ : state) {
    std::fill(absmax.begin(), absmax.end(), 0.0f);
    ferry::int_quant_absmax(spec, normal_floats(1).data(), kConvertCount, 0, absmax.data());
    benchmark::DoNotOptimize(absmax.data());
    benchmark::ClobberMemory();
  }
  set_f32_bytes(state);
}
BENCHMARK(int_quant_absmax)->Unit(benchmark::kMillisecond);

void int_quant_encode(benchmark::State& state, IntQuantKind kind, IntRounding rounding) {
  const IntQuantSpec spec{kind, ferry::kDefaultQuantBlock, rounding, 7};
  const std::vector<float> absmax = agreed_absmax(spec);
  std::vector<uint8_t> wire(ferry::int_quant_packed_bytes(spec, kConvertCount, 1), 0);
  for (auto _ : state) {
    ferry::int_quant_encode(spec, 1, absmax.data(), 0, normal_floats(1).data(), kConvertCount, wire.data());
    benchmark::DoNotOptimize(wire.data());
    benchmark::ClobberMemory();
  }
  set_f32_bytes(state);
}

void int_quant_encode_add(benchmark::State& state, IntQuantKind kind, IntRounding rounding) {
  const IntQuantSpec spec{kind, ferry::kDefaultQuantBlock, rounding, 7};
  const std::vector<float> absmax = agreed_absmax(spec);
  const std::vector<uint8_t> in = int_partial(spec, absmax, 3);
  std::vector<uint8_t> out(ferry::int_quant_packed_bytes(spec, kConvertCount, 4), 0);
  for (auto _ : state) {
    const auto status = ferry::int_quant_encode_add(spec, 4, absmax.data(), 0, normal_floats(2).data(),
                                                    kConvertCount, in.data(), in.size(), 3, out.data());
    if (!status.ok()) state.SkipWithError(status.message.c_str());
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  set_f32_bytes(state);
}

void int_quant_add(benchmark::State& state, IntQuantKind kind) {
  const IntQuantSpec spec{kind};
  const std::vector<float> absmax = agreed_absmax(spec);
  const std::vector<uint8_t> in = int_partial(spec, absmax, 4);
  std::vector<uint8_t> out(ferry::int_quant_packed_bytes(spec, kConvertCount, 8), 0);
  for (auto _ : state) {
    const auto status =
        ferry::int_quant_add(spec, in.data(), in.size(), 4, in.data(), in.size(), 4, kConvertCount, out.data());
    if (!status.ok()) state.SkipWithError(status.message.c_str());
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  set_f32_bytes(state);
}

void int_quant_decode(benchmark::State& state, IntQuantKind kind) {
  const IntQuantSpec spec{kind};
  const std::vector<float> absmax = agreed_absmax(spec);
  const std::vector<uint8_t> in = int_partial(spec, absmax, 8);
  std::vector<float> out(kConvertCount, 0.0f);
  for (auto _ : state) {
    const auto status = ferry::int_quant_decode(spec, absmax.data(), 0, in.data(), in.size(), 8,
                                                ferry::ReduceOp::avg, kConvertCount, out.data());
    if (!status.ok()) state.SkipWithError(status.message.c_str());
    benchmark::DoNotOptimize(out.data());
    benchmark::ClobberMemory();
  }
  set_f32_bytes(state);
}

BENCHMARK_CAPTURE(int_quant_encode, i8h_rtn, IntQuantKind::i8h, IntRounding::nearest)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(int_quant_encode, i8h_sr, IntQuantKind::i8h, IntRounding::stochastic)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(int_quant_encode, i4h_rtn, IntQuantKind::i4h, IntRounding::nearest)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(int_quant_encode_add, i8h_rtn, IntQuantKind::i8h, IntRounding::nearest)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(int_quant_encode_add, i8h_sr, IntQuantKind::i8h, IntRounding::stochastic)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(int_quant_encode_add, i4h_rtn, IntQuantKind::i4h, IntRounding::nearest)
    ->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(int_quant_add, i8h, IntQuantKind::i8h)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(int_quant_add, i4h, IntQuantKind::i4h)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(int_quant_decode, i8h, IntQuantKind::i8h)->Unit(benchmark::kMillisecond);
BENCHMARK_CAPTURE(int_quant_decode, i4h, IntQuantKind::i4h)->Unit(benchmark::kMillisecond);

}  // namespace

BENCHMARK_MAIN();
