// int_quant_absmax and int_quant_encode on the device (i8h, i4h, nearest or
// stochastic rounding). absmax: one warp per scale block the chunk touches
// (an unsigned max of magnitude bits, merged into the block's entry as on
// the CPU, so chunking never matters). encode: one thread per packed byte
// (one i8h code, or two i4h codes), each code from int_quant_core.h.
//
// Cost model (per f32 element): absmax reads 4 bytes; encode reads 4 and
// writes 1 (i8h) or 1/2 (i4h), plus a 64-bit index division and the block's
// scale (an IEEE division, cached in L1 with its block's neighbours).
#include <string>

#include "cuda/cuda_status.h"
#include "cuda/device_codecs.h"
#include "cuda/int_quant_core.h"

namespace ferry::device {
namespace {

using device_core::FloatTraits;

constexpr unsigned kThreads = 256;
constexpr unsigned kWarpsPerCta = kThreads / 32;

template <class T>
__global__ void absmax_kernel(const T* x, size_t count, size_t first_index, uint32_t block, size_t first_block,
                              size_t blocks, T* absmax) {
  using Bits = typename FloatTraits<T>::Bits;
  const unsigned lane = threadIdx.x % 32;
  const size_t warps = size_t{gridDim.x} * kWarpsPerCta;
  for (size_t w = size_t{blockIdx.x} * kWarpsPerCta + threadIdx.x / 32; w < blocks; w += warps) {
    const size_t b = first_block + w;
    const size_t lo = (b * block > first_index ? b * block : first_index) - first_index;
    const size_t end = (b + 1) * block < first_index + count ? (b + 1) * block : first_index + count;
    const size_t hi = end - first_index;
    Bits m = 0;
    for (size_t i = lo + lane; i < hi; i += 32) {
      const Bits v = device_core::magnitude_bits(x[i]);
      m = v > m ? v : m;
    }
    for (int offset = 16; offset > 0; offset /= 2) {
      const Bits other = __shfl_xor_sync(0xffffffffu, m, offset);
      m = other > m ? other : m;
    }
    if (lane == 0) {
      const Bits held = device_core::magnitude_bits(absmax[b]);
      absmax[b] = device_core::absmax_value<T>(held > m ? held : m);
    }
  }
}

template <class T>
__global__ void int_encode_kernel(const T* x, size_t count, const T* absmax, size_t first_index, uint32_t block,
                                  int32_t levels, bool stochastic, uint64_t stream, bool four_bit, size_t bytes,
                                  uint8_t* out) {
  const size_t threads = size_t{gridDim.x} * blockDim.x;
  const auto code = [&](size_t i) {
    const uint64_t index = first_index + i;
    const auto scale = device_core::int_block_scale(absmax[index / block], levels);
    return device_core::int_code(scale, levels, stochastic, stream, x[i], index);
  };
  for (size_t k = size_t{blockIdx.x} * blockDim.x + threadIdx.x; k < bytes; k += threads) {
    out[k] = device_core::int_packed_byte(four_bit, count, k, code);
  }
}

Status check(IntQuantSpec spec, const char* what) {
  try {
    (void)int_quant_block_count(spec, 1);  // validates the spec
  } catch (const std::exception& e) {
    return Status::failure(Errc::invalid_argument, std::string(what) + ": " + e.what());
  }
  return Status::success();
}

}  // namespace

template <class T>
Status int_quant_absmax(IntQuantSpec spec, const T* x_device, size_t count, size_t first_index, T* absmax_device,
                        void* stream) {
  Status status = check(spec, "device int_quant_absmax");
  if (!status.ok() || count == 0) return status;
  const size_t first_block = first_index / spec.block;
  const size_t blocks = (first_index + count - 1) / spec.block - first_block + 1;
  absmax_kernel<T><<<grid_for(kWarpsPerCta, blocks), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      x_device, count, first_index, spec.block, first_block, blocks, absmax_device);
  return launch_status("device int_quant_absmax");
}

template <class T>
Status int_quant_encode(IntQuantSpec spec, uint64_t contributor, const T* absmax_device, size_t first_index,
                        const T* x_device, size_t count, uint8_t* out_device, void* stream) {
  Status status = check(spec, "device int_quant_encode");
  if (!status.ok() || count == 0) return status;
  const bool four_bit = spec.kind == IntQuantKind::i4h;
  const size_t bytes = int_quant_packed_bytes(spec, count, 1);
  // int_quant.cpp's stream key: splitmix(seed, contributor).
  const uint64_t key = int_quant_detail::random_bits(spec.seed, contributor);
  int_encode_kernel<T><<<grid_for(kThreads, bytes), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      x_device, count, absmax_device, first_index, spec.block, int_quant_levels(spec.kind),
      spec.rounding == IntRounding::stochastic, key, four_bit, bytes, out_device);
  return launch_status("device int_quant_encode");
}

template Status int_quant_absmax<float>(IntQuantSpec, const float*, size_t, size_t, float*, void*);
template Status int_quant_absmax<double>(IntQuantSpec, const double*, size_t, size_t, double*, void*);
template Status int_quant_encode<float>(IntQuantSpec, uint64_t, const float*, size_t, const float*, size_t, uint8_t*,
                                        void*);
template Status int_quant_encode<double>(IntQuantSpec, uint64_t, const double*, size_t, const double*, size_t,
                                         uint8_t*, void*);

}  // namespace ferry::device
