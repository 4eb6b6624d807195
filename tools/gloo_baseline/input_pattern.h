// The deterministic input of every rank and the exact sum all ranks must reach.
//
// Element i of rank r is a small integer u(seed, r, i) in [-32, 31]; integer
// dtypes hold u, floating dtypes hold u / 8. Any sum of up to 2^18 such values
// is exact in f32 whatever the order of the additions, so a correct all-reduce
// matches the expected buffer bit for bit and `correct` can demand equality.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>

namespace ferry::gloo_baseline {

// The integer behind element `index` of `rank`'s input.
std::int32_t pattern_units(std::uint64_t seed, int rank, std::uint64_t index);

// Writes rank's input into out (out[i] = value of element i).
template <typename T>
void fill_input(std::span<T> out, std::uint64_t seed, int rank);

// True when result[i] is exactly the sum over ranks 0..world-1 of their inputs
// at i, for every i. On the first mismatch, *first_bad (if given) is its index.
template <typename T>
bool matches_expected_sum(std::span<const T> result, std::uint64_t seed, int world, std::size_t* first_bad);

// xxh3-64 of the buffer's bytes (the result_hash of the JSON output).
std::uint64_t hash_bytes(const void* data, std::size_t bytes);

}  // namespace ferry::gloo_baseline
