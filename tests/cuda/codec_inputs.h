// Inputs for comparing the device codecs (and their cores) with the CPU's:
// random data and the edge cases that break a careless port (NaN, inf, -0,
// subnormals, constant blocks, ranges too wide to decode, odd counts and
// partial last blocks). Shared by the CPU core tests and the device tests.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

namespace ferry::codec_inputs {

template <class T>
struct NamedInput {
  std::string name;
  std::vector<T> values;
};

template <class T>
T from_bits(uint64_t bits) {
  T x;
  if constexpr (sizeof(T) == 4) {
    const auto b = static_cast<uint32_t>(bits);
    std::memcpy(&x, &b, 4);
  } else {
    std::memcpy(&x, &bits, 8);
  }
  return x;
}

// Every case has `count` elements (odd counts leave partial last blocks).
template <class T>
std::vector<NamedInput<T>> float_cases(size_t count, uint64_t seed) {
  using limits = std::numeric_limits<T>;
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::uniform_int_distribution<size_t> pick(0, count - 1);
  std::vector<NamedInput<T>> cases;
  const auto add = [&](std::string name, auto fill) {
    std::vector<T> v(count);
    for (size_t i = 0; i < count; ++i) v[i] = fill(i);
    cases.push_back({std::move(name), std::move(v)});
  };
  add("normal", [&](size_t) { return static_cast<T>(normal(rng)); });
  add("normal, scaled 1e-3 and shifted 7", [&](size_t) { return static_cast<T>(7.0 + 1e-3 * normal(rng)); });
  add("random bit patterns", [&](size_t) { return from_bits<T>(rng()); });  // NaNs, infs, subnormals, all of it
  add("subnormals and zeros of both signs", [&](size_t i) {
    const T tiny = limits::denorm_min() * static_cast<T>(rng() % 1000);
    return i % 3 == 0 ? (i % 2 ? -T(0) : T(0)) : (i % 2 ? -tiny : tiny);
  });
  add("all -0", [&](size_t) { return -T(0); });
  add("constant", [&](size_t) { return T(3.25); });
  add("near the largest finite (blocks too wide to decode)",
      [&](size_t i) { return (i % 2 ? T(-1) : T(1)) * limits::max() * (rng() % 2 ? T(1) : T(0.5)); });
  {
    std::vector<T> v(count);
    for (T& x : v) x = static_cast<T>(normal(rng));
    for (size_t k = 0; k < 1 + count / 300; ++k) v[pick(rng)] = limits::quiet_NaN();
    for (size_t k = 0; k < 1 + count / 300; ++k) v[pick(rng)] = -limits::infinity();
    for (size_t k = 0; k < 1 + count / 300; ++k) v[pick(rng)] = limits::infinity();
    v[count - 1] = -limits::quiet_NaN();
    cases.push_back({"normal with NaN, +-inf here and there", std::move(v)});
  }
  {
    std::vector<T> v(count);
    for (T& x : v) x = static_cast<T>(normal(rng) * 1e-6);
    for (size_t k = 0; k < 1 + count / 100; ++k) v[pick(rng)] = static_cast<T>(1e4);  // outliers
    cases.push_back({"small values with outliers", std::move(v)});
  }
  return cases;
}

inline std::vector<uint8_t> random_bytes(size_t size, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> bytes(size);
  for (uint8_t& b : bytes) b = static_cast<uint8_t>(rng() >> 56);
  return bytes;
}

}  // namespace ferry::codec_inputs
