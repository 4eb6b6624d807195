#include "core/half.h"

#if defined(__F16C__) || defined(__AVX2__)
#include <immintrin.h>
#endif

namespace ferry {

// The vector paths give the scalar functions' bits for every input, NaNs
// included (the unit tests check all 65536 16-bit values and the f32
// rounding boundaries), so peers built for different CPUs agree.
// bf16 -> f32 needs no intrinsics: it is a shift the compiler vectorizes.

void f16_to_f32(const uint16_t* in, float* out, size_t count) {
  size_t i = 0;
#if defined(__F16C__)
  for (; i + 8 <= count; i += 8) {
    const __m128i h = _mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i));
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(h));
  }
#endif
  for (; i < count; ++i) out[i] = f16_to_f32(in[i]);
}

void f32_to_f16(const float* in, uint16_t* out, size_t count) {
  size_t i = 0;
#if defined(__F16C__)
  // An immediate rounding mode, so MXCSR's mode cannot change the bits.
  constexpr int kNearestEven = _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC;
  for (; i + 8 <= count; i += 8) {
    const __m128i h = _mm256_cvtps_ph(_mm256_loadu_ps(in + i), kNearestEven);
    _mm_storeu_si128(reinterpret_cast<__m128i*>(out + i), h);
  }
#endif
  for (; i < count; ++i) out[i] = f32_to_f16(in[i]);
}

void bf16_to_f32(const uint16_t* in, float* out, size_t count) {
  for (size_t i = 0; i < count; ++i) out[i] = bf16_to_f32(in[i]);
}

void f32_to_bf16(const float* in, uint16_t* out, size_t count) {
  size_t i = 0;
#if defined(__AVX2__)
  // The scalar code, 8 lanes at a time. Written out because the compiler's own
  // vectorization of it (512-bit with -march=native on AVX-512 machines) ran
  // at half this speed on large buffers.
  const __m256i one = _mm256_set1_epi32(1);
  const __m256i round_bias = _mm256_set1_epi32(0x7fff);
  const __m256i magnitude_mask = _mm256_set1_epi32(0x7fffffff);
  const __m256i infinity = _mm256_set1_epi32(0x7f800000);
  const __m256i quiet_bit = _mm256_set1_epi32(0x400000);
  const auto round_to_bf16 = [&](__m256i x) {
    const __m256i lsb = _mm256_and_si256(_mm256_srli_epi32(x, 16), one);
    const __m256i rounded = _mm256_add_epi32(_mm256_add_epi32(x, round_bias), lsb);
    const __m256i is_nan = _mm256_cmpgt_epi32(_mm256_and_si256(x, magnitude_mask), infinity);
    const __m256i result = _mm256_blendv_epi8(rounded, _mm256_or_si256(x, quiet_bit), is_nan);
    return _mm256_srli_epi32(result, 16);  // < 0x10000, so the unsigned-saturating pack below is exact
  };
  for (; i + 16 <= count; i += 16) {
    const __m256i low = round_to_bf16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i)));
    const __m256i high = round_to_bf16(_mm256_loadu_si256(reinterpret_cast<const __m256i*>(in + i + 8)));
    // packus interleaves 128-bit lanes; the permute puts the 16 results back in order.
    const __m256i packed = _mm256_permute4x64_epi64(_mm256_packus_epi32(low, high), 0xd8);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(out + i), packed);
  }
#endif
  for (; i < count; ++i) out[i] = f32_to_bf16(in[i]);
}

}  // namespace ferry
