// Inputs the core benchmarks share: 64 MiB of normal(0, 1) f32 a seed, made
// once a process (the buffers are far larger than the caches, so the figures
// are memory-bound). Four distinct buffers at most: seed % 4.
#pragma once

#include <cstddef>
#include <cstdint>
#include <random>
#include <vector>

namespace ferry::bench {

inline constexpr size_t kNormalFloats = (size_t{64} << 20) / sizeof(float);

inline const std::vector<float>& normal_floats(uint64_t seed) {
  static std::vector<float> data[4];
  std::vector<float>& v = data[seed % 4];
  if (v.empty()) {
    v.resize(kNormalFloats);
    std::mt19937_64 rng(seed);
    std::normal_distribution<float> normal(0.0f, 1.0f);
    for (float& x : v) x = normal(rng);
  }
  return v;
}

}  // namespace ferry::bench
