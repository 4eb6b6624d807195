// Block kernels of the u8/i8/u4 codecs, one set per instruction-set path, and
// the chunk drivers with the path chosen by the caller. Internal to core/:
// quant.h is the interface; this exists so that the tests and the
// microbenchmarks can run every compiled path on the same input and compare
// bytes (they must be identical: the scalar functions are the definition).
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "core/error.h"
#include "core/quant.h"

namespace ferry::quant_detail {

enum class QuantPath : uint8_t { scalar = 0, avx2 = 1, avx512 = 2 };

std::string_view quant_path_name(QuantPath path);

// The paths this build compiled in, scalar first, the one quant.h uses last.
std::span<const QuantPath> quant_paths();

template <class T>
struct BlockRange {
  T min;
  T max;
};

// Every kernel takes n >= 1 elements of one block.
template <class T>
struct QuantKernels {
  // The least and greatest element in the total order of T's bits:
  // -NaN < -inf < ... < -0 < +0 < ... < +inf < +NaN. So the block is finite
  // exactly when both ends are.
  BlockRange<T> (*range)(const T* x, size_t n);
  // codes[i] = q(x[i]) ^ flip, one byte per element (u8: flip 0, i8: 0x80).
  // Requires finite x, min and scale > 0 (see quant.h).
  void (*quantize8)(const T* x, size_t n, T min, T scale, uint8_t flip, uint8_t* codes);
  // Two codes per byte, low nibble first; an odd n leaves the last high nibble 0.
  void (*quantize4)(const T* x, size_t n, T min, T scale, uint8_t* codes);
  // out[i] = (min + T(codes[i] ^ flip) * scale) [+ local[i] when local is not
  // null]. out may alias local exactly.
  void (*dequantize8)(const uint8_t* codes, size_t n, T min, T scale, uint8_t flip, const T* local, T* out);
  void (*dequantize4)(const uint8_t* codes, size_t n, T min, T scale, const T* local, T* out);
};

// Throws std::invalid_argument for a path this build lacks.
template <class T>
const QuantKernels<T>& quant_kernels(QuantPath path);

template <class T>
const QuantKernels<T>& scalar_quant_kernels();
#if defined(__AVX2__)
template <class T>
const QuantKernels<T>& avx2_quant_kernels();
#endif
#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VL__)
#define FERRY_QUANT_AVX512 1
template <class T>
const QuantKernels<T>& avx512_quant_kernels();
#endif

// quant.h's functions with the kernel path chosen (the public ones use
// quant_paths().back()). f16/bf16 take no kernels and ignore path.
template <class T>
void encode_with(QuantPath path, QuantSpec spec, const T* src, size_t count, uint8_t* dst);
template <class T>
Status decode_with(QuantPath path, QuantSpec spec, const uint8_t* src, size_t bytes, size_t count,
                   const T* local, T* dst);
template <class T>
Status decode_add_encode_with(QuantPath path, QuantSpec spec, const uint8_t* in, size_t in_bytes, const T* local,
                              size_t count, uint8_t* out);

}  // namespace ferry::quant_detail
