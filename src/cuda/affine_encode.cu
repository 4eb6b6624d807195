// quant_encode on the device (u8, i8, u4): one warp per block of spec.block
// elements. The lanes fold strided elements into a range, the warp combines
// the ends with shuffles, every lane derives the same header, and each lane
// writes the code bytes k = lane, lane + 32, ... (coalesced: the warp stores
// 32 consecutive bytes at a time). The arithmetic is affine_quant_core.h's.
//
// Cost model (per f32 element): reads 4 bytes twice (the second time from L1
// or L2) and writes 1 (u8/i8) or 1/2 (u4) plus 8 bytes a block; one IEEE
// division per element. Memory-bound on an H200.
#include <algorithm>
#include <string>

#include "cuda/affine_quant_core.h"
#include "cuda/cuda_status.h"
#include "cuda/device_codecs.h"

namespace ferry::device {
namespace {

using device_core::AffineHeader;
using device_core::AffineRange;

constexpr unsigned kThreads = 256;
constexpr unsigned kWarpsPerCta = kThreads / 32;

template <class T>
__global__ void affine_encode_kernel(const T* src, size_t count, uint32_t block, size_t blocks,
                                     size_t full_block_bytes, bool four_bit, uint8_t flip, uint8_t* dst) {
  const unsigned lane = threadIdx.x % 32;
  const size_t warps = size_t{gridDim.x} * kWarpsPerCta;
  const T levels = four_bit ? T(15) : T(255);
  for (size_t b = size_t{blockIdx.x} * kWarpsPerCta + threadIdx.x / 32; b < blocks; b += warps) {
    const size_t begin = b * block;
    const size_t n = count - begin < block ? count - begin : block;
    const T* x = src + begin;
    AffineRange<T> range = AffineRange<T>::empty();
    for (size_t i = lane; i < n; i += 32) range.fold(x[i]);
    for (int offset = 16; offset > 0; offset /= 2) {
      range.merge({__shfl_xor_sync(0xffffffffu, range.lo, offset), __shfl_xor_sync(0xffffffffu, range.hi, offset)});
    }
    const AffineHeader<T> header = device_core::affine_header(range, levels);
    uint8_t* out = dst + b * full_block_bytes;
    if (lane < 2 * sizeof(T)) {  // T min | T scale, little-endian
      const auto bits = device_core::bits_of(lane < sizeof(T) ? header.min : header.scale);
      out[lane] = static_cast<uint8_t>(bits >> (8 * (lane % sizeof(T))));
    }
    uint8_t* codes = out + 2 * sizeof(T);
    const size_t code_bytes = device_core::affine_code_bytes(four_bit, n);
    if (header.zero_codes()) {
      for (size_t k = lane; k < code_bytes; k += 32) codes[k] = 0;
    } else {
      for (size_t k = lane; k < code_bytes; k += 32) {
        codes[k] = device_core::affine_code_byte(x, n, k, header, four_bit, flip);
      }
    }
  }
}

}  // namespace

template <class T>
Status quant_encode(QuantSpec spec, const T* src_device, size_t count, uint8_t* dst_device, void* stream) {
  if (spec.kind != Quant::u8 && spec.kind != Quant::i8 && spec.kind != Quant::u4) {
    return Status::failure(Errc::invalid_argument, "device quant_encode: mode " + std::string(quant_name(spec.kind)) +
                                                       " is not on the device (u8, i8, u4 are)");
  }
  if (!quant_spec_valid(spec)) {
    return Status::failure(Errc::invalid_argument,
                           "device quant_encode: block " + std::to_string(spec.block) + " is outside 1..65536");
  }
  if (count == 0) return Status::success();
  const bool four_bit = spec.kind == Quant::u4;
  const size_t blocks = (count + spec.block - 1) / spec.block;
  const size_t full_block_bytes = 2 * sizeof(T) + device_core::affine_code_bytes(four_bit, spec.block);
  affine_encode_kernel<T><<<grid_for(kWarpsPerCta, blocks), kThreads, 0, static_cast<cudaStream_t>(stream)>>>(
      src_device, count, spec.block, blocks, full_block_bytes, four_bit,
      spec.kind == Quant::i8 ? uint8_t{0x80} : uint8_t{0}, dst_device);
  return launch_status("device quant_encode");
}

template Status quant_encode<float>(QuantSpec, const float*, size_t, uint8_t*, void*);
template Status quant_encode<double>(QuantSpec, const double*, size_t, uint8_t*, void*);

}  // namespace ferry::device
