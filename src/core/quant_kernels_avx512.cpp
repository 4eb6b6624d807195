// AVX-512 (F, BW, VL) block kernels: 16 floats or 8 doubles a vector, and the
// block's last partial vector under a mask, so no block leaves this path.
// Each step is the scalar kernel's IEEE operation (same operand order, no
// FMA) on more lanes, with the conversion's rounding given in the instruction
// (nearest-even, as the scalar nearbyint under the default MXCSR), so the
// bytes are the scalar path's: the unit tests compare them on random blocks.
#include "core/quant_vector_kernels.h"

#if defined(FERRY_QUANT_AVX512)

// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*(), a
// self-initialised variable that -W(maybe-)uninitialized reports once inlined
// (GCC bug 105593, fixed in 13).
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>

#include <bit>
#include <cstring>

namespace ferry::quant_detail {
namespace {

constexpr int kNearestEven = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;

__mmask16 first16(size_t k) { return static_cast<__mmask16>((1u << k) - 1u); }  // k <= 16
__mmask8 first8(size_t k) { return static_cast<__mmask8>((1u << k) - 1u); }     // k <= 8

// The total order of QuantKernels::range as signed integers (see the scalar
// kernels); its own inverse.
int32_t order_key(int32_t bits) { return bits ^ ((bits >> 31) & 0x7fffffff); }
int64_t order_key(int64_t bits) { return bits ^ ((bits >> 63) & 0x7fffffffffffffff); }
__m512i order_key32(__m512i bits) {
  return _mm512_xor_si512(bits, _mm512_and_si512(_mm512_srai_epi32(bits, 31), _mm512_set1_epi32(0x7fffffff)));
}
__m512i order_key64(__m512i bits) {
  return _mm512_xor_si512(bits,
                          _mm512_and_si512(_mm512_srai_epi64(bits, 63), _mm512_set1_epi64(0x7fffffffffffffff)));
}

// ---- float: 16 lanes

// min and max are idempotent, so the last vector may overlap the one before
// it, and a block shorter than a vector pads with its first element.
BlockRange<float> range_f32(const float* x, size_t n) {
  __m512i lo;
  __m512i hi;
  if (n < 16) {
    lo = hi = order_key32(_mm512_mask_loadu_epi32(_mm512_set1_epi32(std::bit_cast<int32_t>(x[0])), first16(n), x));
  } else {
    lo = hi = order_key32(_mm512_loadu_si512(x));
    __m512i lo2 = lo;
    __m512i hi2 = hi;
    size_t i = 16;
    for (; i + 32 <= n; i += 32) {
      const __m512i a = order_key32(_mm512_loadu_si512(x + i));
      const __m512i b = order_key32(_mm512_loadu_si512(x + i + 16));
      lo = _mm512_min_epi32(lo, a);
      hi = _mm512_max_epi32(hi, a);
      lo2 = _mm512_min_epi32(lo2, b);
      hi2 = _mm512_max_epi32(hi2, b);
    }
    if (i < n) {
      const __m512i a = order_key32(_mm512_loadu_si512(x + (i + 16 <= n ? i : n - 16)));
      lo = _mm512_min_epi32(lo, a);
      hi = _mm512_max_epi32(hi, a);
      if (i + 16 < n) {
        const __m512i b = order_key32(_mm512_loadu_si512(x + n - 16));
        lo2 = _mm512_min_epi32(lo2, b);
        hi2 = _mm512_max_epi32(hi2, b);
      }
    }
    lo = _mm512_min_epi32(lo, lo2);
    hi = _mm512_max_epi32(hi, hi2);
  }
  return {std::bit_cast<float>(order_key(_mm512_reduce_min_epi32(lo))),
          std::bit_cast<float>(order_key(_mm512_reduce_max_epi32(hi)))};
}

// q = roundTiesToEven(clamp((x - min) / scale, 0, levels)), as int32 lanes.
struct CodesF32 {
  __m512 min;
  __m512 scale;
  __m512 levels;
  __m512i operator()(__m512 x) const {
    __m512 t = _mm512_div_ps(_mm512_sub_ps(x, min), scale);
    t = _mm512_min_ps(_mm512_max_ps(t, _mm512_setzero_ps()), levels);
    return _mm512_cvt_roundps_epi32(t, kNearestEven);
  }
};

void quantize8_f32(const float* x, size_t n, float min, float scale, uint8_t flip, uint8_t* codes) {
  const CodesF32 codes_of{_mm512_set1_ps(min), _mm512_set1_ps(scale), _mm512_set1_ps(255.0f)};
  const __m512i vflip = _mm512_set1_epi32(flip);
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512i q = _mm512_xor_si512(codes_of(_mm512_loadu_ps(x + i)), vflip);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(codes + i), _mm512_cvtepi32_epi8(q));
  }
  if (i < n) {
    const __mmask16 m = first16(n - i);
    const __m512i q = _mm512_xor_si512(codes_of(_mm512_maskz_loadu_ps(m, x + i)), vflip);
    _mm512_mask_cvtepi32_storeu_epi8(codes + i, m, q);
  }
}

// 16 codes (int32 lanes) -> 8 bytes in the low bytes of the 64-bit lanes:
// each 64-bit lane holds codes 2k (low) and 2k+1 (high), and q_hi << 4 lands
// on bit 4 when the lane shifts right by 28.
__m512i pair_nibbles(__m512i q) { return _mm512_or_si512(q, _mm512_srli_epi64(q, 28)); }

void quantize4_f32(const float* x, size_t n, float min, float scale, uint8_t* codes) {
  const CodesF32 codes_of{_mm512_set1_ps(min), _mm512_set1_ps(scale), _mm512_set1_ps(15.0f)};
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512i pairs = pair_nibbles(codes_of(_mm512_loadu_ps(x + i)));
    _mm_storel_epi64(reinterpret_cast<__m128i*>(codes + i / 2), _mm512_cvtepi64_epi8(pairs));
  }
  if (i < n) {
    const __mmask16 m = first16(n - i);
    // Lanes past the end code 0, so an odd block's padding nibble is 0.
    const __m512i q = _mm512_maskz_mov_epi32(m, codes_of(_mm512_maskz_loadu_ps(m, x + i)));
    _mm512_mask_cvtepi64_storeu_epi8(codes + i / 2, first8((n - i + 1) / 2), pair_nibbles(q));
  }
}

// min + float(q) * scale [+ local]
template <bool Add>
__m512 values_f32(__m512i q, __m512 min, __m512 scale, __m512 local) {
  __m512 v = _mm512_add_ps(min, _mm512_mul_ps(_mm512_cvtepi32_ps(q), scale));
  if constexpr (Add) v = _mm512_add_ps(v, local);
  return v;
}

template <bool Add>
void dequantize8_f32(const uint8_t* codes, size_t n, float min, float scale, uint8_t flip, const float* local,
                     float* out) {
  const __m512 vmin = _mm512_set1_ps(min);
  const __m512 vscale = _mm512_set1_ps(scale);
  const __m128i vflip = _mm_set1_epi8(static_cast<char>(flip));
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m128i b = _mm_xor_si128(_mm_loadu_si128(reinterpret_cast<const __m128i*>(codes + i)), vflip);
    const __m512 l = Add ? _mm512_loadu_ps(local + i) : _mm512_setzero_ps();
    _mm512_storeu_ps(out + i, values_f32<Add>(_mm512_cvtepu8_epi32(b), vmin, vscale, l));
  }
  if (i < n) {
    const __mmask16 m = first16(n - i);
    const __m128i b = _mm_xor_si128(_mm_maskz_loadu_epi8(m, codes + i), vflip);
    const __m512 l = Add ? _mm512_maskz_loadu_ps(m, local + i) : _mm512_setzero_ps();
    _mm512_mask_storeu_ps(out + i, m, values_f32<Add>(_mm512_cvtepu8_epi32(b), vmin, vscale, l));
  }
}

// 8 bytes, widened to 64-bit lanes -> 16 codes as int32 lanes, low nibble first.
__m512i unpack_nibbles16(__m128i bytes) {
  const __m512i w = _mm512_cvtepu8_epi64(bytes);
  return _mm512_and_si512(_mm512_or_si512(w, _mm512_slli_epi64(w, 28)), _mm512_set1_epi64(0x0000000f0000000f));
}

template <bool Add>
void dequantize4_f32(const uint8_t* codes, size_t n, float min, float scale, const float* local, float* out) {
  const __m512 vmin = _mm512_set1_ps(min);
  const __m512 vscale = _mm512_set1_ps(scale);
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m128i b = _mm_loadl_epi64(reinterpret_cast<const __m128i*>(codes + i / 2));
    const __m512 l = Add ? _mm512_loadu_ps(local + i) : _mm512_setzero_ps();
    _mm512_storeu_ps(out + i, values_f32<Add>(unpack_nibbles16(b), vmin, vscale, l));
  }
  if (i < n) {
    const __mmask16 m = first16(n - i);
    const __m128i b = _mm_maskz_loadu_epi8(first16((n - i + 1) / 2), codes + i / 2);
    const __m512 l = Add ? _mm512_maskz_loadu_ps(m, local + i) : _mm512_setzero_ps();
    _mm512_mask_storeu_ps(out + i, m, values_f32<Add>(unpack_nibbles16(b), vmin, vscale, l));
  }
}

// ---- double: 8 lanes

BlockRange<double> range_f64(const double* x, size_t n) {
  __m512i lo;
  __m512i hi;
  if (n < 8) {
    lo = hi = order_key64(_mm512_mask_loadu_epi64(_mm512_set1_epi64(std::bit_cast<int64_t>(x[0])), first8(n), x));
  } else {
    lo = hi = order_key64(_mm512_loadu_si512(x));
    size_t i = 8;
    for (; i + 8 <= n; i += 8) {
      const __m512i a = order_key64(_mm512_loadu_si512(x + i));
      lo = _mm512_min_epi64(lo, a);
      hi = _mm512_max_epi64(hi, a);
    }
    if (i < n) {
      const __m512i a = order_key64(_mm512_loadu_si512(x + n - 8));
      lo = _mm512_min_epi64(lo, a);
      hi = _mm512_max_epi64(hi, a);
    }
  }
  return {std::bit_cast<double>(order_key(static_cast<int64_t>(_mm512_reduce_min_epi64(lo)))),
          std::bit_cast<double>(order_key(static_cast<int64_t>(_mm512_reduce_max_epi64(hi))))};
}

struct CodesF64 {
  __m512d min;
  __m512d scale;
  __m512d levels;
  __m256i operator()(__m512d x) const {
    __m512d t = _mm512_div_pd(_mm512_sub_pd(x, min), scale);
    t = _mm512_min_pd(_mm512_max_pd(t, _mm512_setzero_pd()), levels);
    return _mm512_cvt_roundpd_epi32(t, kNearestEven);
  }
};

void quantize8_f64(const double* x, size_t n, double min, double scale, uint8_t flip, uint8_t* codes) {
  const CodesF64 codes_of{_mm512_set1_pd(min), _mm512_set1_pd(scale), _mm512_set1_pd(255.0)};
  const __m256i vflip = _mm256_set1_epi32(flip);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i q = _mm256_xor_si256(codes_of(_mm512_loadu_pd(x + i)), vflip);
    _mm_storel_epi64(reinterpret_cast<__m128i*>(codes + i), _mm256_cvtepi32_epi8(q));
  }
  if (i < n) {
    const __mmask8 m = first8(n - i);
    const __m256i q = _mm256_xor_si256(codes_of(_mm512_maskz_loadu_pd(m, x + i)), vflip);
    _mm256_mask_cvtepi32_storeu_epi8(codes + i, m, q);
  }
}

void quantize4_f64(const double* x, size_t n, double min, double scale, uint8_t* codes) {
  const CodesF64 codes_of{_mm512_set1_pd(min), _mm512_set1_pd(scale), _mm512_set1_pd(15.0)};
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i q = codes_of(_mm512_loadu_pd(x + i));
    _mm256_mask_cvtepi64_storeu_epi8(codes + i / 2, 0xf, _mm256_or_si256(q, _mm256_srli_epi64(q, 28)));
  }
  if (i < n) {
    const __mmask8 m = first8(n - i);
    const __m256i q = _mm256_maskz_mov_epi32(m, codes_of(_mm512_maskz_loadu_pd(m, x + i)));
    _mm256_mask_cvtepi64_storeu_epi8(codes + i / 2, first8((n - i + 1) / 2),
                                     _mm256_or_si256(q, _mm256_srli_epi64(q, 28)));
  }
}

template <bool Add>
__m512d values_f64(__m256i q, __m512d min, __m512d scale, __m512d local) {
  __m512d v = _mm512_add_pd(min, _mm512_mul_pd(_mm512_cvtepi32_pd(q), scale));
  if constexpr (Add) v = _mm512_add_pd(v, local);
  return v;
}

template <bool Add>
void dequantize8_f64(const uint8_t* codes, size_t n, double min, double scale, uint8_t flip, const double* local,
                     double* out) {
  const __m512d vmin = _mm512_set1_pd(min);
  const __m512d vscale = _mm512_set1_pd(scale);
  const __m128i vflip = _mm_set1_epi8(static_cast<char>(flip));
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m128i b = _mm_xor_si128(_mm_loadl_epi64(reinterpret_cast<const __m128i*>(codes + i)), vflip);
    const __m512d l = Add ? _mm512_loadu_pd(local + i) : _mm512_setzero_pd();
    _mm512_storeu_pd(out + i, values_f64<Add>(_mm256_cvtepu8_epi32(b), vmin, vscale, l));
  }
  if (i < n) {
    const __mmask8 m = first8(n - i);
    const __m128i b = _mm_xor_si128(_mm_maskz_loadu_epi8(m, codes + i), vflip);
    const __m512d l = Add ? _mm512_maskz_loadu_pd(m, local + i) : _mm512_setzero_pd();
    _mm512_mask_storeu_pd(out + i, m, values_f64<Add>(_mm256_cvtepu8_epi32(b), vmin, vscale, l));
  }
}

// 4 bytes -> 8 codes as int32 lanes, low nibble first.
__m256i unpack_nibbles8(__m128i bytes) {
  const __m256i w = _mm256_cvtepu8_epi64(bytes);
  return _mm256_and_si256(_mm256_or_si256(w, _mm256_slli_epi64(w, 28)), _mm256_set1_epi64x(0x0000000f0000000f));
}

template <bool Add>
void dequantize4_f64(const uint8_t* codes, size_t n, double min, double scale, const double* local,
                     double* out) {
  const __m512d vmin = _mm512_set1_pd(min);
  const __m512d vscale = _mm512_set1_pd(scale);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    int32_t four = 0;
    std::memcpy(&four, codes + i / 2, sizeof four);
    const __m512d l = Add ? _mm512_loadu_pd(local + i) : _mm512_setzero_pd();
    _mm512_storeu_pd(out + i, values_f64<Add>(unpack_nibbles8(_mm_cvtsi32_si128(four)), vmin, vscale, l));
  }
  if (i < n) {
    const __mmask8 m = first8(n - i);
    const __m128i b = _mm_maskz_loadu_epi8(first16((n - i + 1) / 2), codes + i / 2);
    const __m512d l = Add ? _mm512_maskz_loadu_pd(m, local + i) : _mm512_setzero_pd();
    _mm512_mask_storeu_pd(out + i, m, values_f64<Add>(unpack_nibbles8(b), vmin, vscale, l));
  }
}

}  // namespace

template <>
const QuantKernels<float>& avx512_quant_kernels<float>() {
  return kVectorQuantKernels<float, range_f32, quantize8_f32, quantize4_f32, dequantize8_f32<false>,
                             dequantize8_f32<true>, dequantize4_f32<false>, dequantize4_f32<true>>;
}

template <>
const QuantKernels<double>& avx512_quant_kernels<double>() {
  return kVectorQuantKernels<double, range_f64, quantize8_f64, quantize4_f64, dequantize8_f64<false>,
                             dequantize8_f64<true>, dequantize4_f64<false>, dequantize4_f64<true>>;
}

}  // namespace ferry::quant_detail

#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic pop
#endif

#endif  // FERRY_QUANT_AVX512
