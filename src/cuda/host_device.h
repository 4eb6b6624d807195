// What lets one function body run on the CPU and on a CUDA device: the cores
// of the device codecs (xxh3_core.h, affine_quant_core.h, int_quant_core.h)
// are plain C++ to the host compiler, so the CPU unit tests run the very code
// the kernels run, against ferry's CPU codecs, on machines without a GPU.
// Internal to src/cuda/ and its tests.
#pragma once

#include <cstdint>
#include <cstring>

#if defined(__CUDACC__)
#define FERRY_HD __host__ __device__ inline
#else
#define FERRY_HD inline
#endif

namespace ferry::device_core {

// Bit casts that work in both worlds (std::bit_cast is not a device function).
FERRY_HD uint32_t bits_of(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x);
#else
  uint32_t b;
  std::memcpy(&b, &x, 4);
  return b;
#endif
}
FERRY_HD uint64_t bits_of(double x) {
#if defined(__CUDA_ARCH__)
  return static_cast<uint64_t>(__double_as_longlong(x));
#else
  uint64_t b;
  std::memcpy(&b, &x, 8);
  return b;
#endif
}
FERRY_HD float float_of(uint32_t b) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(b);
#else
  float x;
  std::memcpy(&x, &b, 4);
  return x;
#endif
}
FERRY_HD double float_of(uint64_t b) {
#if defined(__CUDA_ARCH__)
  return __longlong_as_double(static_cast<long long>(b));
#else
  double x;
  std::memcpy(&x, &b, 8);
  return x;
#endif
}

// Finite: the exponent is not all ones (no library call, the same on both sides).
FERRY_HD bool is_finite(float x) { return (bits_of(x) & 0x7f800000u) != 0x7f800000u; }
FERRY_HD bool is_finite(double x) { return (bits_of(x) & 0x7ff0000000000000u) != 0x7ff0000000000000u; }
FERRY_HD bool is_nan(float x) { return (bits_of(x) & 0x7fffffffu) > 0x7f800000u; }
FERRY_HD bool is_nan(double x) { return (bits_of(x) & 0x7fffffffffffffffu) > 0x7ff0000000000000u; }

// roundTiesToEven in the default rounding mode: what std::nearbyint does on
// the CPU under the codecs' default floating-point environment.
FERRY_HD float round_even(float x) {
#if defined(__CUDA_ARCH__)
  return rintf(x);
#else
  return __builtin_nearbyintf(x);
#endif
}
FERRY_HD double round_even(double x) {
#if defined(__CUDA_ARCH__)
  return rint(x);
#else
  return __builtin_nearbyint(x);
#endif
}

template <class T>
struct FloatTraits;
template <>
struct FloatTraits<float> {
  using Bits = uint32_t;
  using Key = int32_t;
  static constexpr Bits kInf = 0x7f800000u;
  static constexpr Bits kMagnitude = 0x7fffffffu;
  static constexpr Bits kQuietNan = 0x7fc00000u;
  static constexpr int kDigits = 24;
  static constexpr float kMinNormal = 1.17549435e-38f;
};
template <>
struct FloatTraits<double> {
  using Bits = uint64_t;
  using Key = int64_t;
  static constexpr Bits kInf = 0x7ff0000000000000u;
  static constexpr Bits kMagnitude = 0x7fffffffffffffffu;
  static constexpr Bits kQuietNan = 0x7ff8000000000000u;
  static constexpr int kDigits = 53;
  static constexpr double kMinNormal = 2.2250738585072014e-308;
};

}  // namespace ferry::device_core
