// The sparse codec's round trip (core/sparse_codec.h): what a decoder makes of
// a contribution is the top-k of each chunk, each value within step / 2 of
// the input, zero elsewhere; the residual is exactly input - decoded (in
// place too); lengths stay within sparse_max_encoded_bytes and near the
// header's cost figures; bf16 / f16 input encodes as
// its exact f32 widening; non-finite chunks decode to the quiet NaN.
#include <algorithm>
#include <catch2/catch.hpp>
#include <cmath>
#include <limits>
#include <vector>

#include "sparse_codec_fixture.h"

using namespace ferry;
using namespace ferry::sparse_test;

namespace {

// The chosen positions of every chunk, by the reference selection.
std::vector<bool> reference_sent(SparseSpec spec, const std::vector<float>& x) {
  std::vector<bool> sent(x.size(), false);
  for (size_t first = 0; first < x.size(); first += spec.chunk) {
    const auto n = static_cast<uint32_t>(std::min<size_t>(spec.chunk, x.size() - first));
    std::vector<uint32_t> mag(n), chosen(n);
    for (uint32_t i = 0; i < n; ++i) mag[i] = bits_of(x[first + i]) & 0x7fffffffu;
    const uint32_t k = sparse_detail::select_reference(mag.data(), n, spec.k, chosen.data());
    for (uint32_t j = 0; j < k; ++j) sent[first + chosen[j]] = true;
  }
  return sent;
}

}  // namespace

TEST_CASE("sparse round trip: top-k per chunk, values within half a step, residual exact", "[core][sparse]") {
  const SparseSpec specs[] = {{4096, 82, 2}, {4096, 41, 4}, {4096, 123, 8}, {256, 5, 2},
                              {1000, 1000, 8}, {1, 1, 2},   {7, 3, 4},       {65536, 1311, 2}};
  for (const SparseSpec spec : specs) {
    for (size_t count : {size_t{0}, size_t{1}, size_t{spec.chunk}, size_t{3} * spec.chunk + 17}) {
      INFO("chunk " << spec.chunk << ", k " << spec.k << ", bits " << spec.bits << ", count " << count);
      const std::vector<float> x = normal_values(count, spec.chunk + count, 0.01f);
      std::vector<float> residual;
      const Bytes wire = encode(spec, x, &residual);
      REQUIRE(wire.size() <= sparse_max_encoded_bytes(spec, count));
      const std::vector<float> d = decode(wire, count);
      const std::vector<bool> sent = reference_sent(spec, x);
      const float top = static_cast<float>((1u << (spec.bits - 1)) - 1);
      for (size_t first = 0; first < count; first += spec.chunk) {
        const size_t end = std::min<size_t>(count, first + spec.chunk);
        float lo = std::numeric_limits<float>::infinity(), hi = 0.0f;
        for (size_t i = first; i < end; ++i) {
          if (sent[i]) lo = std::min(lo, std::fabs(x[i])), hi = std::max(hi, std::fabs(x[i]));
        }
        const float half_step = (hi - lo) / top / 2.0f;
        for (size_t i = first; i < end; ++i) {
          if (!sent[i]) {
            REQUIRE(bits_of(d[i]) == 0);
            continue;
          }
          REQUIRE(std::signbit(d[i]) == std::signbit(x[i]));
          REQUIRE(std::fabs(d[i] - x[i]) <= half_step * 1.0001f + 1e-9f);
        }
      }
      std::vector<float> expected(count);
      for (size_t i = 0; i < count; ++i) expected[i] = x[i] - d[i];
      REQUIRE(same_bits(residual, expected));
      // In place: the accumulator becomes its residual, the bytes are the same.
      std::vector<float> acc = x;
      Bytes again(sparse_max_encoded_bytes(spec, count));
      again.resize(sparse_encode(spec, DType::f32, acc.data(), count, again.data(), acc.data()));
      REQUIRE(again == wire);
      REQUIRE(same_bits(acc, expected));
    }
  }
}

TEST_CASE("sparse round trip: 16-bit input encodes as its exact f32 widening", "[core][sparse]") {
  const SparseSpec spec{512, 10, 4};
  const std::vector<float> x = normal_values(2000, 11);
  for (DType dtype : {DType::bf16, DType::f16}) {
    std::vector<uint16_t> half(x.size());
    std::vector<float> widened(x.size());
    if (dtype == DType::bf16) {
      f32_to_bf16(x.data(), half.data(), x.size());
      bf16_to_f32(half.data(), widened.data(), x.size());
    } else {
      f32_to_f16(x.data(), half.data(), x.size());
      f16_to_f32(half.data(), widened.data(), x.size());
    }
    std::vector<float> r16(x.size()), r32;
    Bytes wire(sparse_max_encoded_bytes(spec, x.size()));
    wire.resize(sparse_encode(spec, dtype, half.data(), x.size(), wire.data(), r16.data()));
    const Bytes from_f32 = encode(spec, widened, &r32);
    REQUIRE(wire[4] == static_cast<uint8_t>(dtype));
    wire[4] = static_cast<uint8_t>(DType::f32);  // the only byte that differs
    REQUIRE(wire == from_f32);
    REQUIRE(same_bits(r16, r32));
  }
  std::vector<uint8_t> out(sparse_max_encoded_bytes(spec, 4));
  const int32_t ints[4] = {};
  REQUIRE_THROWS_AS(sparse_encode(spec, DType::i32, ints, 4, out.data(), nullptr), std::invalid_argument);
}

TEST_CASE("sparse round trip: a chunk holding NaN or inf decodes to the quiet NaN", "[core][sparse]") {
  const SparseSpec spec{8, 2, 2};
  std::vector<float> x = {1, 2, 3, 4, 5, 6, 7, 8, 1, 2, 3, 4, 5, 6, 7, 8};
  x[1] = std::numeric_limits<float>::infinity();
  x[9] = -std::numeric_limits<float>::quiet_NaN();
  std::vector<float> residual;
  const std::vector<float> d = decode(encode(spec, x, &residual), x.size());
  for (size_t i : {size_t{1}, size_t{7}, size_t{9}, size_t{15}}) REQUIRE(bits_of(d[i]) == 0x7fc00000u);
  REQUIRE(std::isnan(residual[1]));
  REQUIRE(residual[0] == 1.0f);
  // A finite chunk whose top level overflows f32 is marked too.
  const std::vector<float> huge = {std::numeric_limits<float>::max(), -std::numeric_limits<float>::max() / 3, 0, 0};
  const std::vector<float> dh = decode(encode(SparseSpec{4, 2, 8}, huge), 4);
  REQUIRE((std::isnan(dh[0]) || dh[0] == huge[0]));
}

TEST_CASE("sparse spec checks and sizes", "[core][sparse]") {
  REQUIRE(sparse_spec_valid({4096, 82, 2}));
  for (SparseSpec bad : {SparseSpec{0, 1, 2}, SparseSpec{70000, 1, 2}, SparseSpec{16, 0, 2}, SparseSpec{16, 17, 2},
                         SparseSpec{16, 4, 3}, SparseSpec{16, 4, 1}}) {
    REQUIRE_FALSE(sparse_spec_valid(bad));
    REQUIRE_THROWS_AS(sparse_max_encoded_bytes(bad, 10), std::invalid_argument);
  }
  REQUIRE_THROWS_AS(sparse_max_encoded_bytes({16, 4, 2}, (size_t{1} << 40) + 1), std::invalid_argument);
  REQUIRE(sparse_k_for_density(4096, 0.02) == 82);
  REQUIRE(sparse_k_for_density(4096, 0.01) == 41);
  REQUIRE(sparse_k_for_density(4096, 0.03) == 123);
  REQUIRE(sparse_k_for_density(10, 1e-9) == 1);
  REQUIRE_THROWS_AS(sparse_k_for_density(10, 0.0), std::invalid_argument);
  REQUIRE(sparse_max_encoded_bytes({4096, 82, 2}, 0) == kSparseHeaderBytes);
  // The header's cost figures: ~61 / 102 / 141 bytes a chunk of 4096 normal values.
  const std::vector<float> x = normal_values(4096 * 64, 17);
  const std::pair<uint32_t, double> figures[] = {{41, 61.0}, {82, 102.0}, {123, 141.0}};
  for (auto [k, bytes] : figures) {
    const double per_chunk = static_cast<double>(encode({4096, k, 2}, x).size() - kSparseHeaderBytes) / 64.0;
    INFO("k " << k << ": " << per_chunk << " bytes a chunk");
    REQUIRE(std::fabs(per_chunk - bytes) < 2.0);
  }
}
