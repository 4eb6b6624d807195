// ferry-cuda-bench: device throughput of the u8 / u4 / i8h encoders and the
// content hash on a large f32 buffer (2 GiB by default), timed with CUDA
// events over several repetitions (the best is reported, after one warm-up),
// plus a byte-for-byte check of a slice against the CPU codecs. Issue 41's
// targets: u8 encode and hash >= 200 GB/s of input.
//
//   ferry-cuda-bench [--json] [--gib G] [--reps R]
// Exit status: 0 ok, 1 a check failed or CUDA failed, 2 a bad argument,
// 77 no CUDA device.
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>
#include <vector>

#include "core/content_hash.h"
#include "core/int_quant.h"
#include "core/quant.h"
#include "cuda/device_codecs.h"

namespace {

using namespace ferry;

__global__ void fill_kernel(float* x, size_t count) {
  for (size_t i = size_t{blockIdx.x} * blockDim.x + threadIdx.x; i < count; i += size_t{gridDim.x} * blockDim.x) {
    uint64_t z = (i + 1) * 0x9e3779b97f4a7c15u;
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
    z ^= z >> 31;
    x[i] = static_cast<float>(static_cast<double>(z >> 40) * 0x1p-24 * 2.0 - 1.0);  // in [-1, 1)
  }
}

bool check(const Status& status) {
  if (status.ok()) return true;
  std::fprintf(stderr, "ferry-cuda-bench: %s\n", status.message.c_str());
  return false;
}

// Best of `reps` timed runs (after a warm-up) of `work`, in seconds.
double best_seconds(int reps, const std::function<Status()>& work, bool& ok) {
  cudaEvent_t start, stop;
  cudaEventCreate(&start);
  cudaEventCreate(&stop);
  ok = ok && check(work()) && check(device::synchronize());
  double best = 1e30;
  for (int r = 0; r < reps && ok; ++r) {
    cudaEventRecord(start);
    ok = check(work());
    cudaEventRecord(stop);
    cudaEventSynchronize(stop);
    float ms = 0;
    cudaEventElapsedTime(&ms, start, stop);
    best = std::min(best, ms / 1e3);
  }
  ok = ok && check(device::synchronize());
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  return best;
}

}  // namespace

int main(int argc, char** argv) {
  bool json = false;
  double gib = 2.0;
  int reps = 5;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--json") {
      json = true;
    } else if (arg == "--gib" && i + 1 < argc) {
      gib = std::atof(argv[++i]);
    } else if (arg == "--reps" && i + 1 < argc) {
      reps = std::atoi(argv[++i]);
    } else {
      std::fprintf(stderr, "usage: ferry-cuda-bench [--json] [--gib G] [--reps R]\n");
      return 2;
    }
  }
  if (gib <= 0 || reps < 1) {
    std::fprintf(stderr, "ferry-cuda-bench: --gib must be > 0 and --reps >= 1\n");
    return 2;
  }
  if (device::device_count() == 0) {
    std::printf("ferry-cuda-bench: SKIPPED, %s\n", device::device_summary().c_str());
    return 77;
  }
  const size_t count = static_cast<size_t>(gib * (1u << 30) / 4) / 1024 * 1024;
  const size_t bytes = count * 4;
  const QuantSpec u8{Quant::u8, kDefaultQuantBlock}, u4{Quant::u4, kDefaultQuantBlock};
  const IntQuantSpec i8h = int_quant_spec({Quant::i8h, kDefaultQuantBlock}, 0);
  const size_t scales = int_quant_block_count(i8h, count);
  bool ok = true;
  try {
    device::DeviceBuffer x(bytes), out(quant_encoded_bytes<float>(u8, count)), absmax(scales * 4),
        hashes((bytes / kContentHashBlock + 1) * 8);
    fill_kernel<<<132 * 16, 256>>>(x.as<float>(), count);
    ok = check(device::synchronize());
    cudaMemset(absmax.data(), 0, scales * 4);

    const double t_u8 = best_seconds(reps, [&] {
      return device::quant_encode<float>(u8, x.as<float>(), count, out.as<uint8_t>(), nullptr);
    }, ok);
    // The check: the first 16 Mi elements (whole blocks) against the CPU encoder.
    const size_t slice = std::min<size_t>(count, size_t{1} << 24);
    std::vector<float> host(slice);
    x.download(host.data(), slice * 4);
    std::vector<uint8_t> cpu(quant_encoded_bytes<float>(u8, slice));
    quant_encode<float>(u8, host.data(), slice, cpu.data());
    const bool u8_same = out.download_bytes(cpu.size()) == cpu;

    const double t_u4 = best_seconds(reps, [&] {
      return device::quant_encode<float>(u4, x.as<float>(), count, out.as<uint8_t>(), nullptr);
    }, ok);
    const double t_absmax = best_seconds(reps, [&] {
      return device::int_quant_absmax<float>(i8h, x.as<float>(), count, 0, absmax.as<float>(), nullptr);
    }, ok);
    const double t_i8h = best_seconds(reps, [&] {
      return device::int_quant_encode<float>(i8h, 1, absmax.as<float>(), 0, x.as<float>(), count, out.as<uint8_t>(),
                                             nullptr);
    }, ok);
    const double t_hash = best_seconds(reps, [&] {
      return device::content_block_hashes(x.data(), bytes, hashes.as<uint64_t>(), nullptr);
    }, ok);
    uint64_t device_hash = 0;
    const double t_hash_folded = best_seconds(reps, [&] {
      return device::content_hash(x.data(), bytes, nullptr, &device_hash);
    }, ok);
    uint64_t slice_hash = 0;
    ok = ok && check(device::content_hash(x.data(), slice * 4, nullptr, &slice_hash));
    const bool hash_same = slice_hash == content_hash(host.data(), slice * 4);

    const auto gbps = [&](double seconds) { return static_cast<double>(bytes) / seconds / 1e9; };
    const bool meets = gbps(t_u8) >= 200 && gbps(t_hash) >= 200;
    if (json) {
      std::printf(
          "{\"device\": \"%s\", \"input_bytes\": %zu, \"reps\": %d, \"u8_encode_gbps\": %.1f, "
          "\"u4_encode_gbps\": %.1f, \"i8h_absmax_gbps\": %.1f, \"i8h_encode_gbps\": %.1f, \"hash_gbps\": %.1f, "
          "\"hash_with_fold_gbps\": %.1f, \"u8_slice_matches_cpu\": %s, \"hash_slice_matches_cpu\": %s, "
          "\"target_gbps\": 200, \"meets_targets\": %s, \"ok\": %s}\n",
          device::device_summary().c_str(), bytes, reps, gbps(t_u8), gbps(t_u4), gbps(t_absmax), gbps(t_i8h),
          gbps(t_hash), gbps(t_hash_folded), u8_same ? "true" : "false", hash_same ? "true" : "false",
          meets ? "true" : "false", ok ? "true" : "false");
    } else {
      std::printf("%s, %zu bytes of f32, best of %d\n", device::device_summary().c_str(), bytes, reps);
      std::printf("  u8 encode   %8.1f GB/s  (slice matches the CPU: %s)\n", gbps(t_u8), u8_same ? "yes" : "NO");
      std::printf("  u4 encode   %8.1f GB/s\n", gbps(t_u4));
      std::printf("  i8h absmax  %8.1f GB/s\n", gbps(t_absmax));
      std::printf("  i8h encode  %8.1f GB/s\n", gbps(t_i8h));
      std::printf("  hash        %8.1f GB/s  (slice matches the CPU: %s)\n", gbps(t_hash), hash_same ? "yes" : "NO");
      std::printf("  hash+fold   %8.1f GB/s\n", gbps(t_hash_folded));
    }
    ok = ok && u8_same && hash_same;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "ferry-cuda-bench: %s\n", e.what());
    return 1;
  }
  return ok ? 0 : 1;
}
