// Integer-domain quantization (core/int_quant.h) against the contract in its
// header: the packing, the bit-identity of the sum whatever the order of the
// contributions and the chunking, the published error bound for N = 2..16,
// unbiased and deterministic stochastic rounding, non-finite blocks, and the
// headroom at the largest group (and its refusal beyond). The error table
// against quant.h's u8 and u4 is a report tool: tools/microbench/int_quant_error_report.cpp.
#include <algorithm>
#include <bit>
#include <catch2/catch.hpp>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <numeric>
#include <random>
#include <stdexcept>
#include <vector>

#include "core/int_quant.h"
#include "core/quant.h"
#include "hex_text.h"
#include "int_quant_ring.h"

using namespace ferry;
using namespace ferry::int_quant_ring;

namespace {

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0;
}

constexpr IntQuantKind kKinds[] = {IntQuantKind::i8h, IntQuantKind::i4h};
constexpr IntRounding kRoundings[] = {IntRounding::nearest, IntRounding::stochastic};

}  // namespace

TEST_CASE("int quant packing round-trips every width and count", "[core][int_quant]") {
  std::mt19937_64 rng(7);
  for (uint32_t w = 2; w <= 32; ++w) {
    const int64_t hi = (int64_t{1} << (w - 1)) - 1;
    std::uniform_int_distribution<int64_t> value(-hi - 1, hi);
    for (size_t count : {size_t{0}, size_t{1}, size_t{7}, size_t{8}, size_t{9}, size_t{16}, size_t{17}, size_t{31},
                         size_t{33}, size_t{1023}, size_t{1024}, size_t{3001}}) {
      INFO("width " << w << ", count " << count);
      std::vector<int32_t> v(count);
      for (auto& x : v) x = static_cast<int32_t>(value(rng));
      if (count > 1) {
        v[0] = static_cast<int32_t>(-hi - 1);
        v[1] = static_cast<int32_t>(hi);
      }
      const size_t bytes = (count * w + 7) / 8;
      Bytes packed(bytes + 1, 0xa5);  // a guard byte past the end
      int_quant_detail::pack(v.data(), count, w, packed.data());
      REQUIRE(packed[bytes] == 0xa5);
      if (count * w % 8 != 0) REQUIRE((packed[bytes - 1] >> (count * w % 8)) == 0);
      std::vector<int32_t> back(count + 1, 12345);
      int_quant_detail::unpack(packed.data(), count, w, back.data());
      REQUIRE(back[count] == 12345);
      back.pop_back();
      REQUIRE(back == v);
      // The vector path (where built) gives the scalar definition's bytes and values.
      Bytes scalar(bytes + 1, 0xa5);
      int_quant_detail::pack_scalar(v.data(), count, w, scalar.data());
      REQUIRE(scalar == packed);
      std::vector<int32_t> scalar_back(count);
      int_quant_detail::unpack_scalar(packed.data(), count, w, scalar_back.data());
      REQUIRE(scalar_back == v);
    }
  }
}

TEST_CASE("int quant golden bytes of the packed format", "[core][int_quant]") {
  // Element i in bits [i*w, (i+1)*w), little-endian, two's complement.
  const int32_t v[3] = {1, -1, 5};
  uint8_t out[5] = {};
  int_quant_detail::pack(v, 3, 9, out);  // 0x001 | 0x1ff << 9 | 0x005 << 18
  const uint8_t expected[4] = {0x01, 0xfe, 0x17, 0x00};
  REQUIRE(std::memcmp(out, expected, 4) == 0);
  REQUIRE(int_quant_width(IntQuantSpec{IntQuantKind::i8h}, 1) == 8);
  REQUIRE(int_quant_width(IntQuantSpec{IntQuantKind::i8h}, 2) == 9);
  REQUIRE(int_quant_width(IntQuantSpec{IntQuantKind::i8h}, 8) == 11);
  REQUIRE(int_quant_width(IntQuantSpec{IntQuantKind::i8h}, 9) == 12);
  REQUIRE(int_quant_width(IntQuantSpec{IntQuantKind::i4h}, 16) == 8);
  REQUIRE(int_quant_width(IntQuantSpec{IntQuantKind::i8h}, kMaxIntQuantGroup) == 24);
  REQUIRE(int_quant_detail::random_bits(0, 0) == 0xe220a8397b1dcdafu);  // splitmix64's first output for seed 0
}

TEST_CASE("int quant golden bytes of encodings and a sum", "[core][int_quant]") {
  // A change to the scale rule, the rounding, the random stream or the
  // packing changes these bytes: every peer must run the same definition.
  // (Checked by hand for i8h nearest: block 0 has A = 1, so 0.5 -> 63.5 ->
  // 64 = 0x40 (ties to even), -1 -> -127 = 0x81; i4h: 0.5 -> 3.5 -> 4 and
  // -1 -> -7 = 0x9 share byte 0x94, low nibble first.)
  const std::vector<float> x = {0.5f, -1.0f, 0.25f, 0.125f, -0.3f, 0.7f, 0.0f, 1.0f, 3.0f, -2.9f, 0.01f, 1.5f};
  const std::vector<float> y = {0.1f, 0.2f, -0.3f, 0.4f, 0.5f, -0.6f, 0.7f, 0.8f, -0.9f, 1.0f, 1.1f, 1.2f};
  std::string hex[5];
  int n = 0;
  for (IntQuantKind kind : kKinds) {
    for (IntRounding rounding : kRoundings) {
      const IntQuantSpec spec{kind, 8, rounding, 5};
      const std::vector<float> absmax = agreed_absmax<float>(spec, {x, y});
      Bytes wire(int_quant_packed_bytes(spec, x.size(), 1));
      int_quant_encode(spec, 3, absmax.data(), 0, x.data(), x.size(), wire.data());
      if (kind == IntQuantKind::i8h && rounding == IntRounding::nearest) {
        Bytes sum(int_quant_packed_bytes(spec, x.size(), 2));
        REQUIRE(
            int_quant_encode_add(spec, 4, absmax.data(), 0, y.data(), y.size(), wire.data(), wire.size(), 1, sum.data())
                .ok());
        hex[4] = test::to_hex(sum);
      }
      hex[n++] = test::to_hex(wire);
    }
  }
  CHECK(hex[0] == "40812010da59007f7f850040");
  CHECK(hex[1] == "40811f10da59007f7f86013f");
  CHECK(hex[2] == "94125e709740");
  CHECK(hex[3] == "94115e70a730");
  CHECK(hex[4] == "4d34eb1fa2a1419672595ebf9803");
}

TEMPLATE_TEST_CASE("int quant sum is bit-identical across contributor orders and chunkings", "[core][int_quant]", float,
                   double) {
  using T = TestType;
  constexpr size_t kPeers = 5;  // 120 orders
  constexpr size_t kCount = 1000;
  std::vector<std::vector<T>> inputs;
  for (size_t p = 0; p < kPeers; ++p) inputs.push_back(normal_input<T>(kCount, 100 + p, 1.0 + double(p)));
  for (IntQuantKind kind : kKinds) {
    for (IntRounding rounding : kRoundings) {
      const IntQuantSpec spec{kind, 64, rounding, 0x1234};
      INFO("kind " << int(kind) << ", rounding " << int(rounding));
      const std::vector<T> absmax = agreed_absmax(spec, inputs);
      std::vector<size_t> order(kPeers);
      std::iota(order.begin(), order.end(), 0);
      const Bytes reference = ring_sum(spec, absmax, inputs, order, 0, kCount);
      const std::vector<T> decoded = decode_sum(spec, absmax, reference, kPeers, ReduceOp::avg, 0, kCount);
      do {
        REQUIRE(ring_sum(spec, absmax, inputs, order, 0, kCount) == reference);
      } while (std::next_permutation(order.begin(), order.end()));

      // A tree of partial sums (as a different topology would add) gives the same integers.
      std::vector<Bytes> ones;
      for (size_t p = 0; p < kPeers; ++p) ones.push_back(ring_sum(spec, absmax, inputs, {p}, 0, kCount));
      auto add = [&](const Bytes& a, uint32_t ka, const Bytes& b, uint32_t kb) {
        Bytes out(int_quant_packed_bytes(spec, kCount, ka + kb));
        REQUIRE(int_quant_add(spec, a.data(), a.size(), ka, b.data(), b.size(), kb, kCount, out.data()).ok());
        return out;
      };
      const Bytes left = add(ones[3], 1, ones[0], 1);
      const Bytes right = add(add(ones[4], 1, ones[1], 1), 2, ones[2], 1);
      REQUIRE(add(right, 3, left, 2) == reference);

      // Chunks that cut blocks in the middle, and absmax merged chunk by chunk.
      for (size_t chunk : {size_t{1}, size_t{37}, size_t{64}, size_t{333}}) {
        std::vector<T> chunked_absmax(absmax.size(), T(0));
        for (const auto& x : inputs) {
          std::vector<T> mine(absmax.size(), T(0));
          for (size_t begin = 0; begin < kCount; begin += chunk) {
            int_quant_absmax(spec, x.data() + begin, std::min(chunk, kCount - begin), begin, mine.data());
          }
          int_quant_merge_absmax(chunked_absmax.data(), mine.data(), mine.size());
        }
        REQUIRE(same_bits(chunked_absmax, absmax));
        std::vector<T> pieces;
        for (size_t begin = 0; begin < kCount; begin += chunk) {
          const size_t n = std::min(chunk, kCount - begin);
          const std::vector<size_t> rotated = {(begin / chunk) % kPeers, (begin / chunk + 1) % kPeers,
                                               (begin / chunk + 2) % kPeers, (begin / chunk + 3) % kPeers,
                                               (begin / chunk + 4) % kPeers};
          const Bytes sum = ring_sum(spec, absmax, inputs, rotated, begin, n);
          const std::vector<T> part = decode_sum(spec, absmax, sum, kPeers, ReduceOp::avg, begin, n);
          pieces.insert(pieces.end(), part.begin(), part.end());
        }
        INFO("chunk " << chunk);
        REQUIRE(same_bits(pieces, decoded));
      }
    }
  }
}

TEMPLATE_TEST_CASE("int quant meets the published error bound for N = 2..16", "[core][int_quant]", float, double) {
  using T = TestType;
  constexpr size_t kCount = 4099;  // a short last block
  const double eps = std::numeric_limits<T>::epsilon();
  for (IntQuantKind kind : kKinds) {
    for (IntRounding rounding : kRoundings) {
      for (uint32_t peers = 2; peers <= 16; ++peers) {
        const IntQuantSpec spec{kind, 256, rounding, peers};
        INFO("kind " << int(kind) << ", rounding " << int(rounding) << ", peers " << peers);
        std::vector<std::vector<T>> inputs;
        // Magnitudes that differ by peer and by block (from 2^-20 to 2^20).
        for (uint32_t p = 0; p < peers; ++p) {
          std::vector<T> x = normal_input<T>(kCount, 1000 * peers + p);
          for (size_t i = 0; i < kCount; ++i) x[i] = std::ldexp(x[i], static_cast<int>((i / 256) * 3 % 41) - 20);
          inputs.push_back(std::move(x));
        }
        const std::vector<T> absmax = agreed_absmax(spec, inputs);
        std::vector<size_t> order(peers);
        std::iota(order.begin(), order.end(), 0);
        const Bytes sum = ring_sum(spec, absmax, inputs, order, 0, kCount);
        const std::vector<T> total = decode_sum(spec, absmax, sum, peers, ReduceOp::sum, 0, kCount);
        const std::vector<T> mean = decode_sum(spec, absmax, sum, peers, ReduceOp::avg, 0, kCount);
        const double L = int_quant_levels(kind);
        const double per_contribution = rounding == IntRounding::nearest ? 0.5 : 1.0;
        for (size_t i = 0; i < kCount; ++i) {
          long double exact = 0;
          for (const auto& x : inputs) exact += x[i];
          const double s = static_cast<double>(absmax[i / 256] / static_cast<T>(L));
          const double bound = peers * s * (per_contribution + 0x1p-14) + 2 * eps * std::fabs(double(total[i]));
          INFO("element " << i << ": exact " << double(exact) << ", decoded " << double(total[i]));
          REQUIRE(std::fabs(double(total[i] - exact)) <= bound);
          REQUIRE(std::fabs(double(mean[i] - exact / peers)) <= bound / peers + 2 * eps * std::fabs(double(mean[i])));
        }
      }
    }
  }
}

TEMPLATE_TEST_CASE("int quant stochastic rounding is unbiased and deterministic", "[core][int_quant]", float, double) {
  using T = TestType;
  constexpr size_t kCount = size_t{1} << 20;
  for (IntQuantKind kind : kKinds) {
    const IntQuantSpec spec{kind, 256, IntRounding::stochastic, 42};
    const double L = int_quant_levels(kind);
    // Every block's absmax is 1 (its first element); the rest sit at 0.3 of a
    // step above a code, where round-to-nearest is biased by -0.3 steps.
    std::mt19937_64 rng(5);
    std::uniform_int_distribution<int> code(-static_cast<int>(L) + 1, static_cast<int>(L) - 2);
    std::vector<T> x(kCount);
    for (size_t i = 0; i < kCount; ++i) x[i] = i % 256 == 0 ? T(1) : static_cast<T>((code(rng) + 0.3) / L);
    std::vector<T> absmax(int_quant_block_count(spec, kCount), T(0));
    int_quant_absmax(spec, x.data(), kCount, 0, absmax.data());
    Bytes wire(int_quant_packed_bytes(spec, kCount, 1));
    int_quant_encode(spec, 1, absmax.data(), 0, x.data(), kCount, wire.data());
    const std::vector<T> y = decode_sum(spec, absmax, wire, 1, ReduceOp::sum, 0, kCount);
    double sum = 0, sum_sq = 0;
    for (size_t i = 0; i < kCount; ++i) {
      const double e = (double(y[i]) - double(x[i])) * L;  // in steps
      sum += e;
      sum_sq += e * e;
    }
    const double mean = sum / kCount;
    const double std_error = std::sqrt((sum_sq / kCount - mean * mean) / kCount);
    INFO("kind " << int(kind) << ": mean error " << mean << " steps, standard error " << std_error);
    REQUIRE(std::fabs(mean) <= 4 * std_error);
    REQUIRE(std_error > 0);

    Bytes again(wire.size());
    int_quant_encode(spec, 1, absmax.data(), 0, x.data(), kCount, again.data());
    REQUIRE(again == wire);
    IntQuantSpec other = spec;
    other.seed = 43;
    int_quant_encode(other, 1, absmax.data(), 0, x.data(), kCount, again.data());
    REQUIRE(again != wire);
    IntQuantSpec nearest = spec;
    nearest.rounding = IntRounding::nearest;
    int_quant_encode(nearest, 1, absmax.data(), 0, x.data(), kCount, again.data());
    const std::vector<T> rounded = decode_sum(nearest, absmax, again, 1, ReduceOp::sum, 0, kCount);
    double biased = 0;
    for (size_t i = 0; i < kCount; ++i) biased += (double(rounded[i]) - double(x[i])) * L;
    REQUIRE(biased / kCount < -0.25);  // the test's input does tell the two apart
  }
}

TEST_CASE("int quant stochastic streams of different contributors are independent", "[core][int_quant]") {
  // Two peers with the same input, halfway between codes: with one stream for
  // both their errors would be the same draw (correlation 1); the sum's error
  // would then grow as N, not sqrt(N).
  constexpr size_t kCount = size_t{1} << 18;
  const IntQuantSpec spec{IntQuantKind::i8h, 256, IntRounding::stochastic, 9};
  std::vector<float> x(kCount, 10.5f / 127.0f);
  std::vector<float> absmax(int_quant_block_count(spec, kCount), 1.0f);
  std::vector<float> errors[2];
  for (uint64_t contributor : {0u, 1u}) {
    Bytes wire(int_quant_packed_bytes(spec, kCount, 1));
    int_quant_encode(spec, contributor, absmax.data(), 0, x.data(), kCount, wire.data());
    const std::vector<float> y = decode_sum(spec, absmax, wire, 1, ReduceOp::sum, 0, kCount);
    for (size_t i = 0; i < kCount; ++i) errors[contributor].push_back((y[i] - x[i]) * 127.0f);
  }
  double product = 0, sq0 = 0, sq1 = 0;
  for (size_t i = 0; i < kCount; ++i) {
    product += double(errors[0][i]) * errors[1][i];
    sq0 += double(errors[0][i]) * errors[0][i];
    sq1 += double(errors[1][i]) * errors[1][i];
  }
  const double correlation = product / std::sqrt(sq0 * sq1);
  INFO("correlation " << correlation);
  REQUIRE(std::fabs(correlation) < 4.0 / std::sqrt(double(kCount)));
}

TEMPLATE_TEST_CASE("int quant blocks with NaN or inf decode to NaN", "[core][int_quant]", float, double) {
  using T = TestType;
  const IntQuantSpec spec{IntQuantKind::i8h, 16};
  std::vector<std::vector<T>> inputs = {normal_input<T>(80, 1), normal_input<T>(80, 2), normal_input<T>(80, 3)};
  inputs[0][17] = std::numeric_limits<T>::quiet_NaN();   // block 1
  inputs[1][50] = std::numeric_limits<T>::infinity();    // block 3
  inputs[2][51] = -std::numeric_limits<T>::infinity();   // block 3
  inputs[2][79] = -std::numeric_limits<T>::quiet_NaN();  // block 4
  const std::vector<T> absmax = agreed_absmax(spec, inputs);
  REQUIRE(std::isinf(absmax[1]));
  REQUIRE(std::isinf(absmax[3]));
  REQUIRE(std::isinf(absmax[4]));
  const Bytes sum = ring_sum(spec, absmax, inputs, {2, 0, 1}, 0, 80);
  const std::vector<T> y = decode_sum(spec, absmax, sum, 3, ReduceOp::avg, 0, 80);
  for (size_t i = 0; i < 80; ++i) {
    const size_t block = i / 16;
    INFO("element " << i);
    if (block == 1 || block == 3 || block == 4) {
      REQUIRE(std::isnan(y[i]));
      REQUIRE_FALSE(std::signbit(y[i]));
    } else {
      REQUIRE(std::isfinite(y[i]));
    }
  }
  // A scale whose bits are NaN or carry a sign (a broken peer) is non-finite too.
  std::vector<T> odd = absmax;
  odd[0] = -T(1);
  odd[2] = std::numeric_limits<T>::quiet_NaN();
  const std::vector<T> z = decode_sum(spec, odd, sum, 3, ReduceOp::sum, 0, 80);
  REQUIRE(std::isnan(z[0]));
  REQUIRE(std::isnan(z[32]));
  // All zeros: A = 0 decodes to +0.
  const std::vector<std::vector<T>> zeros = {std::vector<T>(20, T(0)), std::vector<T>(20, -T(0))};
  const std::vector<T> zero_absmax = agreed_absmax(spec, zeros);
  const std::vector<T> w =
      decode_sum(spec, zero_absmax, ring_sum(spec, zero_absmax, zeros, {0, 1}, 0, 20), 2, ReduceOp::sum, 0, 20);
  for (T v : w) REQUIRE(std::bit_cast<std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>>(v) == 0);
}

TEMPLATE_TEST_CASE("int quant headroom holds at the largest group, and a larger one is refused", "[core][int_quant]",
                   float, double) {
  using T = TestType;
  constexpr size_t kCount = 301;
  for (IntQuantKind kind : kKinds) {
    for (T sign : {T(1), T(-1)}) {
      const IntQuantSpec spec{kind, 64};
      // Every element at its block's maximum, so every code is +-L.
      const std::vector<T> x(kCount, sign * T(3.5));
      std::vector<T> absmax(int_quant_block_count(spec, kCount), T(0));
      int_quant_absmax(spec, x.data(), kCount, 0, absmax.data());
      Bytes partial(int_quant_packed_bytes(spec, kCount, 1));
      int_quant_encode(spec, 1, absmax.data(), 0, x.data(), kCount, partial.data());
      // Double the group 16 times: 65536 contributions, each at the maximum.
      uint32_t k = 1;
      while (k < kMaxIntQuantGroup) {
        Bytes twice(int_quant_packed_bytes(spec, kCount, 2 * k));
        REQUIRE(int_quant_add(spec, partial.data(), partial.size(), k, partial.data(), partial.size(), k, kCount,
                              twice.data())
                    .ok());
        partial = std::move(twice);
        k *= 2;
      }
      REQUIRE(k == kMaxIntQuantGroup);
      const uint32_t w = int_quant_width(spec, k);
      std::vector<int32_t> values(kCount);
      int_quant_detail::unpack(partial.data(), kCount, w, values.data());
      const int32_t expected = static_cast<int32_t>(sign) * static_cast<int32_t>(k) * int_quant_levels(kind);
      for (int32_t v : values) REQUIRE(v == expected);
      const std::vector<T> y = decode_sum(spec, absmax, partial, k, ReduceOp::avg, 0, kCount);
      for (T v : y) REQUIRE(std::fabs(double(v - sign * T(3.5))) <= 1e-6);
      // One more contribution would need a group beyond the largest: refused, nothing written.
      Bytes out(partial.size() + 4, 0x5a);
      REQUIRE_THROWS_AS(
          int_quant_add(spec, partial.data(), partial.size(), k, partial.data(), partial.size(), 1, kCount, out.data()),
          std::invalid_argument);
      REQUIRE_THROWS_AS(int_quant_encode_add(spec, 1, absmax.data(), 0, x.data(), kCount, partial.data(),
                                             partial.size(), k, out.data()),
                        std::invalid_argument);
      REQUIRE(std::all_of(out.begin(), out.end(), [](uint8_t b) { return b == 0x5a; }));
      REQUIRE_THROWS_AS(int_quant_packed_bytes(spec, kCount, kMaxIntQuantGroup + 1), std::invalid_argument);
      REQUIRE_THROWS_AS(int_quant_packed_bytes(spec, kCount, 0), std::invalid_argument);
    }
  }
}

TEST_CASE("int quant refuses a partial with a wrong length or an out-of-range value", "[core][int_quant]") {
  const IntQuantSpec spec{IntQuantKind::i8h, 32};
  constexpr size_t kCount = 50;
  const std::vector<float> x = normal_input<float>(kCount, 9);
  std::vector<float> absmax(int_quant_block_count(spec, kCount), 0.0f);
  int_quant_absmax(spec, x.data(), kCount, 0, absmax.data());
  // Three contributions fit in 10 bits, whose range (+-511) exceeds 3 * 127.
  std::vector<int32_t> values(kCount, 0);
  values[33] = 3 * 127 + 1;
  Bytes partial(int_quant_packed_bytes(spec, kCount, 3));
  int_quant_detail::pack(values.data(), kCount, int_quant_width(spec, 3), partial.data());
  Bytes out(int_quant_packed_bytes(spec, kCount, 4));
  Status status =
      int_quant_encode_add(spec, 1, absmax.data(), 0, x.data(), kCount, partial.data(), partial.size(), 3, out.data());
  REQUIRE(status.code == Errc::protocol);
  REQUIRE_THAT(status.message, Catch::Contains("element 33"));
  std::vector<float> y(kCount);
  status = int_quant_decode(spec, absmax.data(), 0, partial.data(), partial.size(), 3, ReduceOp::sum, kCount, y.data());
  REQUIRE(status.code == Errc::protocol);
  status =
      int_quant_decode(spec, absmax.data(), 0, partial.data(), partial.size() - 1, 3, ReduceOp::sum, kCount, y.data());
  REQUIRE(status.code == Errc::protocol);
  REQUIRE_THAT(status.message, Catch::Contains("expected"));
  status =
      int_quant_add(spec, partial.data(), partial.size(), 3, partial.data(), partial.size() + 1, 3, kCount, out.data());
  REQUIRE(status.code == Errc::protocol);
  REQUIRE_THROWS_AS(
      int_quant_decode(spec, absmax.data(), 0, partial.data(), partial.size(), 3, ReduceOp::max, kCount, y.data()),
      std::invalid_argument);
  REQUIRE_THROWS_AS(int_quant_block_count(IntQuantSpec{IntQuantKind::i8h, 0}, 1), std::invalid_argument);
}

TEST_CASE("int quant readers survive random bytes", "[core][int_quant]") {
  // Any bytes of the right length are either accepted (every value within
  // its range) or refused with Errc::protocol; nothing is read or written
  // outside the buffers (the sanitizer builds check that part).
  std::mt19937_64 rng(11);
  for (IntQuantKind kind : kKinds) {
    const IntQuantSpec spec{kind, 16};
    for (uint32_t k : {1u, 2u, 3u, 5u, 8u, 100u}) {
      for (size_t count : {size_t{1}, size_t{15}, size_t{16}, size_t{17}, size_t{200}}) {
        Bytes in(int_quant_packed_bytes(spec, count, k));
        for (auto& b : in) b = static_cast<uint8_t>(rng());
        std::vector<float> absmax(int_quant_block_count(spec, count));
        for (auto& a : absmax) a = std::bit_cast<float>(static_cast<uint32_t>(rng()));
        std::vector<float> out(count);
        const Status decoded =
            int_quant_decode(spec, absmax.data(), 0, in.data(), in.size(), k, ReduceOp::avg, count, out.data());
        REQUIRE((decoded.ok() || decoded.code == Errc::protocol));
        Bytes sum(int_quant_packed_bytes(spec, count, k + 1));
        Bytes one(int_quant_packed_bytes(spec, count, 1));
        for (auto& b : one) b = static_cast<uint8_t>(rng());
        const Status added = int_quant_add(spec, in.data(), in.size(), k, one.data(), one.size(), 1, count, sum.data());
        REQUIRE((added.ok() || added.code == Errc::protocol));
      }
    }
  }
}

TEST_CASE("int quant spec of each integer-domain Quant, and none for the others", "[core][int_quant]") {
  IntQuantSpec spec = int_quant_spec({Quant::i8h, 128}, 7);
  CHECK(spec.kind == IntQuantKind::i8h);
  CHECK(spec.block == 128);
  CHECK(spec.rounding == IntRounding::nearest);
  spec = int_quant_spec({Quant::i4h_sr, 256}, 7);
  CHECK(spec.kind == IntQuantKind::i4h);
  CHECK(spec.rounding == IntRounding::stochastic);
  CHECK(spec.seed == 7);
  CHECK_THROWS_AS(int_quant_spec({Quant::u8, 256}, 0), std::invalid_argument);
  CHECK_THROWS_AS(int_quant_spec({Quant::i8h, 0}, 0), std::invalid_argument);
}
