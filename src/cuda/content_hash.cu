// content_hash on the device: one warp per kContentHashBlock (4 MiB) block,
// XXH3-64 of each (xxh3_core.h says how a warp shares a block), then the
// block hashes folded on the host exactly as content_hash_from_blocks does.
//
// Cost model: each 1 KiB XXH3 block is 4 coalesced 8-byte loads a lane (256
// bytes a warp instruction), 4 multiply-adds, 5 shuffles and the scramble; the
// scramble chain (4096 links a 4 MiB block) is the only sequential part, so
// each warp keeps kPrefetch blocks of loads in flight to hide memory latency.
// A tensor of b blocks runs b warps: a 4 MiB tensor runs on one warp.
#include <algorithm>
#include <cstdint>
#include <vector>

#include "core/content_hash.h"
#include "cuda/cuda_status.h"
#include "cuda/device_codecs.h"
#include "cuda/xxh3_core.h"

namespace ferry::device {
namespace {

using namespace device_core;

__constant__ uint8_t c_secret[kXxh3SecretSize] = {FERRY_XXH3_SECRET_BYTES};

constexpr unsigned kThreads = 32;  // one warp a CTA: a few blocks still spread over all SMs
constexpr size_t kPrefetch = 8;    // 1 KiB XXH3 blocks loaded ahead by each warp

template <bool Aligned>
__device__ uint64_t load64(const uint8_t* p) {
  if constexpr (Aligned) {
    return __ldg(reinterpret_cast<const unsigned long long*>(p));
  } else {
    return read_le64(p);
  }
}

// Adds a block's lane sums across the warp: lane i's accumulator gains the
// products of lane i and the words of lane i ^ 1, over all four lane groups.
__device__ uint64_t add_warp_sums(uint64_t acc, Xxh3LaneSums sums) {
  for (int offset = 8; offset < 32; offset *= 2) {
    sums.product += __shfl_xor_sync(0xffffffffu, sums.product, offset);
    sums.value += __shfl_xor_sync(0xffffffffu, sums.value, offset);
  }
  return acc + sums.product + __shfl_xor_sync(0xffffffffu, sums.value, 1);
}

template <bool Aligned>
__global__ void block_hash_kernel(const uint8_t* data, size_t size, size_t blocks, uint64_t* out) {
  const uint32_t lane = threadIdx.x % 32;
  const uint32_t i = lane % 8;
  const uint32_t group = lane / 8;
  // This lane's stripes of a full XXH3 block are group + 4j; their keys and the scramble key stay in registers.
  uint64_t keys[4];
  for (uint32_t j = 0; j < 4; ++j) keys[j] = read_le64(c_secret + (group + 4 * j) * 8 + 8 * i);
  const uint64_t scramble_key = xxh3_scramble_key(i, c_secret);
  for (size_t b = blockIdx.x; b < blocks; b += gridDim.x) {
    const size_t begin = b * kContentHashBlock;
    const size_t len = size - begin < kContentHashBlock ? size - begin : kContentHashBlock;
    const uint8_t* p = data + begin;
    if (len <= kXxh3MidsizeMax) {
      if (lane == 0) out[b] = xxh3_short(p, len, c_secret);
      continue;
    }
    const Xxh3LongPlan plan(len);
    uint64_t acc = xxh3_init_acc(i);
    const uint8_t* lane_base = p + group * kXxh3StripeLen + 8 * i;
    size_t n = 0;
    for (; n + kPrefetch <= plan.blocks; n += kPrefetch) {
      uint64_t words[kPrefetch][4];
#pragma unroll
      for (size_t u = 0; u < kPrefetch; ++u) {
#pragma unroll
        for (uint32_t j = 0; j < 4; ++j) {
          words[u][j] = load64<Aligned>(lane_base + (n + u) * kXxh3BlockLen + 4 * j * kXxh3StripeLen);
        }
      }
#pragma unroll
      for (size_t u = 0; u < kPrefetch; ++u) {
        Xxh3LaneSums sums;
#pragma unroll
        for (uint32_t j = 0; j < 4; ++j) sums.add(words[u][j], keys[j]);
        acc = xxh3_scramble(add_warp_sums(acc, sums), scramble_key);
      }
    }
    for (; n < plan.blocks; ++n) {
      Xxh3LaneSums sums;
      for (uint32_t j = 0; j < 4; ++j) {
        sums.add(load64<Aligned>(lane_base + n * kXxh3BlockLen + 4 * j * kXxh3StripeLen), keys[j]);
      }
      acc = xxh3_scramble(add_warp_sums(acc, sums), scramble_key);
    }
    Xxh3LaneSums sums = xxh3_lane_sums(p + plan.blocks * kXxh3BlockLen, plan.last_stripes, lane, c_secret);
    if (lane < 8) {
      sums.add(read_le64(p + len - kXxh3StripeLen + 8 * lane), read_le64(c_secret + kXxh3LastStripeKey + 8 * lane));
    }
    acc = add_warp_sums(acc, sums);
    uint64_t accs[8];
    for (uint32_t k = 0; k < 8; ++k) accs[k] = __shfl_sync(0xffffffffu, acc, static_cast<int>(k));
    if (lane == 0) out[b] = xxh3_merge(accs, len, c_secret);
  }
}

size_t block_count(size_t size) { return std::max<size_t>(1, (size + kContentHashBlock - 1) / kContentHashBlock); }

}  // namespace

Status content_block_hashes(const void* data_device, size_t size, uint64_t* block_hashes_device, void* stream) {
  const auto* data = static_cast<const uint8_t*>(data_device);
  const size_t blocks = block_count(size);
  const auto s = static_cast<cudaStream_t>(stream);
  const unsigned grid = grid_for(1, blocks);
  if (reinterpret_cast<uintptr_t>(data) % 8 == 0) {
    block_hash_kernel<true><<<grid, kThreads, 0, s>>>(data, size, blocks, block_hashes_device);
  } else {
    block_hash_kernel<false><<<grid, kThreads, 0, s>>>(data, size, blocks, block_hashes_device);
  }
  return launch_status("device content hash");
}

Status content_hash(const void* data_device, size_t size, void* stream, uint64_t* hash) {
  const size_t blocks = block_count(size);
  uint64_t* block_hashes = nullptr;
  const auto s = static_cast<cudaStream_t>(stream);
  Status status = cuda_status(cudaMallocAsync(reinterpret_cast<void**>(&block_hashes), blocks * 8, s),
                              "device content hash: cudaMallocAsync");
  if (!status.ok()) return status;
  std::vector<uint64_t> host(blocks);
  status = content_block_hashes(data_device, size, block_hashes, s);
  if (status.ok()) {
    status = cuda_status(cudaMemcpyAsync(host.data(), block_hashes, blocks * 8, cudaMemcpyDeviceToHost, s),
                         "device content hash: cudaMemcpyAsync");
  }
  const Status freed = cuda_status(cudaFreeAsync(block_hashes, s), "device content hash: cudaFreeAsync");
  const Status synced = cuda_status(cudaStreamSynchronize(s), "device content hash: cudaStreamSynchronize");
  if (status.ok()) status = freed.ok() ? synced : freed;
  if (status.ok()) *hash = content_hash_from_blocks(host, size);
  return status;
}

}  // namespace ferry::device
