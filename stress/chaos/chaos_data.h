// What every chaos peer feeds into an all-reduce, and what the result must be.
//
// The input of peer `id` for the k-th all-reduce of training step `step` in a
// run seeded `seed` is f32 values u/8 with u a small integer drawn from
// (seed, step, k, id) (tools/common input_pattern), so a sum over any world of
// up to 2^18 peers is exact in f32 in any order: the reference result of an
// unquantized sum is known bit for bit from the ring's ids alone. The harness
// recomputes it; quantized peers compare against it to bound their error.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "ferry/ferry.h"

namespace ferry::chaos {

// The input pattern's seed for one all-reduce.
std::uint64_t op_seed(std::uint64_t seed, std::uint64_t step, std::uint32_t k);

// Peer `id`'s input (count f32 values) for the all-reduce seeded op_seed.
void fill_peer_input(float* out, std::size_t count, std::uint64_t op_seed, std::uint64_t id);

// The exact sum over the ring's members.
std::vector<float> reference_sum(std::size_t count, std::uint64_t op_seed, const std::vector<std::uint64_t>& ring);

// The shared state the peers sync every few steps (one f32 tensor, as DiLoCo
// syncs its outer model): its content at each revision is known from (seed,
// revision) alone, so the harness checks a synced peer's bytes by their hash.
inline constexpr std::size_t kStateFloats = 4096;
std::vector<float> state_content(std::uint64_t seed, std::uint64_t revision);

// Every step ends with one all-gather (when --gather-bytes > 0), reported as op k = kGatherK
// (above any all-reduce's k). Peer `id`'s contribution at `step`: 0..max_bytes bytes (0 and 1
// included), its length and bytes drawn from (seed, step, id); the reference result is the
// contributions of the ring's members in ring order, concatenated, bit for bit.
inline constexpr std::uint32_t kGatherK = 1u << 20;
std::vector<std::uint8_t> gather_contribution(std::uint64_t seed, std::uint64_t step, std::uint64_t id,
                                              std::size_t max_bytes);
std::vector<std::uint8_t> reference_gather(std::uint64_t seed, std::uint64_t step, const std::vector<std::uint64_t>& ring,
                                           std::size_t max_bytes);

// xxh3-64 of the bytes as 16 hex digits.
std::string result_hash(const void* data, std::size_t bytes);

// Largest |result - reference| a correct quantized ring all-reduce over `world`
// peers may show with these inputs (each value in [-4, 3.875], so partial sums
// span at most 8*world; every hop re-quantizes once). 0 for FERRY_QUANT_NONE.
double quant_error_bound(ferry_quant quant, std::size_t world);

}  // namespace ferry::chaos
