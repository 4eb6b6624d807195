// Quantization in the integer domain (issue 19; THC, arXiv 2302.08545): every
// peer encodes its input once with a scale all peers share, the ring adds the
// integers, and the sum is decoded once. Beside quant.h's per-hop codecs,
// which decode, add in floating point and re-encode at every hop.
//
// ---------------------------------------------------------------------------
// Design
//
// Modes: i8h and i4h ("h" for homomorphic: the encoding commutes with the
// sum): b = 8 or 4 bits per contribution, symmetric codes q in [-L, L] with
// L = 2^(b-1) - 1 (127 / 7). For sum and avg of float data only.
//
// Scale agreement: a max all-reduce of per-block absolute maxima, one value a
// block of `block` elements of the tensor (block = global element index /
// spec.block, so chunking never moves a block). Each peer computes
// int_quant_absmax() of its input; the group reduces them with an unsigned
// max of their bit patterns (u32 for float, u64 for double: ReduceOp::max on
// DType::u32 / u64), which is exact, commutative and associative, so every
// peer holds the same A per block whatever the ring. The bits, not float max,
// because of NaN: int_quant_absmax() writes +inf for a block holding NaN or
// +-inf, +inf's bits exceed every finite value's, and any bits at or above
// +inf's (NaN, or a sign bit from a broken peer) make the block non-finite.
// Chosen over the alternatives because it is the only one with the same
// guarantees: a scale from the previous step (no extra round) can be
// exceeded and must clip, which breaks the error bound; a per-peer scale
// breaks the integer sum. Its cost is 1/block of the data (4 bytes a block
// of 256 f32: 1.6 % of i8h's payload) and some small ring steps of latency:
// 2(N-1) as a ring all-reduce, N-1 as a ring all-gather of every peer's
// maxima followed by int_quant_merge_absmax() (the same result, as max is
// exact and order-free; the better choice where latency dominates).
//
// Encoding (one contribution): s = A / L (IEEE, in T), and for finite x in
// a block with finite A > 0:
//     nearest:    q = roundTiesToEven(clamp(x * (L / A), -L, L))
//     stochastic: t = clamp(x * (L / A), -L, L), f = roundTiesToEven(t),
//                 r = t - f (exact, in [-1/2, 1/2]),
//                 q = f + (u < r ? 1 : 0) - (u < -r ? 1 : 0)
// (one step toward t with probability |r|: P(q = ceil t) = t - floor t)
// where u in [0, 1) is a counter-based random number: the top 24 (float) /
// 53 (double) bits of R(R(seed, contributor), global element index), as a
// fraction, with R(key, i) = splitmix64's finalizer of key +
// 0x9e3779b97f4a7c15 * (i + 1). contributor is a stable id of the encoding
// peer (its peer id, distinct within the group; not its ring position), so
// the peers' rounding errors are independent: with one stream for all, they
// would be the same draw, and the sum's error would grow as N instead of
// sqrt(N) (measured: RMS 3x round-to-nearest's at 8 peers, 4x at 16, where
// independent streams give 1.4x). So an element's code depends only on x,
// its block's A, the op's seed, the contributor's id and the element's global
// index: not on the chunking, the ring, the owner or the order of any sum.
// (When L / A is not finite, i.e. s is subnormal, t = x / s instead.) A
// block with A = 0 (all zeros) or non-finite A encodes to q = 0.
//
// Headroom: a partial sum of k contributions lies in [-kL, kL] and is packed
// in w(k) = b + ceil(log2 k) bits, two's complement, which holds it exactly
// (kL <= 2^(w-1) - 1). The largest supported group is kMaxIntQuantGroup =
// 65536: partials then need at most 24 bits (i8h), which the packers handle,
// and every sum is an integer a float holds exactly (65536 * 127 < 2^24).
// A larger group, or a sum of partials of more contributions than that, is
// refused with std::invalid_argument before anything is written: it never
// wraps. A partial from a peer whose values lie outside [-kL, kL] is refused
// with Errc::protocol, so a broken peer cannot make a later sum wrap either.
//
// Packing: the chunk's count values, element i in bits [i*w, (i+1)*w) of a
// little-endian bit stream (bit 0 is the low bit of byte 0), no padding but
// the last byte's; ceil(count * w / 8) bytes. No per-block metadata: the
// scales are already agreed. Every hop packs to the width its own number of
// contributions needs (tight, not widened to 32 bits): at 8 peers the
// reduce-scatter carries 8, 9, 10, 10, 11, 11, 11 bits an element.
//
// All-gather: the exact integer sum of all N contributions, at w(N) bits,
// not a re-encoding by the owner. Every peer (owner included) decodes the
// same integers with the same agreed scales, so the result is one pure
// function of (the inputs, the scales, the seed): bit-identical everywhere and
// independent of ring order, owner and chunking, with no second lossy step.
// A re-encoding would save w(N) - 8 bits an element on the all-gather (3 at
// 8 peers: about 1.11x u8's wire bytes instead of 1.29x, scale agreement
// included) but adds a second error,
// of the sum's own range (up to N * s / 2 more), which is the error this
// mode exists to remove.
//
// Decoding of a sum S of k contributions: y = T(S) * s for sum, and
// (T(S) * s) / T(k) for avg (IEEE, in that order, no FMA). A block with
// non-finite A decodes to the quiet NaN (0x7fc00000 / 0x7ff8000000000000) as
// quant.h's codecs do; a finite sum beyond T's range gives +-inf, as the
// float sum would. A = 0 decodes to +0.
//
// Error bound (published in ferry.h and docs/quantization.md). For a block
// with agreed A, s = fl(A / L), N contributions x_p and
// y the decoded sum:
//     nearest:    |y - sum_p x_p| <= N * s * (1/2 + 2^-14) + 2^-23 |y|
//     stochastic: |y - sum_p x_p| <= N * s * (1   + 2^-14) + 2^-23 |y|
// (2^-52 |y| for double; for a subnormal s add N * L * 2^-149 / 2^-1074),
// and avg divides both sides by N (plus one more rounding of y). The 2^-14
// covers the roundings of L / A, x * (L / A) and A / L (3 units of T's last
// place, times L <= 127, in steps of s). With stochastic rounding every
// element's error has mean 0 up to 2^-16 s over the random numbers (the
// bias of 24-bit u and of rounding t).
// Against quant.h's u8, whose per-hop re-encoding gives N(N+1)/2 * range /
// (2 * 255), this grows as N, not N^2.
// ---------------------------------------------------------------------------
//
// T is the accumulation type, as in quant.h: float for f16/bf16/f32 data,
// double for f64; the caller widens and narrows.
// Errors: arguments that are the caller's bugs (an invalid spec, contributors
// 0 or above kMaxIntQuantGroup, a partial sum of more than that) throw
// std::invalid_argument; bytes from a peer that are wrong (length, or a
// value outside its range) are a Status with Errc::protocol, and no input
// makes a function read or write outside the buffers it was given.
// Thread-safety: all functions are pure and reentrant; they may run
// concurrently on different buffers. Each runs in the default floating-point
// environment (quant.h: MXCSR saved, set, restored on the calling thread).
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"
#include "core/error.h"
#include "core/quant.h"

namespace ferry {

enum class IntQuantKind : uint8_t { i8h = 0, i4h = 1 };
enum class IntRounding : uint8_t { nearest = 0, stochastic = 1 };

inline constexpr uint32_t kMaxIntQuantGroup = uint32_t{1} << 16;

struct IntQuantSpec {
  IntQuantKind kind = IntQuantKind::i8h;
  uint32_t block = kDefaultQuantBlock;  // elements per agreed scale, 1..kMaxQuantBlock
  IntRounding rounding = IntRounding::nearest;
  uint64_t seed = 0;  // stochastic only: the same on every peer of an op
};

// The spec of an integer-domain Quant (quant_is_int_domain) with that block,
// and `seed` for its stochastic kinds; std::invalid_argument for other kinds.
IntQuantSpec int_quant_spec(QuantSpec spec, uint64_t seed);

// b (8 or 4) and L (127 or 7) of the spec's kind.
uint32_t int_quant_bits(IntQuantKind kind);
int32_t int_quant_levels(IntQuantKind kind);

// w(k) = b + ceil(log2 k): the packed width of a partial sum of k contributions.
uint32_t int_quant_width(IntQuantSpec spec, uint32_t contributors);

// Packed length of count values of a partial sum of `contributors` inputs.
size_t int_quant_packed_bytes(IntQuantSpec spec, size_t count, uint32_t contributors);

// Number of blocks (scales) of a tensor of count elements.
size_t int_quant_block_count(IntQuantSpec spec, size_t count);

// absmax[b] = max(absmax[b], max |x| over this chunk's elements of block b),
// for the blocks the chunk x[0..count) touches: element i has global index
// first_index + i and block (first_index + i) / spec.block, and absmax is the
// whole tensor's array (int_quant_block_count entries, zeros to start). A
// block holding NaN or +-inf gets +inf. Merging by max makes the result
// independent of how the tensor was cut into chunks.
template <class T>
void int_quant_absmax(IntQuantSpec spec, const T* x, size_t count, size_t first_index, T* absmax);

// acc[i] = the agreed max of acc[i] and in[i], by unsigned max of the bits
// (see Design): what the group's max all-reduce computes. acc may be in.
template <class T>
void int_quant_merge_absmax(T* acc, const T* in, size_t count);

// out = pack(encode(x)), a partial of one contribution: int_quant_packed_bytes
// (spec, count, 1) bytes. absmax is the whole tensor's agreed array;
// contributor the encoding peer's stable id (stochastic rounding only).
template <class T>
void int_quant_encode(IntQuantSpec spec, uint64_t contributor, const T* absmax, size_t first_index, const T* x,
                      size_t count, uint8_t* out);

// out = a + b, partials of ka and kb contributions; out has width
// w(ka + kb) and may alias neither input. Errc::protocol if a length or a
// value is wrong; std::invalid_argument if ka + kb > kMaxIntQuantGroup.
Status int_quant_add(IntQuantSpec spec, const uint8_t* a, size_t a_bytes, uint32_t ka, const uint8_t* b, size_t b_bytes,
                     uint32_t kb, size_t count, uint8_t* out);

// out = in + encode(x): a reduce-scatter hop, fused (no packed copy of x).
// in holds k_in contributions; out (k_in + 1) and may not alias in.
template <class T>
Status int_quant_encode_add(IntQuantSpec spec, uint64_t contributor, const T* absmax, size_t first_index, const T* x,
                            size_t count, const uint8_t* in, size_t in_bytes, uint32_t k_in, uint8_t* out);

// out[i] = the sum (op sum) or mean (op avg) that the packed partial of
// `contributors` inputs encodes. Other ops throw std::invalid_argument. On
// failure (Errc::protocol) out's contents are unspecified.
template <class T>
Status int_quant_decode(IntQuantSpec spec, const T* absmax, size_t first_index, const uint8_t* in, size_t in_bytes,
                        uint32_t contributors, ReduceOp op, size_t count, T* out);

namespace int_quant_detail {
// The packers, exposed for the tests: values[i] in two's complement, width w
// in 2..32 bits; unpack sign-extends. out of pack gets ceil(count * w / 8)
// bytes (the last byte's unused high bits 0).
void pack(const int32_t* values, size_t count, uint32_t width, uint8_t* out);
void unpack(const uint8_t* in, size_t count, uint32_t width, int32_t* values);
// The same with the scalar groups only: the definition any vector path
// (AVX-512 VBMI, where the build has it) must match byte for byte.
void pack_scalar(const int32_t* values, size_t count, uint32_t width, uint8_t* out);
void unpack_scalar(const uint8_t* in, size_t count, uint32_t width, int32_t* values);
// The counter-based generator of stochastic rounding (see Design).
uint64_t random_bits(uint64_t key, uint64_t index);
}  // namespace int_quant_detail

}  // namespace ferry
