// The deterministic input of every peer and the exact result all peers must reach.
//
// Element i of rank r's input for seed s is a small integer u(s, r, i) in
// [-32, 31]; i32 holds u, f32/f64 hold u / 8. Every partial sum of up to 2^18
// such values is exact in f32 whatever the order of the additions (and min/max
// are exact anyway), so a correct all-reduce matches the expected buffer bit for
// bit and `correct` can demand equality. avg divides that exact sum once, as
// ferry does: one IEEE division (floats) or truncation toward zero (i32).
// prod has inputs of its own, +-1 or +-2 (the sign and low bit of u): every
// partial product of up to 126 of them is a power of two, exact in f32, and in
// i32 it wraps modulo 2^32 as ferry's integer prod does, alike in any order.
//
// ferry-bench and ferry-gloo-bench share it: with seed 1 (ferry-bench's op 0)
// ferry's result and Gloo's are the same bytes, so their hashes can be compared.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "element_type.h"

namespace ferry::tooling {

// The seed of the k-th concurrent operation (tag k): distinct inputs per op, so
// a chunk delivered to the wrong op shows up as a wrong result.
inline std::uint64_t op_seed(std::uint32_t op_index) { return 1 + std::uint64_t{op_index}; }

// The integer behind element `index` of `rank`'s input.
std::int32_t pattern_units(std::uint64_t seed, int rank, std::uint64_t index);

// Writes rank's input for `op`: `count` elements of `type` at `out`.
void fill_input(ElemType type, ReduceKind op, void* out, std::size_t count, std::uint64_t seed, int rank);
// The input of sum, avg, min and max (all but prod).
inline void fill_input(ElemType type, void* out, std::size_t count, std::uint64_t seed, int rank) {
  fill_input(type, ReduceKind::sum, out, count, seed, rank);
}

// True when `result` equals op over ranks 0..world-1 of their inputs for op, bit
// for bit. On the first mismatch, *first_bad (if given) is its element index.
bool matches_expected(ElemType type, ReduceKind op, const void* result, std::size_t count, std::uint64_t seed, int world,
                      std::size_t* first_bad);

// xxh3-64 of the bytes, as 16 lower-case hex digits (Gloo's result_hash form).
std::string hash_hex(const void* data, std::size_t bytes);

}  // namespace ferry::tooling
