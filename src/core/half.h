// 16-bit floats: IEEE binary16 (f16) and bfloat16 (bf16), stored as uint16_t bits.
//
// Narrowing (f32 -> f16/bf16) rounds to nearest, ties to even; values too
// large become ±inf; f16 subnormals are produced exactly. A NaN stays a quiet
// NaN with its sign and the top bits of its payload, which is what x86 F16C
// does, so the scalar and the vector paths agree bit for bit on every input.
// Widening is exact. f16 -> f32 quiets a signalling NaN (as F16C does);
// bf16 -> f32 is a plain shift and keeps every bit.
//
// The scalar functions are inline so that loops in other files (codecs,
// kernels) can vectorize them; the bulk ones use F16C where the build allows.
// Results never depend on MXCSR (FTZ/DAZ) or on the rounding mode: bits are
// computed with integer arithmetic, or with float operations that are exact.
#pragma once

#include <bit>
#include <cstddef>
#include <cstdint>

namespace ferry {

constexpr float f16_to_f32(uint16_t h) {
  const uint32_t sign = static_cast<uint32_t>(h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  const uint32_t mantissa = h & 0x3ffu;
  if (exponent == 0x1f) {  // inf, or NaN made quiet
    const uint32_t quiet = mantissa != 0 ? 0x400000u : 0u;
    return std::bit_cast<float>(sign | 0x7f800000u | quiet | (mantissa << 13));
  }
  if (exponent == 0) {  // zero or subnormal: mantissa * 2^-24, exact and normal in f32
    const float magnitude = static_cast<float>(mantissa) * 0x1p-24f;
    return std::bit_cast<float>(sign | std::bit_cast<uint32_t>(magnitude));
  }
  return std::bit_cast<float>(sign | ((exponent + (127 - 15)) << 23) | (mantissa << 13));
}

constexpr uint16_t f32_to_f16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  const uint32_t sign = (x >> 16) & 0x8000u;
  const uint32_t magnitude = x & 0x7fffffffu;
  uint32_t h = 0;
  if (magnitude > 0x7f800000u) {  // NaN: quiet bit set, top 9 payload bits kept
    h = 0x7e00u | ((magnitude >> 13) & 0x3ffu);
  } else if (magnitude >= 0x477ff000u) {  // >= 65520, halfway past 65504: ties go to even, i.e. inf
    h = 0x7c00u;
  } else if (magnitude >= 0x38800000u) {  // f16 normal range (>= 2^-14)
    // Re-bias the exponent, then round the mantissa from 23 to 10 bits to
    // nearest-even; a carry out of the mantissa correctly bumps the exponent.
    const uint32_t odd = (magnitude >> 13) & 1u;
    h = (magnitude - ((127u - 15u) << 23) + 0xfffu + odd) >> 13;
  } else {  // f16 subnormal range: round magnitude * 2^24 to an integer, ties to even
    const uint32_t exponent = magnitude >> 23;
    // exponent <= 112 here; a shift of 25 rounds every smaller input (f32
    // subnormals included) to zero.
    const uint32_t shift = 126u - exponent < 25u ? 126u - exponent : 25u;
    const uint32_t significand = (magnitude & 0x7fffffu) | 0x800000u;
    const uint32_t rest = significand & ((1u << shift) - 1u);
    const uint32_t halfway = 1u << (shift - 1u);
    h = significand >> shift;
    if (rest > halfway || (rest == halfway && (h & 1u) != 0)) ++h;
  }
  return static_cast<uint16_t>(sign | h);
}

constexpr float bf16_to_f32(uint16_t b) { return std::bit_cast<float>(static_cast<uint32_t>(b) << 16); }

constexpr uint16_t f32_to_bf16(float f) {
  const uint32_t x = std::bit_cast<uint32_t>(f);
  if ((x & 0x7fffffffu) > 0x7f800000u) return static_cast<uint16_t>((x >> 16) | 0x40u);  // quiet NaN
  // Same exponent range as f32, so dropping 16 mantissa bits with
  // nearest-even rounding handles subnormals and overflow to inf alike.
  return static_cast<uint16_t>((x + 0x7fffu + ((x >> 16) & 1u)) >> 16);
}

// Bulk conversions of count elements. in and out must not overlap.
void f16_to_f32(const uint16_t* in, float* out, size_t count);
void f32_to_f16(const float* in, uint16_t* out, size_t count);
void bf16_to_f32(const uint16_t* in, float* out, size_t count);
void f32_to_bf16(const float* in, uint16_t* out, size_t count);

}  // namespace ferry
