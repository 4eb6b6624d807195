// The bytes of the sync workload's shared state: generated weights-like f32,
// or the first bytes of a --state-file (e.g. a trained model's parameters).
//
// Generated content: f32 values ~ N(0, 0.02^2) (Irwin-Hall of four 16-bit
// uniforms; the usual init scale of a transformer's weights). Like real
// weights, the sign/exponent byte has a few common values and the mantissa
// bytes are noise, so zstd gains little on it; small-integer test patterns
// would compress absurdly well and say nothing about weights.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace ferry::bench {

// Seeds: the holders' (and the TCP baseline's) content, and the newcomer's different bytes.
inline constexpr std::uint64_t kHolderSeed = 1;
inline constexpr std::uint64_t kNewcomerSeed = 2;

// Writes `bytes` of weights-like f32 (a tail of fewer than 4 bytes gets noise).
void fill_weights(void* out, std::size_t bytes, std::uint64_t seed);

// The file's size. Throws std::runtime_error naming the file.
std::size_t state_file_bytes(const std::string& path);

// Reads the first `bytes` of the file into out. Throws std::runtime_error when
// it cannot, or when the file is shorter (never repeated: a repeated file
// would compress far better than its content does).
void load_state_file(const std::string& path, void* out, std::size_t bytes);

// The state's content for the holders (and the baseline's sender): the file's if given, else generated.
void fill_holder_state(const std::string& state_file, void* out, std::size_t bytes);

}  // namespace ferry::bench
