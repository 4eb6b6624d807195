// XXH3-64 (seed 0, the default secret), written once for the CPU and the
// device (host_device.h), so the content hash of content_hash.h can run on a
// GPU and give the very bits xxHash gives on the CPU (its output is frozen
// since 0.8.0). The CPU unit tests compare every path with xxhash.h's
// XXH3_64bits.
//
// Inputs of 0..240 bytes take xxHash's short paths (xxh3_short), one thread.
// Longer inputs are a chain over 1 KiB blocks (16 stripes of 64 bytes): the
// eight 64-bit accumulators gain each stripe's contribution, then are
// scrambled. Within a block the contributions are sums modulo 2^64, so they
// may be added in any order and by any number of threads; only the scramble
// is sequential. A warp hashes a long input with each lane owning one
// accumulator lane (lane % 8) and every 4th stripe (from lane / 8): the lanes
// of one accumulator add their partial sums, and all run the scramble chain.
// xxh3_lane_sums() is that per-lane share; xxh3_long_by_lanes() below is the
// warp's algorithm run one lane after another, which the CPU tests pin
// against XXH3_64bits.
#pragma once

#include <cstddef>
#include <cstdint>

#include "cuda/host_device.h"

// xxHash's kSecret (192 bytes), for a host array and a device __constant__ one.
#define FERRY_XXH3_SECRET_BYTES                                                                                      \
  0xb8, 0xfe, 0x6c, 0x39, 0x23, 0xa4, 0x4b, 0xbe, 0x7c, 0x01, 0x81, 0x2c, 0xf7, 0x21, 0xad, 0x1c, 0xde, 0xd4, 0x6d,  \
      0xe9, 0x83, 0x90, 0x97, 0xdb, 0x72, 0x40, 0xa4, 0xa4, 0xb7, 0xb3, 0x67, 0x1f, 0xcb, 0x79, 0xe6, 0x4e, 0xcc,    \
      0xc0, 0xe5, 0x78, 0x82, 0x5a, 0xd0, 0x7d, 0xcc, 0xff, 0x72, 0x21, 0xb8, 0x08, 0x46, 0x74, 0xf7, 0x43, 0x24,    \
      0x8e, 0xe0, 0x35, 0x90, 0xe6, 0x81, 0x3a, 0x26, 0x4c, 0x3c, 0x28, 0x52, 0xbb, 0x91, 0xc3, 0x00, 0xcb, 0x88,    \
      0xd0, 0x65, 0x8b, 0x1b, 0x53, 0x2e, 0xa3, 0x71, 0x64, 0x48, 0x97, 0xa2, 0x0d, 0xf9, 0x4e, 0x38, 0x19, 0xef,    \
      0x46, 0xa9, 0xde, 0xac, 0xd8, 0xa8, 0xfa, 0x76, 0x3f, 0xe3, 0x9c, 0x34, 0x3f, 0xf9, 0xdc, 0xbb, 0xc7, 0xc7,    \
      0x0b, 0x4f, 0x1d, 0x8a, 0x51, 0xe0, 0x4b, 0xcd, 0xb4, 0x59, 0x31, 0xc8, 0x9f, 0x7e, 0xc9, 0xd9, 0x78, 0x73,    \
      0x64, 0xea, 0xc5, 0xac, 0x83, 0x34, 0xd3, 0xeb, 0xc3, 0xc5, 0x81, 0xa0, 0xff, 0xfa, 0x13, 0x63, 0xeb, 0x17,    \
      0x0d, 0xdd, 0x51, 0xb7, 0xf0, 0xda, 0x49, 0xd3, 0x16, 0x55, 0x26, 0x29, 0xd4, 0x68, 0x9e, 0x2b, 0x16, 0xbe,    \
      0x58, 0x7d, 0x47, 0xa1, 0xfc, 0x8f, 0xf8, 0xb8, 0xd1, 0x7a, 0xd0, 0x31, 0xce, 0x45, 0xcb, 0x3a, 0x8f, 0x95,    \
      0x16, 0x04, 0x28, 0xaf, 0xd7, 0xfb, 0xca, 0xbb, 0x4b, 0x40, 0x7e

namespace ferry::device_core {

inline constexpr size_t kXxh3SecretSize = 192;
inline constexpr size_t kXxh3StripeLen = 64;
inline constexpr size_t kXxh3StripesPerBlock = 16;  // (secret size - stripe) / 8
inline constexpr size_t kXxh3BlockLen = kXxh3StripeLen * kXxh3StripesPerBlock;
inline constexpr size_t kXxh3MidsizeMax = 240;
inline constexpr size_t kXxh3ScrambleKey = kXxh3SecretSize - kXxh3StripeLen;     // 128
inline constexpr size_t kXxh3LastStripeKey = kXxh3SecretSize - kXxh3StripeLen - 7;  // 121
inline constexpr size_t kXxh3MergeKey = 11;
// Lanes of a warp per accumulator lane: lane / 8 picks every 4th stripe.
inline constexpr uint32_t kXxh3LaneGroups = 4;

inline constexpr uint64_t kPrime32_1 = 0x9E3779B1u, kPrime32_2 = 0x85EBCA77u, kPrime32_3 = 0xC2B2AE3Du;
inline constexpr uint64_t kPrime64_1 = 0x9E3779B185EBCA87u, kPrime64_2 = 0xC2B2AE3D27D4EB4Fu,
                          kPrime64_3 = 0x165667B19E3779F9u, kPrime64_4 = 0x85EBCA77C2B2AE63u,
                          kPrime64_5 = 0x27D4EB2F165667C5u;

FERRY_HD uint64_t read_le64(const uint8_t* p) {
  uint64_t v = 0;
  for (int k = 7; k >= 0; --k) v = v << 8 | p[k];
  return v;
}
FERRY_HD uint32_t read_le32(const uint8_t* p) {
  return static_cast<uint32_t>(p[0]) | static_cast<uint32_t>(p[1]) << 8 | static_cast<uint32_t>(p[2]) << 16 |
         static_cast<uint32_t>(p[3]) << 24;
}
FERRY_HD uint64_t rotl64(uint64_t v, int r) { return v << r | v >> (64 - r); }
FERRY_HD uint64_t swap64(uint64_t v) {
  uint64_t out = 0;
  for (int k = 0; k < 8; ++k) out = out << 8 | ((v >> (8 * k)) & 0xff);
  return out;
}
FERRY_HD uint32_t swap32(uint32_t v) {
  return (v >> 24) | ((v >> 8) & 0xff00u) | ((v << 8) & 0xff0000u) | (v << 24);
}

FERRY_HD uint64_t mul128_fold64(uint64_t a, uint64_t b) {
#if defined(__CUDA_ARCH__)
  return (a * b) ^ __umul64hi(a, b);
#else
  __extension__ typedef unsigned __int128 Uint128;  // GCC and Clang: the 64x64->128 multiply xxHash uses
  const Uint128 p = static_cast<Uint128>(a) * b;
  return static_cast<uint64_t>(p) ^ static_cast<uint64_t>(p >> 64);
#endif
}

FERRY_HD uint64_t xxh64_avalanche(uint64_t h) {
  h ^= h >> 33;
  h *= kPrime64_2;
  h ^= h >> 29;
  h *= kPrime64_3;
  return h ^ (h >> 32);
}
FERRY_HD uint64_t xxh3_avalanche(uint64_t h) {
  h ^= h >> 37;
  h *= 0x165667919E3779F9u;
  return h ^ (h >> 32);
}
FERRY_HD uint64_t xxh3_rrmxmx(uint64_t h, uint64_t len) {
  h ^= rotl64(h, 49) ^ rotl64(h, 24);
  h *= 0x9FB21C651E98DF25u;
  h ^= (h >> 35) + len;
  h *= 0x9FB21C651E98DF25u;
  return h ^ (h >> 28);
}
FERRY_HD uint64_t xxh3_mix16(const uint8_t* in, const uint8_t* secret) {
  return mul128_fold64(read_le64(in) ^ read_le64(secret), read_le64(in + 8) ^ read_le64(secret + 8));
}

// XXH3_64bits of 0..240 bytes (xxHash's len_0to16, 17to128, 129to240 paths).
FERRY_HD uint64_t xxh3_short(const uint8_t* in, size_t len, const uint8_t* secret) {
  if (len == 0) return xxh64_avalanche(read_le64(secret + 56) ^ read_le64(secret + 64));
  if (len <= 3) {
    const uint32_t combined = static_cast<uint32_t>(in[0]) << 16 | static_cast<uint32_t>(in[len >> 1]) << 24 |
                              static_cast<uint32_t>(in[len - 1]) | static_cast<uint32_t>(len) << 8;
    const uint64_t bitflip = read_le32(secret) ^ read_le32(secret + 4);
    return xxh64_avalanche(combined ^ bitflip);
  }
  if (len <= 8) {
    const uint64_t bitflip = read_le64(secret + 8) ^ read_le64(secret + 16);
    const uint64_t input64 = read_le32(in + len - 4) + (static_cast<uint64_t>(read_le32(in)) << 32);
    return xxh3_rrmxmx(input64 ^ bitflip, len);
  }
  if (len <= 16) {
    const uint64_t lo = read_le64(in) ^ (read_le64(secret + 24) ^ read_le64(secret + 32));
    const uint64_t hi = read_le64(in + len - 8) ^ (read_le64(secret + 40) ^ read_le64(secret + 48));
    return xxh3_avalanche(len + swap64(lo) + hi + mul128_fold64(lo, hi));
  }
  uint64_t acc = len * kPrime64_1;
  if (len <= 128) {
    if (len > 32) {
      if (len > 64) {
        if (len > 96) {
          acc += xxh3_mix16(in + 48, secret + 96);
          acc += xxh3_mix16(in + len - 64, secret + 112);
        }
        acc += xxh3_mix16(in + 32, secret + 64);
        acc += xxh3_mix16(in + len - 48, secret + 80);
      }
      acc += xxh3_mix16(in + 16, secret + 32);
      acc += xxh3_mix16(in + len - 32, secret + 48);
    }
    acc += xxh3_mix16(in, secret);
    acc += xxh3_mix16(in + len - 16, secret + 16);
    return xxh3_avalanche(acc);
  }
  for (size_t i = 0; i < 8; ++i) acc += xxh3_mix16(in + 16 * i, secret + 16 * i);
  acc = xxh3_avalanche(acc);
  for (size_t i = 8; i < len / 16; ++i) acc += xxh3_mix16(in + 16 * i, secret + 16 * (i - 8) + 3);
  acc += xxh3_mix16(in + len - 16, secret + 136 - 17);
  return xxh3_avalanche(acc);
}

// ---- long inputs (> 240 bytes)

FERRY_HD uint64_t xxh3_init_acc(uint32_t i) {
  switch (i) {
    case 0: return kPrime32_3;
    case 1: return kPrime64_1;
    case 2: return kPrime64_2;
    case 3: return kPrime64_3;
    case 4: return kPrime64_4;
    case 5: return kPrime32_2;
    case 6: return kPrime64_5;
    default: return kPrime32_1;
  }
}

// One lane's share of a block: the products it adds to its own accumulator
// lane, and the input words it adds to the neighbouring lane (i ^ 1).
struct Xxh3LaneSums {
  uint64_t product = 0;
  uint64_t value = 0;
  FERRY_HD void add(uint64_t word, uint64_t key) {
    const uint64_t k = word ^ key;
    product += (k & 0xffffffffu) * (k >> 32);
    value += word;
  }
  FERRY_HD void merge(Xxh3LaneSums other) {
    product += other.product;
    value += other.value;
  }
};

// The chain's shape for a long input: full 1 KiB blocks (each followed by a
// scramble), then `last_stripes` stripes of the last block, then the stripe
// ending at len with its own key.
struct Xxh3LongPlan {
  size_t blocks;
  size_t last_stripes;
  FERRY_HD explicit Xxh3LongPlan(size_t len)
      : blocks((len - 1) / kXxh3BlockLen), last_stripes(((len - 1) - blocks * kXxh3BlockLen) / kXxh3StripeLen) {}
};

// Warp lane `lane` (0..31) over the first `stripes` stripes of a block:
// accumulator lane lane % 8, stripes lane / 8, + 4, + 8, + 12.
FERRY_HD Xxh3LaneSums xxh3_lane_sums(const uint8_t* block, size_t stripes, uint32_t lane, const uint8_t* secret) {
  const uint32_t i = lane % 8;
  Xxh3LaneSums sums;
  for (size_t s = lane / 8; s < stripes; s += kXxh3LaneGroups) {
    sums.add(read_le64(block + s * kXxh3StripeLen + 8 * i), read_le64(secret + s * 8 + 8 * i));
  }
  return sums;
}

// The scramble of accumulator lane i after each full block; key is
// xxh3_scramble_key(i) (a kernel keeps it in a register).
FERRY_HD uint64_t xxh3_scramble_key(uint32_t i, const uint8_t* secret) {
  return read_le64(secret + kXxh3ScrambleKey + 8 * i);
}
FERRY_HD uint64_t xxh3_scramble(uint64_t acc, uint64_t key) {
  acc ^= acc >> 47;
  acc ^= key;
  return acc * kPrime32_1;
}

FERRY_HD uint64_t xxh3_merge(const uint64_t acc[8], size_t len, const uint8_t* secret) {
  uint64_t result = len * kPrime64_1;
  for (size_t i = 0; i < 4; ++i) {
    result += mul128_fold64(acc[2 * i] ^ read_le64(secret + kXxh3MergeKey + 16 * i),
                            acc[2 * i + 1] ^ read_le64(secret + kXxh3MergeKey + 16 * i + 8));
  }
  return xxh3_avalanche(result);
}

// The warp's algorithm, one lane after another (the CPU tests' model of the
// kernel): len > 240.
inline uint64_t xxh3_long_by_lanes(const uint8_t* in, size_t len, const uint8_t* secret) {
  const Xxh3LongPlan plan(len);
  uint64_t acc[8];
  for (uint32_t i = 0; i < 8; ++i) acc[i] = xxh3_init_acc(i);
  const auto step = [&](const uint8_t* block, size_t stripes, bool last) {
    Xxh3LaneSums lane_sums[8];
    for (uint32_t lane = 0; lane < 32; ++lane) {
      Xxh3LaneSums s = xxh3_lane_sums(block, stripes, lane, secret);
      if (last && lane < 8) {  // group 0 also takes the final stripe
        s.add(read_le64(in + len - kXxh3StripeLen + 8 * lane), read_le64(secret + kXxh3LastStripeKey + 8 * lane));
      }
      lane_sums[lane % 8].merge(s);
    }
    for (uint32_t i = 0; i < 8; ++i) acc[i] += lane_sums[i].product + lane_sums[i ^ 1].value;
  };
  for (size_t n = 0; n < plan.blocks; ++n) {
    step(in + n * kXxh3BlockLen, kXxh3StripesPerBlock, false);
    for (uint32_t i = 0; i < 8; ++i) acc[i] = xxh3_scramble(acc[i], xxh3_scramble_key(i, secret));
  }
  step(in + plan.blocks * kXxh3BlockLen, plan.last_stripes, true);
  return xxh3_merge(acc, len, secret);
}

}  // namespace ferry::device_core
