// Helpers of the sparse codec's tests (core/sparse_codec.h): encoding to a
// vector, decoding one contribution to a dense tensor, test inputs.
#pragma once

#include <bit>
#include <cstdint>
#include <random>
#include <span>
#include <vector>

#include "core/half.h"
#include "core/sparse_codec.h"

namespace ferry::sparse_test {

using Bytes = std::vector<uint8_t>;

inline Bytes encode(SparseSpec spec, const std::vector<float>& x, std::vector<float>* residual = nullptr) {
  Bytes out(sparse_max_encoded_bytes(spec, x.size()));
  if (residual != nullptr) residual->assign(x.size(), -7.0f);
  float* r = residual != nullptr ? residual->data() : nullptr;
  out.resize(sparse_encode(spec, DType::f32, x.data(), x.size(), out.data(), r));
  return out;
}

// The dense tensor one contribution stands for (0 where nothing is sent).
inline std::vector<float> decode(const Bytes& wire, size_t count) {
  std::vector<float> out(count, 0.0f);
  const std::span<const uint8_t> one[1] = {wire};
  const Status st = sparse_decode_sum(one, out.data(), count);
  if (!st.ok()) throw Error(st.code, st.message);
  return out;
}

// normal(0, scale) values.
inline std::vector<float> normal_values(size_t count, uint64_t seed, float scale = 1.0f) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<float> normal(0.0f, scale);
  std::vector<float> v(count);
  for (float& x : v) x = normal(rng);
  return v;
}

inline uint32_t bits_of(float f) { return std::bit_cast<uint32_t>(f); }

inline bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (bits_of(a[i]) != bits_of(b[i])) return false;
  }
  return true;
}

}  // namespace ferry::sparse_test
