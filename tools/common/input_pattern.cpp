#include "input_pattern.h"

#include <xxhash.h>

#include <algorithm>
#include <cinttypes>
#include <cstdio>
#include <type_traits>

namespace ferry::tooling {

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

}  // namespace

std::int32_t pattern_units(std::uint64_t seed, int rank, std::uint64_t index) {
  const std::uint64_t key = seed * 0x9E3779B97F4A7C15ULL + static_cast<std::uint64_t>(rank) * 0xD1B54A32D192ED03ULL +
                            index * 0x8CB92BA72F3D8DD7ULL;
  return static_cast<std::int32_t>(mix64(key) >> 58) - 32;
}

namespace {

template <typename T>
T element_value(std::int64_t units) {
  if constexpr (std::is_floating_point_v<T>) {
    return static_cast<T>(units) / T{8};  // exact: a multiple of 1/8 well inside the mantissa
  } else {
    return static_cast<T>(units);
  }
}

// prod's input: -2, -1, 1 or 2.
std::int32_t prod_factor(std::uint64_t seed, int rank, std::uint64_t index) {
  const std::int32_t units = pattern_units(seed, rank, index);
  const std::int32_t magnitude = (units & 1) != 0 ? 2 : 1;
  return units < 0 ? -magnitude : magnitude;
}

template <typename T>
void fill_typed(ReduceKind op, T* out, std::size_t count, std::uint64_t seed, int rank) {
  if (op == ReduceKind::prod) {
    for (std::size_t i = 0; i < count; ++i) out[i] = static_cast<T>(prod_factor(seed, rank, i));
    return;
  }
  for (std::size_t i = 0; i < count; ++i) out[i] = element_value<T>(pattern_units(seed, rank, i));
}

template <typename T>
T expected_product(std::uint64_t seed, int world, std::size_t index) {
  if constexpr (std::is_integral_v<T>) {
    using Unsigned = std::make_unsigned_t<T>;  // wraps where the signed product would overflow
    Unsigned product = 1;
    for (int r = 0; r < world; ++r) {
      product = static_cast<Unsigned>(product * static_cast<Unsigned>(prod_factor(seed, r, index)));
    }
    return static_cast<T>(product);
  } else {
    T product = 1;
    for (int r = 0; r < world; ++r) product *= static_cast<T>(prod_factor(seed, r, index));
    return product;
  }
}

template <typename T>
T expected_value(ReduceKind op, std::uint64_t seed, int world, std::size_t index) {
  if (op == ReduceKind::prod) return expected_product<T>(seed, world, index);
  std::int64_t units = pattern_units(seed, 0, index);
  for (int r = 1; r < world; ++r) {
    const std::int64_t next = pattern_units(seed, r, index);
    switch (op) {
      case ReduceKind::sum:
      case ReduceKind::avg: units += next; break;
      case ReduceKind::min: units = std::min(units, next); break;
      case ReduceKind::max: units = std::max(units, next); break;
      case ReduceKind::prod: break;  // returned above
    }
  }
  if (op != ReduceKind::avg) return element_value<T>(units);
  if constexpr (std::is_integral_v<T>) {
    return static_cast<T>(units / world);  // truncates toward zero
  } else {
    return element_value<T>(units) / static_cast<T>(world);
  }
}

template <typename T>
bool matches_typed(ReduceKind op, const T* result, std::size_t count, std::uint64_t seed, int world,
                   std::size_t* first_bad) {
  for (std::size_t i = 0; i < count; ++i) {
    if (result[i] != expected_value<T>(op, seed, world, i)) {
      if (first_bad != nullptr) *first_bad = i;
      return false;
    }
  }
  return true;
}

}  // namespace

void fill_input(ElemType type, ReduceKind op, void* out, std::size_t count, std::uint64_t seed, int rank) {
  switch (type) {
    case ElemType::f32: return fill_typed(op, static_cast<float*>(out), count, seed, rank);
    case ElemType::f64: return fill_typed(op, static_cast<double*>(out), count, seed, rank);
    case ElemType::i32: return fill_typed(op, static_cast<std::int32_t*>(out), count, seed, rank);
  }
}

bool matches_expected(ElemType type, ReduceKind op, const void* result, std::size_t count, std::uint64_t seed, int world,
                      std::size_t* first_bad) {
  switch (type) {
    case ElemType::f32: return matches_typed(op, static_cast<const float*>(result), count, seed, world, first_bad);
    case ElemType::f64: return matches_typed(op, static_cast<const double*>(result), count, seed, world, first_bad);
    case ElemType::i32:
      return matches_typed(op, static_cast<const std::int32_t*>(result), count, seed, world, first_bad);
  }
  return false;
}

std::string hash_hex(const void* data, std::size_t bytes) {
  char text[17];
  std::snprintf(text, sizeof text, "%016" PRIx64, static_cast<std::uint64_t>(XXH3_64bits(data, bytes)));
  return text;
}

}  // namespace ferry::tooling
