// The block kernels, one element at a time: the definition the vector paths
// must match bit for bit. Each line is the formula of quant.h's wire spec.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "core/quant_kernels.h"

namespace ferry::quant_detail {
namespace {

template <class T>
using KeyInt = std::conditional_t<sizeof(T) == 4, int32_t, int64_t>;

// Maps T's bits to a signed integer whose order is the total order of
// QuantKernels::range: negative floats have their magnitude bits flipped, so
// more negative means smaller. It is its own inverse.
template <class T>
KeyInt<T> order_key(KeyInt<T> bits) {
  constexpr KeyInt<T> kMagnitude = std::numeric_limits<KeyInt<T>>::max();
  return bits ^ ((bits >> (sizeof(T) * 8 - 1)) & kMagnitude);
}

template <class T>
BlockRange<T> range(const T* x, size_t n) {
  KeyInt<T> lo = order_key<T>(std::bit_cast<KeyInt<T>>(x[0]));
  KeyInt<T> hi = lo;
  for (size_t i = 1; i < n; ++i) {
    const KeyInt<T> key = order_key<T>(std::bit_cast<KeyInt<T>>(x[i]));
    lo = key < lo ? key : lo;
    hi = key > hi ? key : hi;
  }
  return {std::bit_cast<T>(order_key<T>(lo)), std::bit_cast<T>(order_key<T>(hi))};
}

// roundTiesToEven(clamp((x - min) / scale, 0, levels)); the caller's MXCSR is
// round-to-nearest (quant.cpp sees to it), which nearbyint follows.
template <class T>
uint32_t code(T x, T min, T scale, T levels) {
  T t = (x - min) / scale;
  t = t > T(0) ? t : T(0);
  t = t < levels ? t : levels;
  return static_cast<uint32_t>(std::nearbyint(t));
}

template <class T>
T value(uint32_t q, T min, T scale) {
  return min + static_cast<T>(q) * scale;
}

template <class T>
void quantize8(const T* x, size_t n, T min, T scale, uint8_t flip, uint8_t* codes) {
  for (size_t i = 0; i < n; ++i) codes[i] = static_cast<uint8_t>(code(x[i], min, scale, T(255)) ^ flip);
}

// Codes first, then pairs: two simple loops the compiler can vectorize.
template <class T>
void quantize4(const T* x, size_t n, T min, T scale, uint8_t* codes) {
  constexpr size_t kChunk = 256;
  uint8_t q[kChunk + 1];
  for (size_t begin = 0; begin < n; begin += kChunk) {
    const size_t m = std::min(kChunk, n - begin);
    for (size_t i = 0; i < m; ++i) q[i] = static_cast<uint8_t>(code(x[begin + i], min, scale, T(15)));
    q[m] = 0;  // an odd block's padding nibble
    uint8_t* out = codes + begin / 2;
    for (size_t k = 0; k < (m + 1) / 2; ++k) out[k] = static_cast<uint8_t>(q[2 * k] | q[2 * k + 1] << 4);
  }
}

template <class T>
void dequantize8(const uint8_t* codes, size_t n, T min, T scale, uint8_t flip, const T* local, T* out) {
  if (local == nullptr) {
    for (size_t i = 0; i < n; ++i) out[i] = value<T>(codes[i] ^ flip, min, scale);
  } else {
    for (size_t i = 0; i < n; ++i) out[i] = value<T>(codes[i] ^ flip, min, scale) + local[i];
  }
}

template <class T, bool Add>
void dequantize4_pairs(const uint8_t* codes, size_t n, T min, T scale, const T* local, T* out) {
  for (size_t k = 0; k < n / 2; ++k) {
    const T low = value<T>(codes[k] & 0xfu, min, scale);
    const T high = value<T>(static_cast<uint32_t>(codes[k] >> 4), min, scale);
    out[2 * k] = Add ? low + local[2 * k] : low;
    out[2 * k + 1] = Add ? high + local[2 * k + 1] : high;
  }
  if (n % 2 == 1) {
    const T last = value<T>(codes[n / 2] & 0xfu, min, scale);
    out[n - 1] = Add ? last + local[n - 1] : last;
  }
}

template <class T>
void dequantize4(const uint8_t* codes, size_t n, T min, T scale, const T* local, T* out) {
  if (local == nullptr) return dequantize4_pairs<T, false>(codes, n, min, scale, local, out);
  dequantize4_pairs<T, true>(codes, n, min, scale, local, out);
}

template <class T>
constexpr QuantKernels<T> kScalar = {range<T>, quantize8<T>, quantize4<T>, dequantize8<T>, dequantize4<T>};

}  // namespace

template <class T>
const QuantKernels<T>& scalar_quant_kernels() {
  return kScalar<T>;
}

template const QuantKernels<float>& scalar_quant_kernels<float>();
template const QuantKernels<double>& scalar_quant_kernels<double>();

}  // namespace ferry::quant_detail
