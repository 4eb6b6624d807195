// Quantization codecs of the all-reduce: lossy wire formats for float data.
//
// How the ring engine uses them (per chunk; T is the accumulation type, float
// for f16/bf16/f32 data and double for f64):
//  - reduce-scatter hop: out = encode(decode(in) + local), fused below as
//    quant_decode_add_encode();
//  - a segment's owner: acc = decode(in) + local (quant_decode_add), finalize
//    (avg divides once), encode once, send those bytes and decode the very same
//    bytes into its own result;
//  - all-gather: decode the received bytes, forward them unchanged.
// Every peer's result is decode(the owner's bytes), and decode is a pure
// function of the bytes (IEEE operations in a fixed order, no FMA, run in a
// fixed floating-point environment, below), so peers agree bit for bit even if
// their encoders were built for different CPUs. The encoders are deterministic
// too: the AVX-512, AVX2 and scalar paths give identical bytes (unit-tested).
// Blocks restart at every call, so peers must call with the same chunk
// boundaries (the engine's plan is the same everywhere).
//
// Floating-point environment: each call sets MXCSR to its default (round to
// nearest even, no flush-to-zero, no denormals-are-zero, exceptions masked)
// and restores the caller's on return, so a caller that enabled FTZ/DAZ (e.g.
// torch.set_flush_denormal, or a library built with -ffast-math) still gets
// the same bits as everyone else. (x86 only; elsewhere the caller's default
// environment is assumed.)
//
// ---------------------------------------------------------------------------
// Wire format (little-endian; T = float: 4-byte IEEE binary32, T = double:
// 8-byte binary64; L = 255 for u8/i8, 15 for u4)
//
// u8, i8, u4 — affine min-max per block. The chunk's `count` elements are cut
// into blocks of spec.block elements (the last block may be shorter, n < block
// elements). Each block is laid out as
//     T min | T scale | codes
// where codes are n bytes (u8, i8) or ceil(n/2) bytes (u4: element 2k in the
// low nibble of byte k, element 2k+1 in the high nibble; an odd block's last
// high nibble is 0). Blocks follow each other with no padding:
//     bytes = sum over blocks of (2 * sizeof(T) + code bytes).
// A code q in 0..L (u8: the byte; i8: the int8 value plus 128, i.e. the byte
// XOR 0x80; u4: the nibble) decodes to
//     x' = min + T(q) * scale             (IEEE multiply, then add: 2 roundings)
// Encoding of a block of finite values x[0..n):
//     min, max = the least and the greatest x (-0 counts as below +0)
//     scale    = (max - min) / L           (IEEE, in T)
//     q        = roundTiesToEven(clamp((x - min) / scale, 0, L))
// so |x' - x| <= scale / 2, plus a few ulps of the operands' magnitude (and,
// for subnormal scales, L * 2^-150 (float) / L * 2^-1075 (double)).
// Special blocks:
//  - constant: scale == 0 (every x equal, or a range so small that range / L
//    underflows to 0). Codes are zero bytes (i8 too); every element decodes
//    to exactly min (bits included, so a block of -0 stays -0).
//  - non-finite: min and scale are both the quiet NaN (0x7fc00000 /
//    0x7ff8000000000000), codes are zero bytes, and every element decodes to
//    that NaN. The encoder writes it for a block holding any NaN or ±inf, and
//    for a finite block so wide that min + L * scale overflows T (a range at
//    or near the largest finite T, ~3.4e38 for float). A NaN pseudo-gradient
//    thus stays NaN through every hop, and nothing decodes to a silently
//    wrong finite value; ±inf is not preserved (it becomes NaN).
// The decoder rejects (Errc::protocol) a chunk whose length is not
// quant_encoded_bytes(), and any block whose (min, scale) is neither the
// non-finite marker nor finite with scale >= +0 (sign bit clear) and
// min + L * scale finite. Code bytes are never rejected: each value is valid.
// Byte counts against f32, default block 256: u8 25.8 %, u4 13.3 %.
//
// f16, bf16 — each element is IEEE binary16 / bfloat16 of the value, rounded
// to nearest-even (double data rounds once, directly from double), 2 bytes,
// no metadata. Overflow gives ±inf, as IEEE; NaN stays NaN (quiet, sign and
// top payload bits kept, see half.h); subnormals round exactly. Decoding is
// exact widening, and every length-correct chunk is valid.
//
// none — raw data is the engine's business (it sends the data dtype, not T):
// the functions here throw std::invalid_argument for it.
// ---------------------------------------------------------------------------
//
// Argument errors (kind none or unknown, block outside 1..kMaxQuantBlock) are
// the caller's bugs and throw std::invalid_argument; bad bytes from a peer are
// a Status with Errc::protocol, and no input makes a decoder read outside
// [in, in + in_bytes) or write outside its output.
// All functions are reentrant and may run concurrently on different buffers.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string_view>

#include "core/error.h"

namespace ferry {

// The numbers travel on the wire and through the C API: append only.
// i8h .. i4h_sr are the integer-domain modes of int_quant.h (a shared scale,
// integers summed along the ring), with round-to-nearest or stochastic
// rounding; the functions of this file are the per-hop codecs and refuse them.
enum class Quant : uint8_t { none = 0, u8 = 1, i8 = 2, f16 = 3, bf16 = 4, u4 = 5, i8h = 6, i4h = 7, i8h_sr = 8, i4h_sr = 9 };
inline constexpr int kQuantCount = 10;

std::string_view quant_name(Quant kind);  // "none", "u8", ...; throws std::invalid_argument if invalid
std::optional<Quant> parse_quant(std::string_view name);
bool quant_valid(uint32_t raw);
// True for the integer-domain modes (int_quant.h): sum and avg only.
bool quant_is_int_domain(Quant kind);

// 256 is the smallest power of two that meets the byte budgets with T-sized
// metadata (u8 <= 26 %, u4 <= 13.5 % of f32: 128 gives 26.6 % / 14.1 %).
// Larger blocks save little (512: 25.4 % / 12.9 %) and lose precision, as a
// block's range grows with its length: on normal data the RMS error of u8 is
// 5.6e-4 / 6.1e-4 / 6.6e-4 / 7.0e-4 of the data's range at 128 / 256 / 512 /
// 1024, and small blocks also confine an outlier's damage. Measured by
// ferry_quant_report (tools/microbench/quant_error_report.cpp).
inline constexpr uint32_t kDefaultQuantBlock = 256;
// Past this a block's metadata is negligible; the bound keeps the fused
// functions' per-block scratch small.
inline constexpr uint32_t kMaxQuantBlock = uint32_t{1} << 16;

struct QuantSpec {
  Quant kind = Quant::none;
  uint32_t block = kDefaultQuantBlock;  // elements per (min, scale) block; used by u8, i8, u4
};

// True when spec names a mode (not none) with a block in 1..kMaxQuantBlock.
bool quant_spec_valid(QuantSpec spec);

// The templates below are defined for T = float and T = double.

// Exact length of the encoding of count elements. The receiver checks it.
template <class T>
size_t quant_encoded_bytes(QuantSpec spec, size_t count);

// dst receives quant_encoded_bytes(spec, count) bytes; it must not overlap src.
template <class T>
void quant_encode(QuantSpec spec, const T* src, size_t count, uint8_t* dst);

// dst[0..count) = decode(src). bytes must equal quant_encoded_bytes(spec, count).
// On failure (Errc::protocol) dst's contents are unspecified.
template <class T>
Status quant_decode(QuantSpec spec, const uint8_t* src, size_t bytes, size_t count, T* dst);

// acc[i] = decode(in)[i] + local[i] (in that order, one IEEE addition; a
// non-finite block gives its quiet NaN whatever local holds). acc may alias
// local exactly. On failure acc's contents are unspecified.
template <class T>
Status quant_decode_add(QuantSpec spec, const uint8_t* in, size_t in_bytes, const T* local, size_t count,
                        T* acc);

// out = encode(decode(in) + local), block by block through L1-sized scratch:
// the same bytes as quant_decode_add followed by quant_encode. out receives
// quant_encoded_bytes(spec, count) bytes and may alias in exactly (the same
// layout, each block read before it is written). On failure out's contents
// are unspecified.
template <class T>
Status quant_decode_add_encode(QuantSpec spec, const uint8_t* in, size_t in_bytes, const T* local, size_t count,
                               uint8_t* out);

}  // namespace ferry
