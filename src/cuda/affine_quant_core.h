// The u8 / i8 / u4 block encoder of quant.h, written once for the CPU and the
// device (host_device.h): every line is the formula of quant.h's wire spec,
// in the order quant.cpp (AffineCodec::encode_block) and
// quant_kernels_scalar.cpp evaluate it, so the bytes are the same. The device
// must compile this without FMA contraction (--fmad=false), with IEEE division
// and denormals kept (no --use_fast_math): min + L * scale is two roundings on
// the CPU (-ffp-contract=off), and must be on the device.
//
// How a kernel uses it: the lanes of a warp each fold a strided part of the
// block into an AffineRange, the warp combines them (min/max of integer keys:
// any order gives the same ends), affine_header() decides (min, scale) once,
// and each lane writes the codes of its elements with affine_code().
#pragma once

#include <cstddef>
#include <cstdint>

#include "cuda/host_device.h"

namespace ferry::device_core {

// T's bits as a signed integer in the total order -NaN < -inf < ... < -0 <
// +0 < ... < +inf < +NaN (quant_kernels.h's range); its own inverse.
template <class T>
FERRY_HD typename FloatTraits<T>::Key order_key(T x) {
  using Key = typename FloatTraits<T>::Key;
  const auto bits = static_cast<Key>(bits_of(x));
  constexpr Key kMagnitude = static_cast<Key>(FloatTraits<T>::kMagnitude);
  return bits ^ ((bits >> (sizeof(T) * 8 - 1)) & kMagnitude);
}

template <class T>
FERRY_HD T from_order_key(typename FloatTraits<T>::Key key) {
  using Key = typename FloatTraits<T>::Key;
  constexpr Key kMagnitude = static_cast<Key>(FloatTraits<T>::kMagnitude);
  return float_of(static_cast<typename FloatTraits<T>::Bits>(key ^ ((key >> (sizeof(T) * 8 - 1)) & kMagnitude)));
}

// A partial range in key space; empty() until an element is folded in.
template <class T>
struct AffineRange {
  using Key = typename FloatTraits<T>::Key;
  Key lo;
  Key hi;

  FERRY_HD static AffineRange empty() {
    constexpr Key kMax = static_cast<Key>(~typename FloatTraits<T>::Bits{0} >> 1);
    return {kMax, static_cast<Key>(-kMax - 1)};
  }
  FERRY_HD void fold(T x) {
    const Key k = order_key(x);
    lo = k < lo ? k : lo;
    hi = k > hi ? k : hi;
  }
  FERRY_HD void merge(AffineRange other) {
    lo = other.lo < lo ? other.lo : lo;
    hi = other.hi > hi ? other.hi : hi;
  }
};

template <class T>
struct AffineHeader {
  T min;
  T scale;
  // Codes are all zero bytes: a constant block (scale 0) or the non-finite marker.
  FERRY_HD bool zero_codes() const { return is_nan(scale) || scale == T(0); }
};

// quant.cpp's encode_block: the NaN marker unless the block is finite and
// min + L * scale is too.
template <class T>
FERRY_HD AffineHeader<T> affine_header(AffineRange<T> range, T levels) {
  const T lo = from_order_key<T>(range.lo);
  const T hi = from_order_key<T>(range.hi);
  const T nan = float_of(FloatTraits<T>::kQuietNan);
  AffineHeader<T> h{nan, nan};
  if (is_finite(lo) && is_finite(hi)) {
    const T s = (hi - lo) / levels;
    const T top_step = levels * s;  // a separate rounding: no FMA may fuse it into the sum
    if (is_finite(lo + top_step)) h = {lo, s};
  }
  return h;
}

// roundTiesToEven(clamp((x - min) / scale, 0, L)) for a header with nonzero codes.
template <class T>
FERRY_HD uint32_t affine_code(T x, T min, T scale, T levels) {
  T t = (x - min) / scale;
  t = t > T(0) ? t : T(0);
  t = t < levels ? t : levels;
  return static_cast<uint32_t>(round_even(t));
}

// Code bytes of a block of n elements (u4: two codes a byte, low nibble first).
FERRY_HD size_t affine_code_bytes(bool four_bit, size_t n) { return four_bit ? (n + 1) / 2 : n; }

// Code byte k of a block x[0..n) with a header whose codes are not all zero:
// u8 / i8 (flip 0 / 0x80) code k, or u4 codes 2k and 2k+1 (an odd block's last
// high nibble 0).
template <class T>
FERRY_HD uint8_t affine_code_byte(const T* x, size_t n, size_t k, AffineHeader<T> h, bool four_bit, uint8_t flip) {
  if (!four_bit) return static_cast<uint8_t>(affine_code(x[k], h.min, h.scale, T(255)) ^ flip);
  const uint32_t low = affine_code(x[2 * k], h.min, h.scale, T(15));
  const uint32_t high = 2 * k + 1 < n ? affine_code(x[2 * k + 1], h.min, h.scale, T(15)) : 0u;
  return static_cast<uint8_t>(low | high << 4);
}

}  // namespace ferry::device_core
