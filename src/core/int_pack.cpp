// The tight bit packing of the integer-domain quantization (int_quant.h):
// int32 values in two's complement at a width of 2..32 bits; groups of 8 values
// are exactly W bytes. The scalar groups are the definition; a build with AVX-512
// VBMI takes 16-value vector steps, which the tests compare with them byte for byte.
#include <algorithm>
#include <array>
#include <bit>
#include <cstdint>
#include <cstring>
#include <stdexcept>
#include <string>
#include <utility>

#include "core/int_quant.h"

#if defined(__AVX512F__)
// GCC 12's AVX-512 intrinsics start from _mm512_undefined_*(), which
// -W(maybe-)uninitialized reports once inlined (GCC bug 105593, fixed in 13):
// silenced for this file, as in quant_kernels_avx512.cpp.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#endif
#include <immintrin.h>
#endif

static_assert(std::endian::native == std::endian::little,
              "the packed integer format is little-endian; add byte swaps for this target");

namespace ferry {
namespace {


template <uint32_t W>
void pack_group(const int32_t* v, uint8_t* out) {
  constexpr uint64_t kMask = (uint64_t{1} << W) - 1;
  uint64_t acc = 0;
  uint32_t bits = 0;
  for (int j = 0; j < 8; ++j) {
    acc |= (static_cast<uint64_t>(static_cast<uint32_t>(v[j])) & kMask) << bits;
    bits += W;
    if (bits >= 32) {
      const auto word = static_cast<uint32_t>(acc);
      std::memcpy(out, &word, 4);
      out += 4;
      acc >>= 32;
      bits -= 32;
    }
  }
  // 8W bits in all, so what is left is whole bytes.
  for (uint32_t k = 0; k < bits / 8; ++k) out[k] = static_cast<uint8_t>(acc >> (8 * k));
}

template <uint32_t W>
int32_t sign_extend(uint64_t raw) {
  constexpr uint32_t kShift = 32 - W;
  return static_cast<int32_t>(static_cast<uint32_t>(raw) << kShift) >> kShift;
}

// in holds W bytes plus 8 readable after them.
template <uint32_t W>
void unpack_group(const uint8_t* in, int32_t* v) {
  for (uint32_t j = 0; j < 8; ++j) {
    uint64_t word;
    std::memcpy(&word, in + (j * W) / 8, 8);
    v[j] = sign_extend<W>(word >> ((j * W) % 8));
  }
}

#if defined(__AVX512F__) && defined(__AVX512BW__) && defined(__AVX512VBMI__)
#define FERRY_INT_QUANT_VBMI 1
// 16 values are exactly 2W bytes. Value j starts at bit j*W: byte j*W/8,
// shift j*W%8, and with W <= 24 it lies within 4 bytes from there. Unpack
// gathers those 4 bytes into lane j (vpermb), shifts and sign-extends; pack
// shifts each value into place in its lane and builds every output byte as
// the OR of the (at most 3, for W >= 4) lanes that have bits in it.
inline constexpr uint32_t kSimdMinWidth = 4;
inline constexpr uint32_t kSimdMaxWidth = 24;

template <uint32_t W>
struct SimdTables {
  alignas(64) uint8_t gather[64] = {};  // unpack: lane j's 4 bytes
  alignas(64) uint32_t shift[16] = {};
  alignas(64) uint8_t part[3][64] = {};  // pack: output byte b's k-th contributing lane byte
  uint64_t part_mask[3] = {};
  constexpr SimdTables() {
    for (uint32_t j = 0; j < 16; ++j) {
      for (uint32_t k = 0; k < 4; ++k) gather[4 * j + k] = static_cast<uint8_t>(j * W / 8 + k);
      shift[j] = j * W % 8;
    }
    for (uint32_t b = 0; b < 2 * W; ++b) {
      uint32_t k = 0;
      for (uint32_t j = 0; j < 16; ++j) {
        if (j * W < 8 * (b + 1) && (j + 1) * W > 8 * b) {  // value j has bits in byte b
          part[k][b] = static_cast<uint8_t>(4 * j + (b - j * W / 8));
          part_mask[k] |= uint64_t{1} << b;
          ++k;
        }
      }
    }
  }
};

template <uint32_t W>
inline constexpr SimdTables<W> kSimdTables{};

template <uint32_t W>
void unpack16(const uint8_t* in, int32_t* v) {
  const SimdTables<W>& t = kSimdTables<W>;
  const __m512i bytes = _mm512_maskz_loadu_epi8((uint64_t{1} << (2 * W)) - 1, in);  // reads only the 2W bytes
  __m512i x = _mm512_permutexvar_epi8(_mm512_load_si512(t.gather), bytes);
  x = _mm512_srlv_epi32(x, _mm512_load_si512(t.shift));
  x = _mm512_srai_epi32(_mm512_slli_epi32(x, 32 - W), 32 - W);
  _mm512_storeu_si512(v, x);
}

template <uint32_t W>
void pack16(const int32_t* v, uint8_t* out) {
  const SimdTables<W>& t = kSimdTables<W>;
  __m512i x = _mm512_and_si512(_mm512_loadu_si512(v), _mm512_set1_epi32(static_cast<int32_t>((1u << W) - 1)));
  x = _mm512_sllv_epi32(x, _mm512_load_si512(t.shift));
  __m512i y = _mm512_maskz_permutexvar_epi8(t.part_mask[0], _mm512_load_si512(t.part[0]), x);
  y = _mm512_or_si512(y, _mm512_maskz_permutexvar_epi8(t.part_mask[1], _mm512_load_si512(t.part[1]), x));
  if constexpr (W < 8)
    y = _mm512_or_si512(y, _mm512_maskz_permutexvar_epi8(t.part_mask[2], _mm512_load_si512(t.part[2]), x));
  _mm512_mask_storeu_epi8(out, (uint64_t{1} << (2 * W)) - 1, y);
}
#endif

// Simd: take the 16-value vector steps where this build has them (the
// scalar groups are the definition; the tests compare the two).
template <uint32_t W, bool Simd>
void pack_w(const int32_t* values, size_t count, uint8_t* out) {
  size_t done = 0;
#if defined(FERRY_INT_QUANT_VBMI)
  if constexpr (Simd && W >= kSimdMinWidth && W <= kSimdMaxWidth) {
    for (; done + 16 <= count; done += 16) pack16<W>(values + done, out + done / 8 * W);
  }
#endif
  const size_t groups = count / 8;
  for (size_t g = done / 8; g < groups; ++g) pack_group<W>(values + 8 * g, out + W * g);
  const size_t tail = count % 8;
  if (tail == 0) return;
  int32_t last[8] = {};
  std::copy(values + 8 * groups, values + count, last);
  uint8_t bytes[W];
  pack_group<W>(last, bytes);
  std::memcpy(out + W * groups, bytes, (tail * W + 7) / 8);
}

template <uint32_t W, bool Simd>
void unpack_w(const uint8_t* in, size_t count, int32_t* values) {
  size_t g = 0;
#if defined(FERRY_INT_QUANT_VBMI)
  if constexpr (Simd && W >= kSimdMinWidth && W <= kSimdMaxWidth) {
    for (; 8 * g + 16 <= count; g += 2) unpack16<W>(in + W * g, values + 8 * g);
  }
#endif
  const size_t groups = count / 8;
  const size_t bytes = (count * W + 7) / 8;
  // Direct loads while 8 bytes past the group are still inside the input.
  for (; g < groups && W * (g + 1) + 8 <= bytes; ++g) unpack_group<W>(in + W * g, values + 8 * g);
  alignas(8) uint8_t padded[W + 8];
  int32_t last[8];
  for (; W * g < bytes; ++g) {
    const size_t have = std::min<size_t>(W, bytes - W * g);
    std::memset(padded, 0, sizeof padded);
    std::memcpy(padded, in + W * g, have);
    unpack_group<W>(padded, last);
    std::copy(last, last + std::min<size_t>(8, count - 8 * g), values + 8 * g);
  }
}

using PackFn = void (*)(const int32_t*, size_t, uint8_t*);
using UnpackFn = void (*)(const uint8_t*, size_t, int32_t*);

template <bool Simd, size_t... I>
constexpr std::array<PackFn, sizeof...(I)> pack_table(std::index_sequence<I...>) {
  return {pack_w<static_cast<uint32_t>(I + 2), Simd>...};
}
template <bool Simd, size_t... I>
constexpr std::array<UnpackFn, sizeof...(I)> unpack_table(std::index_sequence<I...>) {
  return {unpack_w<static_cast<uint32_t>(I + 2), Simd>...};
}
// Widths 2..32.
constexpr auto kPack = pack_table<true>(std::make_index_sequence<31>{});
constexpr auto kUnpack = unpack_table<true>(std::make_index_sequence<31>{});
constexpr auto kPackScalar = pack_table<false>(std::make_index_sequence<31>{});
constexpr auto kUnpackScalar = unpack_table<false>(std::make_index_sequence<31>{});

void check_width(uint32_t width) {
  if (width < 2 || width > 32) throw std::invalid_argument("int quant: width " + std::to_string(width));
}

}  // namespace

namespace int_quant_detail {

void pack(const int32_t* values, size_t count, uint32_t width, uint8_t* out) {
  check_width(width);
  kPack[width - 2](values, count, out);
}

void unpack(const uint8_t* in, size_t count, uint32_t width, int32_t* values) {
  check_width(width);
  kUnpack[width - 2](in, count, values);
}

void pack_scalar(const int32_t* values, size_t count, uint32_t width, uint8_t* out) {
  check_width(width);
  kPackScalar[width - 2](values, count, out);
}

void unpack_scalar(const uint8_t* in, size_t count, uint32_t width, int32_t* values) {
  check_width(width);
  kUnpackScalar[width - 2](in, count, values);
}

}  // namespace int_quant_detail
}  // namespace ferry
