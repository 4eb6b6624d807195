// The integer-domain encoders of int_quant.h (i8h, i4h, round to nearest or
// stochastic), written once for the CPU and the device (host_device.h): the
// scale rule, the clamp and the rounding in the order int_quant.cpp
// (block_scale, encode_run) evaluates them, and its counter-based generator,
// so an element's code is the same on both. Compiled for the device without
// FMA contraction and with IEEE division (see affine_quant_core.h).
#pragma once

#include <cstddef>
#include <cstdint>

#include "cuda/host_device.h"

namespace ferry::device_core {

// int_quant.cpp's splitmix: splitmix64's finalizer over a Weyl sequence.
FERRY_HD uint64_t splitmix(uint64_t key, uint64_t index) {
  uint64_t z = key + 0x9e3779b97f4a7c15u * (index + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
  return z ^ (z >> 31);
}

// The magnitude bits of a block's |x| maximum so far: fold each element's
// magnitude in with an unsigned max, then absmax_value() maps anything at or
// above +inf (NaN, inf) to +inf (int_quant_absmax).
template <class T>
FERRY_HD typename FloatTraits<T>::Bits magnitude_bits(T x) {
  return bits_of(x) & FloatTraits<T>::kMagnitude;
}
template <class T>
FERRY_HD T absmax_value(typename FloatTraits<T>::Bits m) {
  return float_of(m >= FloatTraits<T>::kInf ? FloatTraits<T>::kInf : m);
}

template <class T>
struct IntBlockScale {
  enum Kind { zero, nonfinite, normal, subnormal } kind;
  T scale;    // s = A / L
  T inverse;  // L / A, for kind normal
};

template <class T>
FERRY_HD IntBlockScale<T> int_block_scale(T absmax, int32_t levels) {
  const auto bits = bits_of(absmax);
  if (bits >= FloatTraits<T>::kInf) return {IntBlockScale<T>::nonfinite, T(0), T(0)};
  if (bits == 0) return {IntBlockScale<T>::zero, T(0), T(0)};
  const T L = static_cast<T>(levels);
  const T s = absmax / L;
  if (s >= FloatTraits<T>::kMinNormal) return {IntBlockScale<T>::normal, s, L / absmax};
  return {IntBlockScale<T>::subnormal, s, T(0)};
}

// The code of element x with global index `index` (stochastic: stream is
// int_quant's stream key, splitmix(seed, contributor)).
template <class T>
FERRY_HD int32_t int_code(IntBlockScale<T> bs, int32_t levels, bool stochastic, uint64_t stream, T x,
                          uint64_t index) {
  if (bs.kind == IntBlockScale<T>::zero || bs.kind == IntBlockScale<T>::nonfinite) return 0;
  const T L = static_cast<T>(levels);
  T t = bs.kind == IntBlockScale<T>::normal ? x * bs.inverse : x / bs.scale;
  t = t >= -L ? t : -L;  // NaN goes to -L, as on the CPU
  t = t <= L ? t : L;
  if (!stochastic) return static_cast<int32_t>(round_even(t));
  constexpr int kBits = FloatTraits<T>::kDigits;
  constexpr T kUnit = static_cast<T>(uint64_t{1} << kBits);
  const T random = static_cast<T>(splitmix(stream, index) >> (64 - kBits));
  const T nearest = round_even(t);
  const T r = (t - nearest) * kUnit;  // exact
  const T up = random < r ? T(1) : T(0);
  const T down = random < -r ? T(1) : T(0);
  return static_cast<int32_t>(nearest + up - down);
}

// Byte k of a partial of one contribution, packed at w(1) = b bits: i8h one
// code a byte, i4h two (element 2k in the low nibble; the last byte of an odd
// count has a zero high nibble). code(i) gives element i's code.
template <class Code>
FERRY_HD uint8_t int_packed_byte(bool four_bit, size_t count, size_t k, Code code) {
  if (!four_bit) return static_cast<uint8_t>(code(k));
  const auto low = static_cast<uint32_t>(code(2 * k)) & 0xfu;
  const uint32_t high = 2 * k + 1 < count ? static_cast<uint32_t>(code(2 * k + 1)) & 0xfu : 0u;
  return static_cast<uint8_t>(low | high << 4);
}

}  // namespace ferry::device_core
