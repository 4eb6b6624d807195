// AVX2 block kernels, for x86 machines without AVX-512: 8 floats or 4
// doubles a vector, whole groups only; a block's remainder goes to the scalar
// kernels. Same IEEE operations in the same order as the scalar path, with
// rounding given in the instruction, so the same bytes (unit-tested).
#include "core/quant_vector_kernels.h"

#if defined(__AVX2__)

#include <immintrin.h>

#include <bit>
#include <cstring>

namespace ferry::quant_detail {
namespace {

constexpr int kNearestEven = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;

template <class T>
const QuantKernels<T>& scalar() {
  return scalar_quant_kernels<T>();
}

int32_t order_key(int32_t bits) { return bits ^ ((bits >> 31) & 0x7fffffff); }
int64_t order_key(int64_t bits) { return bits ^ ((bits >> 63) & 0x7fffffffffffffff); }
__m256i order_key32(__m256i bits) {
  return _mm256_xor_si256(bits, _mm256_and_si256(_mm256_srai_epi32(bits, 31), _mm256_set1_epi32(0x7fffffff)));
}
__m256i order_key64(__m256i bits) {
  const __m256i negative = _mm256_cmpgt_epi64(_mm256_setzero_si256(), bits);
  return _mm256_xor_si256(bits, _mm256_and_si256(negative, _mm256_set1_epi64x(0x7fffffffffffffff)));
}

// 8 bytes of a 64-bit load, or 4 of a 32-bit one, into the low lanes.
__m128i load8(const uint8_t* p) { return _mm_loadl_epi64(reinterpret_cast<const __m128i*>(p)); }
__m128i load4(const uint8_t* p) {
  int32_t four = 0;
  std::memcpy(&four, p, sizeof four);
  return _mm_cvtsi32_si128(four);
}

// 4 bytes -> 8 codes as int32 lanes, low nibble first: each byte in its own
// 64-bit lane, its high nibble shifted into the lane's upper half.
__m256i unpack_nibbles8(__m128i bytes) {
  const __m256i w = _mm256_cvtepu8_epi64(bytes);
  return _mm256_and_si256(_mm256_or_si256(w, _mm256_slli_epi64(w, 28)), _mm256_set1_epi64x(0x0000000f0000000f));
}

// 16 codes, one a byte, -> 8 bytes, two a byte, low nibble first, in the low half.
__m128i pack_nibbles(__m128i codes) {
  const __m128i pairs = _mm_and_si128(_mm_or_si128(codes, _mm_srli_epi16(codes, 4)), _mm_set1_epi16(0x00ff));
  return _mm_packus_epi16(pairs, pairs);
}

// ---- float: 8 lanes

// Horizontal min / max of the lanes, by halving.
int32_t lane_min(__m256i v) {
  __m128i m = _mm_min_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  m = _mm_min_epi32(m, _mm_shuffle_epi32(m, _MM_SHUFFLE(1, 0, 3, 2)));
  return _mm_cvtsi128_si32(_mm_min_epi32(m, _mm_shuffle_epi32(m, _MM_SHUFFLE(2, 3, 0, 1))));
}
int32_t lane_max(__m256i v) {
  __m128i m = _mm_max_epi32(_mm256_castsi256_si128(v), _mm256_extracti128_si256(v, 1));
  m = _mm_max_epi32(m, _mm_shuffle_epi32(m, _MM_SHUFFLE(1, 0, 3, 2)));
  return _mm_cvtsi128_si32(_mm_max_epi32(m, _mm_shuffle_epi32(m, _MM_SHUFFLE(2, 3, 0, 1))));
}

// min and max are idempotent: the last vector may overlap the one before it.
BlockRange<float> range_f32(const float* x, size_t n) {
  if (n < 8) return scalar<float>().range(x, n);
  const auto load = [x](size_t i) { return order_key32(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i))); };
  __m256i lo = load(0);
  __m256i hi = lo;
  __m256i lo2 = lo;
  __m256i hi2 = lo;
  size_t i = 8;
  for (; i + 16 <= n; i += 16) {
    const __m256i a = load(i);
    const __m256i b = load(i + 8);
    lo = _mm256_min_epi32(lo, a);
    hi = _mm256_max_epi32(hi, a);
    lo2 = _mm256_min_epi32(lo2, b);
    hi2 = _mm256_max_epi32(hi2, b);
  }
  if (i + 8 <= n) {
    const __m256i a = load(i);
    lo = _mm256_min_epi32(lo, a);
    hi = _mm256_max_epi32(hi, a);
    i += 8;
  }
  if (i < n) {
    const __m256i a = load(n - 8);
    lo2 = _mm256_min_epi32(lo2, a);
    hi2 = _mm256_max_epi32(hi2, a);
  }
  return {std::bit_cast<float>(order_key(lane_min(_mm256_min_epi32(lo, lo2)))),
          std::bit_cast<float>(order_key(lane_max(_mm256_max_epi32(hi, hi2))))};
}

struct CodesF32 {
  __m256 min;
  __m256 scale;
  __m256 levels;
  __m256i operator()(const float* x) const {
    __m256 t = _mm256_div_ps(_mm256_sub_ps(_mm256_loadu_ps(x), min), scale);
    t = _mm256_min_ps(_mm256_max_ps(t, _mm256_setzero_ps()), levels);
    return _mm256_cvttps_epi32(_mm256_round_ps(t, kNearestEven));
  }
  // 32 codes of x[0..32) as 32 bytes in order (each fits: 0..levels <= 255).
  __m256i bytes32(const float* x) const {
    const __m256i ab = _mm256_packus_epi32((*this)(x), (*this)(x + 8));  // a0-3 b0-3 | a4-7 b4-7
    const __m256i cd = _mm256_packus_epi32((*this)(x + 16), (*this)(x + 24));
    const __m256i abcd = _mm256_packus_epi16(ab, cd);  // a0-3 b0-3 c0-3 d0-3 | a4-7 b4-7 c4-7 d4-7
    return _mm256_permutevar8x32_epi32(abcd, _mm256_setr_epi32(0, 4, 1, 5, 2, 6, 3, 7));
  }
};

void quantize8_f32(const float* x, size_t n, float min, float scale, uint8_t flip, uint8_t* codes) {
  const CodesF32 codes_of{_mm256_set1_ps(min), _mm256_set1_ps(scale), _mm256_set1_ps(255.0f)};
  const __m256i vflip = _mm256_set1_epi8(static_cast<char>(flip));
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(codes + i), _mm256_xor_si256(codes_of.bytes32(x + i), vflip));
  }
  if (i < n) scalar<float>().quantize8(x + i, n - i, min, scale, flip, codes + i);
}

void quantize4_f32(const float* x, size_t n, float min, float scale, uint8_t* codes) {
  const CodesF32 codes_of{_mm256_set1_ps(min), _mm256_set1_ps(scale), _mm256_set1_ps(15.0f)};
  size_t i = 0;
  for (; i + 32 <= n; i += 32) {
    const __m256i bytes = codes_of.bytes32(x + i);
    const __m128i low = pack_nibbles(_mm256_castsi256_si128(bytes));
    const __m128i high = pack_nibbles(_mm256_extracti128_si256(bytes, 1));
    _mm_storeu_si128(reinterpret_cast<__m128i*>(codes + i / 2), _mm_unpacklo_epi64(low, high));
  }
  if (i < n) scalar<float>().quantize4(x + i, n - i, min, scale, codes + i / 2);
}

template <bool Add>
void store_values_f32(float* out, __m256i q, __m256 min, __m256 scale, const float* local) {
  __m256 v = _mm256_add_ps(min, _mm256_mul_ps(_mm256_cvtepi32_ps(q), scale));
  if constexpr (Add) v = _mm256_add_ps(v, _mm256_loadu_ps(local));
  _mm256_storeu_ps(out, v);
}

template <bool Add>
void dequantize8_f32(const uint8_t* codes, size_t n, float min, float scale, uint8_t flip, const float* local,
                     float* out) {
  const __m256 vmin = _mm256_set1_ps(min);
  const __m256 vscale = _mm256_set1_ps(scale);
  const __m128i vflip = _mm_set1_epi8(static_cast<char>(flip));
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i q = _mm256_cvtepu8_epi32(_mm_xor_si128(load8(codes + i), vflip));
    store_values_f32<Add>(out + i, q, vmin, vscale, Add ? local + i : nullptr);
  }
  if (i < n) scalar<float>().dequantize8(codes + i, n - i, min, scale, flip, Add ? local + i : nullptr, out + i);
}

template <bool Add>
void dequantize4_f32(const uint8_t* codes, size_t n, float min, float scale, const float* local, float* out) {
  const __m256 vmin = _mm256_set1_ps(min);
  const __m256 vscale = _mm256_set1_ps(scale);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    store_values_f32<Add>(out + i, unpack_nibbles8(load4(codes + i / 2)), vmin, vscale, Add ? local + i : nullptr);
  }
  if (i < n) scalar<float>().dequantize4(codes + i / 2, n - i, min, scale, Add ? local + i : nullptr, out + i);
}

// ---- double: 4 lanes

// AVX2 has no 64-bit min / max: compare and blend.
__m256i min64(__m256i a, __m256i b) { return _mm256_blendv_epi8(a, b, _mm256_cmpgt_epi64(a, b)); }
__m256i max64(__m256i a, __m256i b) { return _mm256_blendv_epi8(a, b, _mm256_cmpgt_epi64(b, a)); }
int64_t lane_min(__m128i v) {
  const __m128i other = _mm_unpackhi_epi64(v, v);
  return _mm_cvtsi128_si64(_mm_blendv_epi8(v, other, _mm_cmpgt_epi64(v, other)));
}
int64_t lane_max(__m128i v) {
  const __m128i other = _mm_unpackhi_epi64(v, v);
  return _mm_cvtsi128_si64(_mm_blendv_epi8(v, other, _mm_cmpgt_epi64(other, v)));
}

BlockRange<double> range_f64(const double* x, size_t n) {
  if (n < 4) return scalar<double>().range(x, n);
  const auto load = [x](size_t i) { return order_key64(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(x + i))); };
  __m256i lo = load(0);
  __m256i hi = lo;
  size_t i = 4;
  for (; i + 4 <= n; i += 4) {
    const __m256i a = load(i);
    lo = min64(lo, a);
    hi = max64(hi, a);
  }
  if (i < n) {
    const __m256i a = load(n - 4);
    lo = min64(lo, a);
    hi = max64(hi, a);
  }
  const __m256i lo_halves = min64(lo, _mm256_permute2x128_si256(lo, lo, 1));
  const __m256i hi_halves = max64(hi, _mm256_permute2x128_si256(hi, hi, 1));
  return {std::bit_cast<double>(order_key(lane_min(_mm256_castsi256_si128(lo_halves)))),
          std::bit_cast<double>(order_key(lane_max(_mm256_castsi256_si128(hi_halves))))};
}

struct CodesF64 {
  __m256d min;
  __m256d scale;
  __m256d levels;
  __m128i operator()(const double* x) const {
    __m256d t = _mm256_div_pd(_mm256_sub_pd(_mm256_loadu_pd(x), min), scale);
    t = _mm256_min_pd(_mm256_max_pd(t, _mm256_setzero_pd()), levels);
    return _mm256_cvttpd_epi32(_mm256_round_pd(t, kNearestEven));
  }
  // 16 codes of x[0..16) as 16 bytes in order.
  __m128i bytes16(const double* x) const {
    const __m128i ab = _mm_packus_epi32((*this)(x), (*this)(x + 4));
    const __m128i cd = _mm_packus_epi32((*this)(x + 8), (*this)(x + 12));
    return _mm_packus_epi16(ab, cd);
  }
};

void quantize8_f64(const double* x, size_t n, double min, double scale, uint8_t flip, uint8_t* codes) {
  const CodesF64 codes_of{_mm256_set1_pd(min), _mm256_set1_pd(scale), _mm256_set1_pd(255.0)};
  const __m128i vflip = _mm_set1_epi8(static_cast<char>(flip));
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm_storeu_si128(reinterpret_cast<__m128i*>(codes + i), _mm_xor_si128(codes_of.bytes16(x + i), vflip));
  }
  if (i < n) scalar<double>().quantize8(x + i, n - i, min, scale, flip, codes + i);
}

void quantize4_f64(const double* x, size_t n, double min, double scale, uint8_t* codes) {
  const CodesF64 codes_of{_mm256_set1_pd(min), _mm256_set1_pd(scale), _mm256_set1_pd(15.0)};
  size_t i = 0;
  for (; i + 16 <= n; i += 16) {
    _mm_storel_epi64(reinterpret_cast<__m128i*>(codes + i / 2), pack_nibbles(codes_of.bytes16(x + i)));
  }
  if (i < n) scalar<double>().quantize4(x + i, n - i, min, scale, codes + i / 2);
}

template <bool Add>
void store_values_f64(double* out, __m128i q, __m256d min, __m256d scale, const double* local) {
  __m256d v = _mm256_add_pd(min, _mm256_mul_pd(_mm256_cvtepi32_pd(q), scale));
  if constexpr (Add) v = _mm256_add_pd(v, _mm256_loadu_pd(local));
  _mm256_storeu_pd(out, v);
}

template <bool Add>
void dequantize8_f64(const uint8_t* codes, size_t n, double min, double scale, uint8_t flip, const double* local,
                     double* out) {
  const __m256d vmin = _mm256_set1_pd(min);
  const __m256d vscale = _mm256_set1_pd(scale);
  const __m128i vflip = _mm_set1_epi8(static_cast<char>(flip));
  size_t i = 0;
  for (; i + 4 <= n; i += 4) {
    const __m128i q = _mm_cvtepu8_epi32(_mm_xor_si128(load4(codes + i), vflip));
    store_values_f64<Add>(out + i, q, vmin, vscale, Add ? local + i : nullptr);
  }
  if (i < n) scalar<double>().dequantize8(codes + i, n - i, min, scale, flip, Add ? local + i : nullptr, out + i);
}

template <bool Add>
void dequantize4_f64(const uint8_t* codes, size_t n, double min, double scale, const double* local,
                     double* out) {
  const __m256d vmin = _mm256_set1_pd(min);
  const __m256d vscale = _mm256_set1_pd(scale);
  size_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256i q = unpack_nibbles8(load4(codes + i / 2));
    store_values_f64<Add>(out + i, _mm256_castsi256_si128(q), vmin, vscale, Add ? local + i : nullptr);
    store_values_f64<Add>(out + i + 4, _mm256_extracti128_si256(q, 1), vmin, vscale, Add ? local + i + 4 : nullptr);
  }
  if (i < n) scalar<double>().dequantize4(codes + i / 2, n - i, min, scale, Add ? local + i : nullptr, out + i);
}

}  // namespace

template <>
const QuantKernels<float>& avx2_quant_kernels<float>() {
  return kVectorQuantKernels<float, range_f32, quantize8_f32, quantize4_f32, dequantize8_f32<false>,
                             dequantize8_f32<true>, dequantize4_f32<false>, dequantize4_f32<true>>;
}

template <>
const QuantKernels<double>& avx2_quant_kernels<double>() {
  return kVectorQuantKernels<double, range_f64, quantize8_f64, quantize4_f64, dequantize8_f64<false>,
                             dequantize8_f64<true>, dequantize4_f64<false>, dequantize4_f64<true>>;
}

}  // namespace ferry::quant_detail

#endif  // __AVX2__
