// The sparse codec's decode-and-sum (core/sparse_codec.h, Determinism
// contract): the sum of N contributions is the rank-order fold in f32, the
// same bits whatever order the contributions arrived in (they are placed by
// rank), equal to sparse_decode_add repeated in rank order and to a scalar
// reference; contributions may differ in spec; a bad one leaves out untouched.
#include <algorithm>
#include <catch2/catch.hpp>
#include <numeric>
#include <random>
#include <vector>

#include "sparse_codec_fixture.h"

using namespace ferry;
using namespace ferry::sparse_test;

namespace {

std::vector<float> sum_of(const std::vector<Bytes>& by_rank, size_t count) {
  std::vector<std::span<const uint8_t>> views(by_rank.begin(), by_rank.end());
  std::vector<float> out(count, 42.0f);
  const Status st = sparse_decode_sum(views, out.data(), count);
  REQUIRE(st.ok());
  return out;
}

}  // namespace

TEST_CASE("sparse sum: bit-identical in any arrival order, and the rank-order fold", "[core][sparse]") {
  const size_t count = 3 * 1024 + 100;
  const SparseSpec specs[] = {{1024, 20, 2}, {1024, 31, 4}, {512, 40, 8}, {1024, 10, 2}};
  std::mt19937_64 rng(3);
  for (size_t n = 1; n <= 8; ++n) {
    std::vector<Bytes> by_rank(n);
    std::vector<std::vector<float>> dense(n);
    for (size_t r = 0; r < n; ++r) {
      // Overlapping supports: a common large component plus each peer's own.
      std::vector<float> x = normal_values(count, 100 + r);
      const std::vector<float> common = normal_values(count, 7, 3.0f);
      for (size_t i = 0; i < count; ++i) x[i] += common[i];
      by_rank[r] = encode(specs[r % 4], x);
      dense[r] = decode(by_rank[r], count);
    }
    const std::vector<float> expected_sum = sum_of(by_rank, count);
    // The scalar reference: out = +0, then rank by rank, dense. Adding the 0 of
    // an entry not sent changes nothing here: a sum that starts at +0 is never
    // -0 under round-to-nearest, and the data holds no NaN.
    std::vector<float> reference(count, 0.0f);
    for (size_t r = 0; r < n; ++r) {
      for (size_t i = 0; i < count; ++i) reference[i] = reference[i] + dense[r][i];
    }
    REQUIRE(same_bits(expected_sum, reference));
    // Arrivals in random orders, each placed in its rank's slot.
    for (int trial = 0; trial < 5; ++trial) {
      std::vector<size_t> arrival(n);
      std::iota(arrival.begin(), arrival.end(), size_t{0});
      std::shuffle(arrival.begin(), arrival.end(), rng);
      std::vector<Bytes> slots(n);
      for (size_t rank : arrival) slots[rank] = by_rank[rank];
      REQUIRE(same_bits(sum_of(slots, count), expected_sum));
    }
    // decode_add repeated in rank order from zero is the same function.
    std::vector<float> stepwise(count, 0.0f);
    for (const Bytes& b : by_rank) REQUIRE(sparse_decode_add(b.data(), b.size(), stepwise.data(), count).ok());
    REQUIRE(same_bits(stepwise, expected_sum));
  }
}

TEST_CASE("sparse sum: the fold order is the rank order (pinned by a non-associative sum)", "[core][sparse]") {
  // One element, one entry each, sent exactly (step 0: v = lo = |x| with its sign).
  const SparseSpec spec{1, 1, 8};
  const Bytes big = encode(spec, {1e8f}), one = encode(spec, {1.0f}), minus_big = encode(spec, {-1e8f});
  REQUIRE(sum_of({big, one, minus_big}, 1)[0] == 0.0f);  // (1e8 + 1) rounds to 1e8
  REQUIRE(sum_of({big, minus_big, one}, 1)[0] == 1.0f);
  REQUIRE(sum_of({}, 1)[0] == 0.0f);  // no contribution: +0
}

TEST_CASE("sparse sum: an empty contribution sends nothing, and a bad one after it is named by its rank",
          "[core][sparse]") {
  const size_t count = 300;
  const SparseSpec spec{128, 4, 2};
  const Bytes a = encode(spec, normal_values(count, 1)), b = encode(spec, normal_values(count, 2));
  REQUIRE(same_bits(sum_of({a, Bytes{}, b, Bytes{}}, count), sum_of({a, b}, count)));
  REQUIRE(same_bits(sum_of({Bytes{}}, count), std::vector<float>(count, 0.0f)));
  const Bytes short_by_one(b.begin(), b.end() - 1), empty;
  std::vector<std::span<const uint8_t>> views = {a, empty, short_by_one};
  std::vector<float> out(count, 42.0f);
  REQUIRE(sparse_decode_sum(views, out.data(), count).message.rfind("rank 2: ", 0) == 0);
}

TEST_CASE("sparse sum: a bad contribution is refused before out is written", "[core][sparse]") {
  const size_t count = 300;
  const SparseSpec spec{128, 4, 2};
  Bytes good = encode(spec, normal_values(count, 1));
  Bytes short_by_one(good.begin(), good.end() - 1);
  Bytes other_count = encode(spec, normal_values(count + 1, 2));
  for (const Bytes* bad : {&short_by_one, &other_count}) {
    std::vector<std::span<const uint8_t>> views = {good, *bad, good};
    std::vector<float> out(count, 42.0f);
    const Status st = sparse_decode_sum(views, out.data(), count);
    REQUIRE(st.code == Errc::protocol);
    REQUIRE(st.message.rfind("rank 1: sparse contribution: ", 0) == 0);
    REQUIRE(std::all_of(out.begin(), out.end(), [](float v) { return v == 42.0f; }));
  }
}
