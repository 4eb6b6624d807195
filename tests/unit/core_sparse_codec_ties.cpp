// The sparse codec's selection is one total order (core/sparse_codec.h,
// Selection): larger magnitude bits first, then the lower index. The fast
// select (histogram, then nth_element on the threshold bin) must choose
// exactly what a full stable sort chooses, on inputs made of ties: every
// element equal, a few distinct values, +0 against -0, NaN and inf, one
// exponent for the whole chunk (the slow path), and every k.
#include <algorithm>
#include <catch2/catch.hpp>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "sparse_codec_fixture.h"

using namespace ferry;
using namespace ferry::sparse_test;

namespace {

std::vector<uint32_t> fast(const std::vector<uint32_t>& mag, uint32_t k) {
  const auto n = static_cast<uint32_t>(mag.size());
  std::vector<uint32_t> scratch(2 * size_t{n}), out(std::min(k, n));
  out.resize(sparse_detail::select_top_k(mag.data(), n, k, scratch.data(), out.data()));
  return out;
}

std::vector<uint32_t> reference(const std::vector<uint32_t>& mag, uint32_t k) {
  std::vector<uint32_t> out(std::min<size_t>(k, mag.size()));
  out.resize(sparse_detail::select_reference(mag.data(), static_cast<uint32_t>(mag.size()), k, out.data()));
  return out;
}

std::vector<uint32_t> magnitudes(const std::vector<float>& x) {
  std::vector<uint32_t> mag(x.size());
  for (size_t i = 0; i < x.size(); ++i) mag[i] = bits_of(x[i]) & 0x7fffffffu;
  return mag;
}

}  // namespace

TEST_CASE("sparse ties: equal magnitudes go to the lower index", "[core][sparse]") {
  const std::vector<uint32_t> all_equal(100, bits_of(0.5f));
  std::vector<uint32_t> first_ten(10);
  std::iota(first_ten.begin(), first_ten.end(), 0u);
  REQUIRE(fast(all_equal, 10) == first_ten);
  // -0 ties with +0; the one non-zero goes first, then indices 0, 1, ...
  const std::vector<float> zeros = {-0.0f, 0.0f, -0.0f, 0.0f, 1e-30f, -0.0f};
  REQUIRE(fast(magnitudes(zeros), 3) == std::vector<uint32_t>{0, 1, 4});
  // NaN beats inf, which beats every finite value.
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> special = {1.0f, -inf, 3e38f, std::numeric_limits<float>::quiet_NaN(), 2.0f};
  REQUIRE(fast(magnitudes(special), 2) == std::vector<uint32_t>{1, 3});
  REQUIRE(fast(magnitudes(special), 3) == std::vector<uint32_t>{1, 2, 3});
}

TEST_CASE("sparse ties: the fast select matches the full sort on tie-heavy inputs", "[core][sparse]") {
  std::mt19937_64 rng(5);
  const float palettes[][4] = {{1.0f, 1.0f, 1.0f, 1.0f},      {0.5f, -0.5f, 0.25f, 0.75f},
                               {3.0f, -3.0f, 0.0f, -0.0f},    {1.0f, 1.5f, 1.25f, 1.75f},  // one exponent
                               {1e-40f, -1e-40f, 2e-40f, 0.0f}};                            // subnormals
  for (const auto& palette : palettes) {
    for (uint32_t n : {1u, 2u, 15u, 16u, 17u, 100u, 4096u}) {
      std::vector<uint32_t> mag(n);
      std::uniform_int_distribution<int> pick(0, 3);
      for (auto& m : mag) m = bits_of(palette[pick(rng)]) & 0x7fffffffu;
      for (uint32_t k : {1u, 2u, 7u, n / 2 + 1, n}) {
        if (k == 0 || k > n) continue;
        INFO("palette " << palette[0] << ", n " << n << ", k " << k);
        REQUIRE(fast(mag, k) == reference(mag, k));
      }
    }
  }
  // Random data at the densities of interest, and every k of a small chunk.
  for (uint64_t seed = 0; seed < 20; ++seed) {
    const std::vector<uint32_t> mag = magnitudes(normal_values(4096, seed));
    for (uint32_t k : {41u, 82u, 123u, 4095u}) REQUIRE(fast(mag, k) == reference(mag, k));
  }
  const std::vector<uint32_t> small = magnitudes(normal_values(37, 99));
  for (uint32_t k = 1; k <= 37; ++k) REQUIRE(fast(small, k) == reference(small, k));
}

TEST_CASE("sparse ties: a chunk of equal values encodes the same bytes every time", "[core][sparse]") {
  const SparseSpec spec{64, 8, 2};
  const std::vector<float> x(256, -0.125f);
  const Bytes wire = encode(spec, x);
  for (int i = 0; i < 3; ++i) REQUIRE(encode(spec, x) == wire);
  const std::vector<float> d = decode(wire, x.size());
  for (size_t i = 0; i < x.size(); ++i) REQUIRE(d[i] == (i % 64 < 8 ? -0.125f : 0.0f));
}
