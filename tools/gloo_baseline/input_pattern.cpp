#include "input_pattern.h"

#include <xxhash.h>

#include <type_traits>

namespace ferry::gloo_baseline {

namespace {

// splitmix64's finaliser: a cheap bijection that spreads every input bit.
std::uint64_t mix64(std::uint64_t x) {
  x ^= x >> 30;
  x *= 0xBF58476D1CE4E5B9ULL;
  x ^= x >> 27;
  x *= 0x94D049BB133111EBULL;
  x ^= x >> 31;
  return x;
}

template <typename T>
T element_value(std::int64_t units) {
  if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(units) / T{8};  // exact: a multiple of 1/8 well inside the mantissa
  } else {
    return static_cast<T>(units);
  }
}

}  // namespace

std::int32_t pattern_units(std::uint64_t seed, int rank, std::uint64_t index) {
  const std::uint64_t key = seed * 0x9E3779B97F4A7C15ULL + static_cast<std::uint64_t>(rank) * 0xD1B54A32D192ED03ULL +
                            index * 0x8CB92BA72F3D8DD7ULL;
  return static_cast<std::int32_t>(mix64(key) >> 58) - 32;
}

template <typename T>
void fill_input(std::span<T> out, std::uint64_t seed, int rank) {
  for (std::size_t i = 0; i < out.size(); ++i) {
    out[i] = element_value<T>(pattern_units(seed, rank, i));
  }
}

template <typename T>
bool matches_expected_sum(std::span<const T> result, std::uint64_t seed, int world, std::size_t* first_bad) {
  for (std::size_t i = 0; i < result.size(); ++i) {
    std::int64_t units = 0;
    for (int r = 0; r < world; ++r) {
      units += pattern_units(seed, r, i);
    }
    if (result[i] != element_value<T>(units)) {
      if (first_bad != nullptr) {
        *first_bad = i;
      }
      return false;
    }
  }
  return true;
}

std::uint64_t hash_bytes(const void* data, std::size_t bytes) { return XXH3_64bits(data, bytes); }

template void fill_input<float>(std::span<float>, std::uint64_t, int);
template void fill_input<double>(std::span<double>, std::uint64_t, int);
template void fill_input<std::int32_t>(std::span<std::int32_t>, std::uint64_t, int);
template bool matches_expected_sum<float>(std::span<const float>, std::uint64_t, int, std::size_t*);
template bool matches_expected_sum<double>(std::span<const double>, std::uint64_t, int, std::size_t*);
template bool matches_expected_sum<std::int32_t>(std::span<const std::int32_t>, std::uint64_t, int, std::size_t*);

}  // namespace ferry::gloo_baseline
