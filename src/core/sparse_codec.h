// A sparse codec for outer steps (issue 38; SparseLoCo, arXiv 2508.15706):
// per chunk of a pseudo-gradient, keep the k entries of largest magnitude,
// send their indices and their values quantized to 2, 4 or 8 bits, and hand
// the caller what was not sent (the error-feedback residual). Contributions
// do not add along a ring (every peer's indices differ), so they travel in an
// all-gather and every peer decodes and sums all N of them in rank order.
//
// ---------------------------------------------------------------------------
// Selection
//
// The tensor of count elements is cut into chunks of spec.chunk elements (the
// last may be shorter: n < chunk). A chunk of n elements sends k_c = min(k, n)
// entries: the first k_c of its elements in the order
//     larger |x| first, and among equal |x| the lower index first,
// where |x| is compared as the bit pattern of the f32 value with its sign bit
// cleared (bf16/f16 input is widened to f32 first, exactly). That is a total
// order on bits, so the chosen set is the same on every machine whatever the
// algorithm: -0 ties with +0, +inf beats every finite value, a NaN beats +inf.
// Entries are written in ascending index order.
// Algorithm (sparse_select.cpp): a histogram of the f32 exponents of the
// chunk, a branch-free pass that keeps the indices in and above the threshold
// bin, then nth_element over that bin's magnitudes only, to find the exact
// k_c-th key. Chosen over std::nth_element on the whole chunk, which measured
// 4-5x slower (ferry_core_bench sparse_select/*, 2 %, chunk 4096: 1.93 against
// 0.41 GB/s of f32 on one core of the 2-core dev machine, shared).
//
// Values (one scale pair per chunk, f32): with L = 2^(b-1) - 1 (1, 7, 127 for
// b = 2, 4, 8) and lo, hi the least and the greatest |x| of the chunk's
// selected entries:
//     lo, step = hi - lo then / L        (IEEE f32: step = (hi - lo) / L)
//     m        = roundTiesToEven(clamp((|x| - lo) / step, 0, L))   (0 when step == 0)
//     code     = sign(x) << (b - 1) | m  (sign: the f32 sign bit, so -0 keeps it)
// and a code decodes to
//     v = lo + f32(m) * step, negated when the code's sign bit is set
// (two IEEE roundings, multiply then add, no FMA). Sign and magnitude, not a
// signed range around zero: every sent entry is among the largest, so a level
// at zero would waste a code. |v - x| <= step / 2 plus an ulp or two.
// Non-finite chunk: when a selected entry is NaN or +-inf (so whenever the
// chunk holds one), or lo + L * step overflows f32, lo and step are both the
// quiet NaN 0x7fc00000, codes are 0, and every sent entry decodes to that NaN.
//
// Residual (error feedback): r[i] = x[i] - d[i] in f32, where d is what
// sparse_decode_sum makes of this contribution alone (d = +0 + v where i is
// sent, so a -0 value gives +0; d = +0 elsewhere): what was not sent, plus
// the quantization error of what was. SparseLoCo keeps it locally.
// ---------------------------------------------------------------------------
// Byte layout (version 1, little-endian):
//   header, 24 bytes:
//     0  u8  'F'        1  u8  'S'      (magic)
//     2  u8  version = 1
//     3  u8  bits: 2, 4 or 8
//     4  u8  dtype of the encoded input (DType: f16 8, bf16 9, f32 10)
//     5  u8[3] zero
//     8  u32 chunk (1..kMaxSparseChunk)
//    12  u32 k     (1..chunk)
//    16  u64 count (0..kMaxSparseCount)
//   then per chunk, in order, with r = floor(log2(chunk / k)) (0..16):
//     f32 lo | f32 step | k_c indices, Rice-coded gaps | k_c codes at b bits
//   Indices are the positions within the chunk, strictly increasing; each is
//   sent as its gap g = index - previous - 1 (previous = -1 for the first):
//   g >> r one-bits, a zero bit, then g's r low bits. Each of the two fields is
//   a little-endian bit stream (bit 0 is the low bit of byte 0, a value's low
//   bit first) padded with zero bits to a whole byte. A chunk's length thus
//   depends on its indices; sparse_max_encoded_bytes() bounds it (the gaps
//   sum to at most n - k_c, so their quotients to at most (n - k_c) >> r).
// Why Rice and not ceil(log2 chunk) bits an index: the gaps of a top-k set
// are close to geometric with mean chunk / k, for which Rice with this r is
// near-optimal. Measured on normal(0, 1) data, chunk 4096 (2000 chunks):
// 8.1 / 7.1 / 6.6 bits an index at 1 / 2 / 3 % against a fixed 12, so a
// chunk takes 61 / 102 / 141 bytes at 2-bit values instead of 81 / 152 / 224
// (25-37 % fewer bytes); encoding costs the same (the indices are a few % of
// the work) and a decoder walks the chunks in order.
// Cost: chunk 4096, k 82 (2 %), 2 bits: ~102 bytes for 16 KiB of f32
// (0.62 %, ~10 bits a sent entry with the scale pair); 1 % (k 41): ~61 bytes
// (0.37 %); 3 % (k 123): ~141 (0.86 %); the header's 24 bytes once.
//
// Decoding refuses (Errc::protocol, with a message that says what is wrong)
// a contribution whose length is outside what its header allows or that does
// not end exactly after its last chunk, whose magic, version, bits, dtype,
// chunk, k or count is out of range, whose reserved
// bytes or padding bits are not zero, whose indices run past the chunk's
// length (the gap code makes them increase), or whose (lo, step) is neither
// the NaN marker nor finite with both sign bits clear and lo + L * step
// finite. Codes are never refused. No input makes it read outside the bytes
// it was given, and it allocates nothing from a length it read.
// ---------------------------------------------------------------------------
// Determinism contract
//  - Encoding is a pure function of (spec, dtype, the input's bits): the same
//    bytes on every machine (no CPU-specific result; IEEE operations in the
//    default floating-point environment, which each call sets: quant.h).
//  - sparse_decode_sum() is a pure function of the contributions' bytes in
//    rank order: out[i] = fl(...fl(fl(+0 + v_a) + v_b)...) over the ranks
//    a < b < ... whose contribution sends i, in ascending rank order, f32
//    accumulation, round to nearest even, no FMA. So every peer that holds the
//    same N contributions gets the same bits, whatever order they arrived in.
//    (An avg is the caller's: divide out by N once, the same way everywhere.)
// ---------------------------------------------------------------------------
//
// Errors: an invalid spec or dtype is the caller's bug (std::invalid_argument);
// bad bytes from a peer are a Status with Errc::protocol.
// Thread-safety: all functions are pure and reentrant; they may run
// concurrently on different buffers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

#include "core/dtype.h"
#include "core/error.h"

namespace ferry {

inline constexpr uint8_t kSparseFormatVersion = 1;
inline constexpr size_t kSparseHeaderBytes = 24;
// Indices fit 16 bits, and the encoder's per-chunk scratch stays small.
inline constexpr uint32_t kMaxSparseChunk = uint32_t{1} << 16;
// 2^40 elements (4 TiB of f32): byte counts of a contribution never overflow.
inline constexpr uint64_t kMaxSparseCount = uint64_t{1} << 40;

struct SparseSpec {
  uint32_t chunk = 4096;  // elements a chunk, 1..kMaxSparseChunk (the paper's 4096)
  uint32_t k = 82;        // entries sent a chunk, 1..chunk (82 / 4096: 2 %)
  uint32_t bits = 2;      // bits a value: 2, 4 or 8
};

// True when chunk, k and bits are in range.
bool sparse_spec_valid(SparseSpec spec);

// The k of a density in (0, 1]: round(density * chunk), at least 1.
uint32_t sparse_k_for_density(uint32_t chunk, double density);

// The most bytes the contribution of count elements can take (header
// included): the buffer to give sparse_encode. std::invalid_argument for an
// invalid spec or count > kMaxSparseCount.
size_t sparse_max_encoded_bytes(SparseSpec spec, size_t count);

// Writes the contribution of x[0..count), of dtype f32, bf16 or f16 (others:
// std::invalid_argument), to out (sparse_max_encoded_bytes(spec, count)
// bytes), and returns its length; out must not overlap x. residual, when not null, receives count f32 values (see
// Residual). It may be x itself when dtype is f32: then only the sent
// entries are written (in place, the error-feedback accumulator's update).
size_t sparse_encode(SparseSpec spec, DType dtype, const void* x, size_t count, uint8_t* out, float* residual);

// What a contribution's header says.
struct SparseHeader {
  SparseSpec spec;
  DType dtype = DType::f32;
  uint64_t count = 0;
};

// Reads and checks the header, and that in_bytes is within the lengths it
// allows. Does not look at the chunks (sparse_validate does).
Status sparse_read_header(const uint8_t* in, size_t in_bytes, SparseHeader* header);

// Every check of the decoder (see Byte layout), without writing anything.
Status sparse_validate(const uint8_t* in, size_t in_bytes, SparseHeader* header);

// out[0..count) = the sum of the contributions, in the order given (rank
// order: contributions[r] is rank r's), see the determinism contract. Every
// contribution is validated, and its header's count must equal count, before
// out is written: on failure out is untouched and the message names the rank.
// Contributions may differ in chunk, k, bits and dtype (each says its own).
// An empty contribution (0 bytes) sends nothing: a member that trained
// nothing (a newcomer) contributes it rather than an encoding of zeros.
Status sparse_decode_sum(std::span<const std::span<const uint8_t>> contributions, float* out, size_t count);

// out[i] += the contribution's value at each i it sends (one IEEE f32
// addition an entry, in index order): the step sparse_decode_sum repeats. For
// a caller that keeps the rank order itself; out is partly written on failure.
Status sparse_decode_add(const uint8_t* in, size_t in_bytes, float* out, size_t count);

namespace sparse_detail {
// The chunk selection (sparse_select.cpp): writes the k_c = min(k, n) chosen
// positions of mag[0..n) in ascending order to selected and returns k_c.
// mag[i] is |x[i]|'s f32 bit pattern (sign bit clear). scratch holds 2n
// uint32_t. The reference definition is select_reference (a full sort).
uint32_t select_top_k(const uint32_t* mag, uint32_t n, uint32_t k, uint32_t* scratch, uint32_t* selected);
uint32_t select_reference(const uint32_t* mag, uint32_t n, uint32_t k, uint32_t* selected);
}  // namespace sparse_detail

}  // namespace ferry
