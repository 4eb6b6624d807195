// The table of a vector path (AVX2, AVX-512), the same for every path: its
// range and quantize kernels as they are, and each dequantize kernel compiled
// twice, without and with the add of `local`, so that no vector loop tests for
// the add; the table's entry picks the one for the block by whether local is
// null. Internal to core/: included by the vector paths' .cpp files only.
#pragma once

#include "core/quant_kernels.h"

namespace ferry::quant_detail {

template <class T>
using Dequantize8Kernel = decltype(QuantKernels<T>::dequantize8);
template <class T>
using Dequantize4Kernel = decltype(QuantKernels<T>::dequantize4);

template <class T, Dequantize8Kernel<T> Plain, Dequantize8Kernel<T> Add>
void dequantize8_picking_add(const uint8_t* codes, size_t n, T min, T scale, uint8_t flip, const T* local, T* out) {
  if (local == nullptr) return Plain(codes, n, min, scale, flip, local, out);
  Add(codes, n, min, scale, flip, local, out);
}

template <class T, Dequantize4Kernel<T> Plain, Dequantize4Kernel<T> Add>
void dequantize4_picking_add(const uint8_t* codes, size_t n, T min, T scale, const T* local, T* out) {
  if (local == nullptr) return Plain(codes, n, min, scale, local, out);
  Add(codes, n, min, scale, local, out);
}

// One path's table for T: each dequantize kernel comes as its pair, plain then
// with the add.
template <class T, decltype(QuantKernels<T>::range) Range, decltype(QuantKernels<T>::quantize8) Quantize8,
          decltype(QuantKernels<T>::quantize4) Quantize4, Dequantize8Kernel<T> Dequantize8,
          Dequantize8Kernel<T> Dequantize8Add, Dequantize4Kernel<T> Dequantize4, Dequantize4Kernel<T> Dequantize4Add>
inline constexpr QuantKernels<T> kVectorQuantKernels = {
    Range,
    Quantize8,
    Quantize4,
    dequantize8_picking_add<T, Dequantize8, Dequantize8Add>,
    dequantize4_picking_add<T, Dequantize4, Dequantize4Add>,
};

}  // namespace ferry::quant_detail
