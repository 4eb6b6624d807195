// The quantization codecs (core/quant.h) against the wire spec written in
// that header, restated here independently: the block layout, the error
// bound of each format, the special blocks. One parameterised body runs every
// kind x accumulation type x block size x awkward count x data shape, and in
// it every compiled kernel path must give the same bytes as the scalar one,
// and the fused functions the same bytes as their parts. Then golden bytes
// (a change to the wire format or its rounding fails here), malformed headers,
// random bytes, and the floating-point environment.
#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/half.h"
#include "hex_text.h"
#include "core/quant.h"
#include "core/quant_kernels.h"

#if defined(__SSE__)
#include <xmmintrin.h>
#endif

using namespace ferry;
using quant_detail::QuantPath;

namespace {

using Bytes = std::vector<uint8_t>;

constexpr Quant kKinds[] = {Quant::u8, Quant::i8, Quant::u4, Quant::f16, Quant::bf16};

bool is_affine(Quant kind) { return kind == Quant::u8 || kind == Quant::i8 || kind == Quant::u4; }

// Every kind x block size, but f16/bf16 have no blocks: the default one only.
std::vector<QuantSpec> swept_specs() {
  std::vector<QuantSpec> specs;
  for (Quant kind : kKinds)
    for (uint32_t block : {1u, 2u, 7u, 16u, 33u, 256u, 1000u, 2048u})
      if (is_affine(kind) || block == 256u) specs.push_back({kind, block});
  return specs;
}
double levels(Quant kind) { return kind == Quant::u4 ? 15 : 255; }

template <class T>
using Bits = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;

template <class T>
bool same_bits(const std::vector<T>& a, const std::vector<T>& b) {
  return a.size() == b.size() && (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(T)) == 0);
}

template <class T>
Bytes encode(QuantSpec spec, const std::vector<T>& x) {
  Bytes out(quant_encoded_bytes<T>(spec, x.size()));
  quant_encode(spec, x.data(), x.size(), out.data());
  return out;
}

template <class T>
std::vector<T> decode(QuantSpec spec, const Bytes& in, size_t count) {
  std::vector<T> out(count);
  const Status status = quant_decode(spec, in.data(), in.size(), count, out.data());
  REQUIRE(status.ok());
  return out;
}

// ---- the layout, restated

template <class T>
size_t block_bytes(Quant kind, size_t n) {
  return 2 * sizeof(T) + (kind == Quant::u4 ? (n + 1) / 2 : n);
}

template <class T>
struct BlockHeader {
  T min;
  T scale;
  size_t offset;  // of the header in the chunk
};

template <class T>
BlockHeader<T> header_of(QuantSpec spec, const Bytes& wire, size_t block_index) {
  BlockHeader<T> h{};
  h.offset = block_index * block_bytes<T>(spec.kind, spec.block);
  std::memcpy(&h.min, wire.data() + h.offset, sizeof(T));
  std::memcpy(&h.scale, wire.data() + h.offset + sizeof(T), sizeof(T));
  return h;
}

// ---- inputs

enum class Shape { normal, magnitudes, specials };

template <class T>
std::vector<T> make_input(Shape shape, size_t count, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::uniform_int_distribution<int> pick(0, 99);
  // Exponents that keep a block's range far from overflow (the wide-block
  // marker has its own test) but reach down into the subnormals.
  const int max_exponent = sizeof(T) == 4 ? 100 : 900;
  const int min_exponent = sizeof(T) == 4 ? -149 : -1074;
  std::uniform_int_distribution<int> exponent(min_exponent, max_exponent);
  std::vector<T> x(count);
  for (size_t i = 0; i < count; ++i) {
    if (shape == Shape::normal) {
      x[i] = static_cast<T>(normal(rng));
      continue;
    }
    const int p = pick(rng);
    if (p < 5 && i > 0) {
      x[i] = x[i - 1];  // runs, so some short blocks are constant
    } else if (p < 8) {
      x[i] = p % 2 == 0 ? T(0) : -T(0);
    } else if (p < 12) {
      x[i] = static_cast<T>(std::ldexp(normal(rng), sizeof(T) == 4 ? -140 : -1060));  // subnormal
    } else if (shape == Shape::specials && p < 14) {
      const T specials[] = {std::numeric_limits<T>::quiet_NaN(), std::numeric_limits<T>::infinity(),
                            -std::numeric_limits<T>::infinity(), -std::numeric_limits<T>::quiet_NaN()};
      x[i] = specials[pick(rng) % 4];
    } else {
      x[i] = static_cast<T>(std::ldexp(normal(rng), exponent(rng) / (p % 3 == 0 ? 1 : 8)));
    }
  }
  return x;
}

// ---- what a decoded element may be

// u8/i8/u4: |x' - x| <= scale / 2, plus the roundings of (x - min) / scale,
// q * scale and min + q * scale, and the absolute granularity of subnormals.
template <class T>
void check_affine_block(Quant kind, const BlockHeader<T>& h, const T* x, const T* decoded, size_t n) {
  bool finite = true;
  for (size_t i = 0; i < n; ++i) finite = finite && std::isfinite(x[i]);
  if (!finite) {
    INFO("a block with NaN or inf is the NaN marker and decodes to NaN");
    REQUIRE((std::isnan(h.min) && std::isnan(h.scale)));
    for (size_t i = 0; i < n; ++i) REQUIRE(std::isnan(decoded[i]));
    return;
  }
  REQUIRE(std::isfinite(h.min));
  REQUIRE(std::isfinite(h.scale));
  REQUIRE_FALSE(std::signbit(h.scale));
  const long double L = levels(kind);
  const long double eps = std::numeric_limits<T>::epsilon();
  const long double tiny = std::numeric_limits<T>::denorm_min();
  for (size_t i = 0; i < n; ++i) {
    INFO("element " << i << " of " << n << ": x = " << static_cast<double>(x[i]) << ", decoded "
                    << static_cast<double>(decoded[i]) << ", min " << static_cast<double>(h.min) << ", scale "
                    << static_cast<double>(h.scale));
    REQUIRE(std::isfinite(decoded[i]));
    if (h.scale == 0) {
      REQUIRE(std::bit_cast<Bits<T>>(decoded[i]) == std::bit_cast<Bits<T>>(h.min));
      REQUIRE(std::fabs(static_cast<long double>(x[i]) - h.min) <= L * tiny);
      continue;
    }
    const long double error = std::fabs(static_cast<long double>(decoded[i]) - static_cast<long double>(x[i]));
    const long double bound = h.scale / 2.0L +
                              4 * eps * (L * h.scale + std::fabs(static_cast<long double>(x[i])) + std::fabs(h.min)) +
                              (L + 4) * tiny;
    REQUIRE(error <= bound);
  }
}

// f16/bf16: the decoded value is x rounded to nearest-even in the format:
// no neighbour of it is closer to x, and a tie has an even mantissa.
template <class T>
void check_half(Quant kind, const Bytes& wire, const std::vector<T>& x, const std::vector<T>& decoded) {
  const auto value = [kind](uint16_t bits) -> long double {
    return kind == Quant::f16 ? f16_to_f32(bits) : bf16_to_f32(bits);
  };
  for (size_t i = 0; i < x.size(); ++i) {
    uint16_t h = 0;
    std::memcpy(&h, wire.data() + 2 * i, 2);
    INFO("element " << i << ": x = " << static_cast<double>(x[i]) << ", bits " << h);
    const T widened = static_cast<T>(kind == Quant::f16 ? f16_to_f32(h) : bf16_to_f32(h));
    REQUIRE(std::bit_cast<Bits<T>>(decoded[i]) == std::bit_cast<Bits<T>>(widened));
    if (std::isnan(x[i])) {
      REQUIRE(std::isnan(decoded[i]));
      continue;
    }
    if (std::isinf(x[i])) {
      REQUIRE(decoded[i] == x[i]);
      continue;
    }
    REQUIRE(std::signbit(decoded[i]) == std::signbit(x[i]));
    const long double exact = x[i];
    const long double error = std::fabs(exact - value(h));
    const uint16_t magnitude = h & 0x7fff;
    const uint16_t sign = h & 0x8000;
    const uint16_t max_finite = kind == Quant::f16 ? 0x7bff : 0x7f7f;
    if (std::isinf(decoded[i])) {
      // Overflow: x is at least halfway from the largest finite value to the next power of two.
      const long double largest = value(max_finite);
      const long double next = kind == Quant::f16 ? 65536.0L : std::ldexp(1.0L, 128);
      REQUIRE(std::fabs(exact) >= (largest + next) / 2);
      continue;
    }
    // The neighbour on x's side of the decoded value.
    const bool above = std::fabs(exact) > std::fabs(value(h));
    if (!above && magnitude == 0) continue;  // x == ±0
    const uint16_t toward = static_cast<uint16_t>(sign | (above ? magnitude + 1 : magnitude - 1));
    const long double neighbour =
        (above && magnitude == max_finite) ? (kind == Quant::f16 ? 65536.0L : std::ldexp(1.0L, 128)) : value(toward);
    const long double gap = std::fabs(std::fabs(neighbour) - std::fabs(value(h)));
    REQUIRE(error <= gap / 2);
    if (error == gap / 2) REQUIRE((h & 1) == 0);
  }
}

template <class T>
void check_round_trip(QuantSpec spec, const std::vector<T>& x, const Bytes& wire, const std::vector<T>& decoded) {
  if (!is_affine(spec.kind)) return check_half(spec.kind, wire, x, decoded);
  for (size_t begin = 0, index = 0; begin < x.size(); begin += spec.block, ++index) {
    const size_t n = std::min<size_t>(spec.block, x.size() - begin);
    INFO("block " << index);
    check_affine_block(spec.kind, header_of<T>(spec, wire, index), x.data() + begin, decoded.data() + begin, n);
  }
}

}  // namespace

TEST_CASE("quant kinds: fixed numbers and names", "[core][quant]") {
  CHECK(static_cast<int>(Quant::none) == 0);
  CHECK(static_cast<int>(Quant::u8) == 1);
  CHECK(static_cast<int>(Quant::i8) == 2);
  CHECK(static_cast<int>(Quant::f16) == 3);
  CHECK(static_cast<int>(Quant::bf16) == 4);
  CHECK(static_cast<int>(Quant::u4) == 5);
  CHECK(static_cast<int>(Quant::i8h) == 6);
  CHECK(static_cast<int>(Quant::i4h) == 7);
  CHECK(static_cast<int>(Quant::i8h_sr) == 8);
  CHECK(static_cast<int>(Quant::i4h_sr) == 9);
  for (int raw = 0; raw < kQuantCount; ++raw) {
    const auto kind = static_cast<Quant>(raw);
    CHECK(quant_valid(static_cast<uint32_t>(raw)));
    CHECK(parse_quant(quant_name(kind)) == kind);
  }
  CHECK(quant_name(Quant::u4) == "u4");
  CHECK(quant_name(Quant::i8h_sr) == "i8h-sr");
  CHECK_FALSE(quant_valid(10));
  CHECK_FALSE(parse_quant("int8").has_value());
  CHECK_THROWS_AS(quant_name(static_cast<Quant>(10)), std::invalid_argument);
  CHECK(quant_is_int_domain(Quant::i4h));
  CHECK_FALSE(quant_is_int_domain(Quant::u4));

  CHECK(quant_spec_valid({Quant::u8, 1}));
  CHECK(quant_spec_valid({Quant::u4, kMaxQuantBlock}));
  CHECK_FALSE(quant_spec_valid({Quant::none, 256}));
  CHECK_FALSE(quant_spec_valid({Quant::u8, 0}));
  CHECK_FALSE(quant_spec_valid({Quant::u8, kMaxQuantBlock + 1}));
  CHECK_FALSE(quant_spec_valid({static_cast<Quant>(10), 256}));
  float x = 1;
  uint8_t out[64];
  CHECK_THROWS_AS(quant_encoded_bytes<float>({Quant::none, 256}, 1), std::invalid_argument);
  CHECK_THROWS_AS(quant_encode<float>({Quant::u8, 0}, &x, 1, out), std::invalid_argument);
  // The integer-domain modes are int_quant.h's: the per-hop codecs refuse them.
  CHECK_THROWS_AS(quant_encoded_bytes<float>({Quant::i8h, 256}, 1), std::invalid_argument);
  CHECK_THROWS_AS(quant_decode<double>({static_cast<Quant>(7), 256}, out, 8, 1, nullptr), std::invalid_argument);
}

TEST_CASE("quant encoded sizes: the layout, and the default block's budget", "[core][quant]") {
  for (uint32_t block : {1u, 2u, 7u, 256u, 1000u}) {
    for (size_t count : {0, 1, 2, 255, 256, 257, 1000, 4099}) {
      const size_t blocks = (count + block - 1) / block;
      const size_t tail = count % block;
      const size_t tail_u4 = tail == 0 ? 0 : (block + 1) / 2 - (tail + 1) / 2;  // u4 bytes short of a full block
      CHECK(quant_encoded_bytes<float>({Quant::u8, block}, count) == blocks * 8 + count);
      CHECK(quant_encoded_bytes<float>({Quant::i8, block}, count) == blocks * 8 + count);
      CHECK(quant_encoded_bytes<double>({Quant::u8, block}, count) == blocks * 16 + count);
      CHECK(quant_encoded_bytes<float>({Quant::u4, block}, count) == blocks * (8 + (block + 1) / 2) - tail_u4);
      CHECK(quant_encoded_bytes<double>({Quant::u4, block}, count) == blocks * (16 + (block + 1) / 2) - tail_u4);
      CHECK(quant_encoded_bytes<float>({Quant::f16, block}, count) == 2 * count);
      CHECK(quant_encoded_bytes<double>({Quant::bf16, block}, count) == 2 * count);
    }
  }
  const size_t count = size_t{1} << 24;
  const double f32_bytes = 4.0 * count;
  const double u8_share = static_cast<double>(quant_encoded_bytes<float>({Quant::u8}, count)) / f32_bytes;
  const double u4_share = static_cast<double>(quant_encoded_bytes<float>({Quant::u4}, count)) / f32_bytes;
  CHECK(QuantSpec{}.block == kDefaultQuantBlock);
  CHECK(u8_share <= 0.26);
  CHECK(u4_share <= 0.135);
  CHECK(u8_share == Approx(0.2578125));
  CHECK(u4_share == Approx(0.1328125));
}

TEMPLATE_TEST_CASE("quant round trip, every path, fused = separate", "[core][quant]", float, double) {
  using T = TestType;
  const QuantSpec spec = GENERATE(from_range(swept_specs()));
  const Quant kind = spec.kind;
  const uint32_t block = spec.block;
  const size_t count = GENERATE(0, 1, 2, 255, 256, 257, 1000, 4099);
  const Shape shape = GENERATE(Shape::normal, Shape::magnitudes, Shape::specials);
  CAPTURE(quant_name(kind), block, count, static_cast<int>(shape), sizeof(T));

  const uint64_t seed = count * 1000003u + block * 101u + static_cast<uint64_t>(kind) * 7u + static_cast<int>(shape);
  const std::vector<T> x = make_input<T>(shape, count, seed);
  std::vector<T> local = make_input<T>(shape == Shape::normal ? Shape::normal : Shape::specials, count, ~seed);

  // Round trip, and the encoder is a function of its input.
  const Bytes wire = encode(spec, x);
  REQUIRE(wire.size() == quant_encoded_bytes<T>(spec, count));
  CHECK(encode(spec, x) == wire);
  const std::vector<T> decoded = decode<T>(spec, wire, count);
  check_round_trip(spec, x, wire, decoded);

  // decode_add: one IEEE addition per element after decoding; in place too.
  std::vector<T> acc(count);
  REQUIRE(quant_decode_add(spec, wire.data(), wire.size(), local.data(), count, acc.data()).ok());
  for (size_t i = 0; i < count; ++i) {
    const T expected = decoded[i] + local[i];
    INFO("element " << i);
    if (std::isnan(expected)) {
      REQUIRE(std::isnan(acc[i]));
    } else {
      REQUIRE(std::bit_cast<Bits<T>>(acc[i]) == std::bit_cast<Bits<T>>(expected));
    }
  }
  std::vector<T> in_place = local;
  REQUIRE(quant_decode_add(spec, wire.data(), wire.size(), in_place.data(), count, in_place.data()).ok());
  CHECK(same_bits(in_place, acc));

  // Fused decode-add-encode: the bytes of decode_add then encode; in place too.
  const Bytes separate = encode(spec, acc);
  Bytes fused(wire.size());
  REQUIRE(quant_decode_add_encode(spec, wire.data(), wire.size(), local.data(), count, fused.data()).ok());
  CHECK(fused == separate);
  Bytes fused_in_place = wire;
  REQUIRE(quant_decode_add_encode(spec, fused_in_place.data(), fused_in_place.size(), local.data(), count,
                                  fused_in_place.data())
              .ok());
  CHECK(fused_in_place == separate);

  // Every compiled kernel path: the same bytes and bits as the default one.
  for (const QuantPath path : quant_detail::quant_paths()) {
    CAPTURE(quant_detail::quant_path_name(path));
    Bytes path_wire(wire.size());
    quant_detail::encode_with(path, spec, x.data(), count, path_wire.data());
    CHECK(path_wire == wire);
    std::vector<T> path_decoded(count);
    REQUIRE(quant_detail::decode_with<T>(path, spec, wire.data(), wire.size(), count, nullptr, path_decoded.data())
                .ok());
    CHECK(same_bits(path_decoded, decoded));
    std::vector<T> path_acc(count);
    REQUIRE(quant_detail::decode_with(path, spec, wire.data(), wire.size(), count, local.data(), path_acc.data())
                .ok());
    CHECK(same_bits(path_acc, acc));
    Bytes path_fused(wire.size());
    REQUIRE(quant_detail::decode_add_encode_with(path, spec, wire.data(), wire.size(), local.data(), count,
                                                 path_fused.data())
                .ok());
    CHECK(path_fused == fused);
  }
}

TEMPLATE_TEST_CASE("quant kernels: vector paths give the scalar bytes on random blocks", "[core][quant]", float,
                   double) {
  // Straight at the kernels, with every block length up to a few vectors and
  // inputs that put many codes on rounding ties (x - min an odd multiple of scale / 2).
  using T = TestType;
  const auto& scalar = quant_detail::quant_kernels<T>(QuantPath::scalar);
  std::mt19937_64 rng(42);
  std::normal_distribution<double> normal(0.0, 1.0);
  std::uniform_int_distribution<int> code(0, 510);
  for (const QuantPath path : quant_detail::quant_paths()) {
    const auto& kernels = quant_detail::quant_kernels<T>(path);
    CAPTURE(quant_detail::quant_path_name(path));
    for (size_t n = 1; n <= 80; ++n) {
      for (int trial = 0; trial < 20; ++trial) {
        std::vector<T> x(n);
        std::vector<T> local(n);
        const T scale = static_cast<T>(std::ldexp(1.0, trial - 10));
        const T min = static_cast<T>(normal(rng));
        for (size_t i = 0; i < n; ++i) {
          x[i] = trial % 2 == 0 ? static_cast<T>(normal(rng)) : min + static_cast<T>(code(rng)) * scale / 2;
          local[i] = static_cast<T>(normal(rng));
        }
        CAPTURE(n, trial);
        const auto r = kernels.range(x.data(), n);
        const auto r0 = scalar.range(x.data(), n);
        REQUIRE(std::bit_cast<Bits<T>>(r.min) == std::bit_cast<Bits<T>>(r0.min));
        REQUIRE(std::bit_cast<Bits<T>>(r.max) == std::bit_cast<Bits<T>>(r0.max));
        const T block_scale = trial % 2 == 0 ? (r0.max - r0.min) / T(255) : scale;
        const T block_min = trial % 2 == 0 ? r0.min : min;
        if (block_scale == 0) continue;  // a constant block: the kernels are not called for it
        for (uint8_t flip : {uint8_t{0}, uint8_t{0x80}}) {
          Bytes codes(n, 0xee);
          Bytes codes0(n, 0xee);
          kernels.quantize8(x.data(), n, block_min, block_scale, flip, codes.data());
          scalar.quantize8(x.data(), n, block_min, block_scale, flip, codes0.data());
          REQUIRE(codes == codes0);
          std::vector<T> out(n);
          std::vector<T> out0(n);
          kernels.dequantize8(codes.data(), n, block_min, block_scale, flip, local.data(), out.data());
          scalar.dequantize8(codes.data(), n, block_min, block_scale, flip, local.data(), out0.data());
          REQUIRE(same_bits(out, out0));
          kernels.dequantize8(codes.data(), n, block_min, block_scale, flip, nullptr, out.data());
          scalar.dequantize8(codes.data(), n, block_min, block_scale, flip, nullptr, out0.data());
          REQUIRE(same_bits(out, out0));
        }
        const T scale4 = trial % 2 == 0 ? (r0.max - r0.min) / T(15) : scale * 17;
        Bytes nibbles((n + 1) / 2, 0xee);
        Bytes nibbles0((n + 1) / 2, 0xee);
        kernels.quantize4(x.data(), n, block_min, scale4, nibbles.data());
        scalar.quantize4(x.data(), n, block_min, scale4, nibbles0.data());
        REQUIRE(nibbles == nibbles0);
        if (n % 2 == 1) REQUIRE((nibbles.back() >> 4) == 0);
        std::vector<T> out(n);
        std::vector<T> out0(n);
        kernels.dequantize4(nibbles.data(), n, block_min, scale4, local.data(), out.data());
        scalar.dequantize4(nibbles.data(), n, block_min, scale4, local.data(), out0.data());
        REQUIRE(same_bits(out, out0));
      }
    }
  }
}

TEST_CASE("quant golden bytes: a fixed input encodes to these bytes", "[core][quant]") {
  // Blocks of 4: codes on ties at scale 1 (0.5 -> 0 and 1.5 -> 2: nearest-even),
  // an ordinary block, a constant one, one with inf (the NaN marker), and a
  // 3-element tail (u4: a padding nibble). One line per block. Special
  // blocks' codes are zero bytes, i8 included.
  const float inf = std::numeric_limits<float>::infinity();
  const std::vector<float> x = {0, 0.5f, 1.5f, 255, -1, 0, 0.5f, 2, 1.5f, 1.5f, 1.5f, 1.5f, inf, 7, 0, 1, 3, -3, 0};
  const std::vector<double> xd(x.begin(), x.end());
  struct Golden {
    Quant kind;
    std::string f32;
    std::string f64;
  };
  const Golden golden[] = {
      {Quant::u8,
       "00000000" "0000803f" "000002ff"
       "000080bf" "c1c0403c" "005580ff"
       "0000c03f" "00000000" "00000000"
       "0000c07f" "0000c07f" "00000000"
       "000040c0" "c1c0c03c" "ff0080",
       "0000000000000000" "000000000000f03f" "000002ff"
       "000000000000f0bf" "181818181818883f" "005580ff"
       "000000000000f83f" "0000000000000000" "00000000"
       "000000000000f87f" "000000000000f87f" "00000000"
       "00000000000008c0" "181818181818983f" "ff0080"},
      {Quant::i8,
       "00000000" "0000803f" "8080827f"
       "000080bf" "c1c0403c" "80d5007f"
       "0000c03f" "00000000" "00000000"
       "0000c07f" "0000c07f" "00000000"
       "000040c0" "c1c0c03c" "7f8000",
       "0000000000000000" "000000000000f03f" "8080827f"
       "000000000000f0bf" "181818181818883f" "80d5007f"
       "000000000000f83f" "0000000000000000" "00000000"
       "000000000000f87f" "000000000000f87f" "00000000"
       "00000000000008c0" "181818181818983f" "7f8000"},
      {Quant::u4,
       "00000000" "00008841" "00f0"
       "000080bf" "cdcc4c3e" "50f8"
       "0000c03f" "00000000" "0000"
       "0000c07f" "0000c07f" "0000"
       "000040c0" "cdcccc3e" "0f08",
       "0000000000000000" "0000000000003140" "00f0"
       "000000000000f0bf" "9a9999999999c93f" "50f8"
       "000000000000f83f" "0000000000000000" "0000"
       "000000000000f87f" "000000000000f87f" "0000"
       "00000000000008c0" "9a9999999999d93f" "0f08"},
      {Quant::f16, "00000038003ef85b" "00bc000000380040" "003e003e003e003e" "007c00470000003c" "004200c20000", ""},
      {Quant::bf16, "0000003fc03f7f43" "80bf0000003f0040" "c03fc03fc03fc03f" "807fe0400000803f" "404040c00000", ""},
  };
  for (const Golden& g : golden) {
    CAPTURE(quant_name(g.kind));
    const QuantSpec spec{g.kind, 4};
    const Bytes wire = encode(spec, x);
    CHECK(ferry::test::to_hex(wire) == g.f32);
    // f16/bf16 carry no metadata: double data that floats represent gives the same bytes.
    CHECK(ferry::test::to_hex(encode(spec, xd)) == (g.f64.empty() ? g.f32 : g.f64));
  }
  // And back: the exact values of the formula min + q * scale.
  const QuantSpec u8{Quant::u8, 4};
  const std::vector<float> y = decode<float>(u8, encode(u8, x), x.size());
  CHECK(std::vector<float>(y.begin(), y.begin() + 4) == std::vector<float>{0, 0, 2, 255});
  CHECK(y[4] == -1);
  CHECK(y[5] == -1 + 85 * (3.0f / 255));
  CHECK(std::vector<float>(y.begin() + 8, y.begin() + 12) == std::vector<float>(4, 1.5f));
  for (size_t i = 12; i < 16; ++i) CHECK(std::bit_cast<uint32_t>(y[i]) == 0x7fc00000u);
}

TEMPLATE_TEST_CASE("quant special blocks: constant, non-finite, too wide, subnormal", "[core][quant]", float,
                   double) {
  using T = TestType;
  const Quant kind = GENERATE(Quant::u8, Quant::i8, Quant::u4);
  const QuantSpec spec{kind, 8};
  const T nan = std::numeric_limits<T>::quiet_NaN();
  const T inf = std::numeric_limits<T>::infinity();
  const T big = std::numeric_limits<T>::max();
  const T sub = std::numeric_limits<T>::denorm_min();
  CAPTURE(quant_name(kind), sizeof(T));

  SECTION("constant blocks decode to exactly their value, -0 included") {
    for (T v : {T(0), -T(0), T(1.25), -big, sub, -sub * 3, T(1e-3)}) {
      const std::vector<T> x(13, v);
      const Bytes wire = encode(spec, x);
      CHECK(header_of<T>(spec, wire, 0).scale == 0);
      for (size_t i = 2 * sizeof(T); i < block_bytes<T>(kind, 8); ++i) CHECK(wire[i] == 0);
      CHECK(same_bits(decode<T>(spec, wire, x.size()), x));
    }
  }
  SECTION("NaN or inf anywhere in a block: that block, and only it, decodes to NaN") {
    for (T special : {nan, -nan, inf, -inf}) {
      std::vector<T> x(20);
      for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<T>(i) * T(0.25);
      x[11] = special;
      const Bytes wire = encode(spec, x);
      const auto h = header_of<T>(spec, wire, 1);
      CHECK(std::bit_cast<Bits<T>>(h.min) == std::bit_cast<Bits<T>>(std::numeric_limits<T>::quiet_NaN()));
      CHECK(std::bit_cast<Bits<T>>(h.scale) == std::bit_cast<Bits<T>>(std::numeric_limits<T>::quiet_NaN()));
      const std::vector<T> y = decode<T>(spec, wire, x.size());
      for (size_t i = 0; i < x.size(); ++i) CHECK(std::isnan(y[i]) == (i >= 8 && i < 16));
      // A NaN pseudo-gradient stays NaN through a reduce-scatter hop.
      const std::vector<T> local(x.size(), T(1));
      Bytes next(wire.size());
      REQUIRE(quant_decode_add_encode(spec, wire.data(), wire.size(), local.data(), x.size(), next.data()).ok());
      CHECK(std::isnan(header_of<T>(spec, next, 1).scale));
      CHECK_FALSE(std::isnan(header_of<T>(spec, next, 0).scale));
    }
  }
  SECTION("a finite block too wide to decode without overflow is the NaN marker") {
    const std::vector<T> x = {-big, big, 0, 1};
    const Bytes wire = encode(spec, x);
    CHECK(std::isnan(header_of<T>(spec, wire, 0).scale));
    const std::vector<T> ok = {-big / 4, big / 4, 0, 1};
    const Bytes wire_ok = encode(spec, ok);
    const auto h = header_of<T>(spec, wire_ok, 0);
    CHECK(std::isfinite(h.scale));
    const std::vector<T> y = decode<T>(spec, wire_ok, ok.size());
    for (T v : y) CHECK(std::isfinite(v));
    check_affine_block(kind, h, ok.data(), y.data(), ok.size());
  }
  SECTION("subnormal blocks keep the bound, and a range below scale's resolution is constant") {
    std::vector<T> x(16);
    for (size_t i = 0; i < x.size(); ++i) x[i] = sub * static_cast<T>(i * 37 % 101) - sub * 50;
    const Bytes wire = encode(spec, x);
    const std::vector<T> y = decode<T>(spec, wire, x.size());
    for (size_t b = 0; b < 2; ++b) check_affine_block(kind, header_of<T>(spec, wire, b), x.data() + 8 * b, y.data() + 8 * b, 8);
    const std::vector<T> narrow = {sub, sub * 2, sub, sub};  // range / L underflows to 0
    const Bytes narrow_wire = encode(spec, narrow);
    CHECK(header_of<T>(spec, narrow_wire, 0).scale == 0);
    CHECK(decode<T>(spec, narrow_wire, 4) == std::vector<T>(4, sub));
  }
}

TEMPLATE_TEST_CASE("quant f16/bf16: IEEE rounding, overflow, NaN, subnormals", "[core][quant]", float, double) {
  using T = TestType;
  const T nan = std::numeric_limits<T>::quiet_NaN();
  const T inf = std::numeric_limits<T>::infinity();
  std::vector<T> x = {0,       -T(0),     1,         -2.5,       65504,       65519,       65520,     -1e6,
                      inf,     -inf,      nan,       T(1e-7),    T(5.96e-8),  T(2.98e-8),  T(3e-8),   T(1e-40),
                      T(3e38), T(3.4e38), T(-1e-30), T(0.1),     T(1.0009765625), T(1.00048828125)};
  if constexpr (sizeof(T) == 8) {
    // Just past a tie: rounding to float first would land on the tie and go to even.
    x.push_back(1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40));  // f16 tie 1 + 2^-11, plus a little
    x.push_back(1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -40));   // bf16 tie, plus a little
    x.push_back(-(1.0 + 3 * std::ldexp(1.0, -11) - std::ldexp(1.0, -45)));
    x.push_back(std::ldexp(1.0, -25) + std::ldexp(1.0, -60));  // f16 subnormal tie, plus a little
    x.push_back(std::ldexp(1.0, -134) + std::ldexp(1.0, -170));  // bf16 subnormal tie, plus a little
    x.push_back(1e300);
    x.push_back(-1e-300);
  }
  for (Quant kind : {Quant::f16, Quant::bf16}) {
    CAPTURE(quant_name(kind));
    const QuantSpec spec{kind};
    const Bytes wire = encode(spec, x);
    check_half(kind, wire, x, decode<T>(spec, wire, x.size()));
  }
  if constexpr (sizeof(T) == 8) {
    const Bytes f16 = encode(QuantSpec{Quant::f16}, std::vector<double>{1.0 + std::ldexp(1.0, -11) + std::ldexp(1.0, -40)});
    CHECK(ferry::test::to_hex(f16) == "013c");
    const Bytes bf16 = encode(QuantSpec{Quant::bf16}, std::vector<double>{1.0 + std::ldexp(1.0, -8) + std::ldexp(1.0, -40)});
    CHECK(ferry::test::to_hex(bf16) == "813f");
  }
}

TEMPLATE_TEST_CASE("quant decoders reject malformed metadata and lengths", "[core][quant]", float, double) {
  using T = TestType;
  const Quant kind = GENERATE(Quant::u8, Quant::i8, Quant::u4);
  const QuantSpec spec{kind, 16};
  CAPTURE(quant_name(kind), sizeof(T));
  std::vector<T> x(40);
  for (size_t i = 0; i < x.size(); ++i) x[i] = static_cast<T>(std::sin(static_cast<double>(i)));
  const Bytes wire = encode(spec, x);
  const std::vector<T> local(x.size(), T(1));
  const T nan = std::numeric_limits<T>::quiet_NaN();
  const T inf = std::numeric_limits<T>::infinity();
  const T big = std::numeric_limits<T>::max();

  const auto expect_rejected = [&](const Bytes& bad, size_t count) {
    std::vector<T> out(count);
    Bytes out_wire(bad.size() + 64);
    const Status a = quant_decode(spec, bad.data(), bad.size(), count, out.data());
    const Status b = quant_decode_add(spec, bad.data(), bad.size(), local.data(), count, out.data());
    const Status c = quant_decode_add_encode(spec, bad.data(), bad.size(), local.data(), count, out_wire.data());
    for (const Status* s : {&a, &b, &c}) {
      INFO(s->message);
      CHECK(s->code == Errc::protocol);
      CHECK_FALSE(s->message.empty());
    }
  };
  struct BadHeader {
    T min;
    T scale;
  };
  const BadHeader bad_headers[] = {
      {0, -1},  {0, -T(0)}, {0, nan}, {0, inf},  {inf, 1},   {nan, 1},
      {-inf, 0}, {0, -nan}, {big, big / 100}, {-big, big}, {nan, -1}, {big / 2, big / 8}};
  for (const BadHeader& h : bad_headers) {
    for (size_t block_index : {0, 2}) {
      CAPTURE(static_cast<double>(h.min), static_cast<double>(h.scale), block_index);
      Bytes bad = wire;
      const size_t offset = block_index * block_bytes<T>(kind, 16);
      std::memcpy(bad.data() + offset, &h.min, sizeof(T));
      std::memcpy(bad.data() + offset + sizeof(T), &h.scale, sizeof(T));
      expect_rejected(bad, x.size());
    }
  }
  Bytes longer = wire;
  longer.push_back(0);
  expect_rejected(longer, x.size());
  expect_rejected(Bytes(wire.begin(), wire.end() - 1), x.size());
  expect_rejected(Bytes{}, x.size());
  expect_rejected(wire, x.size() + 1);
  std::vector<T> none(1);
  const Status f16 = quant_decode<T>({Quant::f16}, wire.data(), 3, 1, none.data());
  CHECK(f16.code == Errc::protocol);
}

TEMPLATE_TEST_CASE("quant decoders survive random bytes", "[core][quant]", float, double) {
  // Whatever the bytes, a length-correct chunk either decodes or is refused,
  // and nothing is read or written out of bounds (run under ASan in CI). What
  // a validated u8/i8/u4 block decodes to is finite or the marker's NaN.
  using T = TestType;
  std::mt19937_64 rng(7);
  std::uniform_int_distribution<int> byte(0, 255);
  for (Quant kind : kKinds) {
    for (uint32_t block : {1u, 3u, 16u, 256u}) {
      for (size_t count : {1, 2, 31, 257, 1000}) {
        const QuantSpec spec{kind, block};
        const size_t bytes = quant_encoded_bytes<T>(spec, count);
        const std::vector<T> local(count, T(0.5));
        for (int trial = 0; trial < 20; ++trial) {
          Bytes in(bytes);
          for (uint8_t& b : in) b = static_cast<uint8_t>(byte(rng));
          if (trial % 2 == 1 && is_affine(kind)) {
            // Plausible headers, so the codes get decoded too.
            for (size_t offset = 0; offset < bytes; offset += block_bytes<T>(kind, block)) {
              const T min = static_cast<T>(byte(rng) - 128);
              const T scale = static_cast<T>(byte(rng)) / 64;
              std::memcpy(in.data() + offset, &min, sizeof(T));
              std::memcpy(in.data() + offset + sizeof(T), &scale, sizeof(T));
            }
          }
          std::vector<T> out(count);
          const Status s = quant_decode(spec, in.data(), in.size(), count, out.data());
          CHECK((s.ok() || s.code == Errc::protocol));
          if (s.ok() && is_affine(kind)) {
            for (T v : out) CHECK_FALSE(std::isinf(v));
          }
          Bytes next(bytes);
          const Status f = quant_decode_add_encode(spec, in.data(), in.size(), local.data(), count, next.data());
          CHECK(f.code == s.code);
          if (trial % 2 == 1 && is_affine(kind)) CHECK(s.ok());
        }
      }
    }
  }
}

TEST_CASE("quant results do not depend on the caller's MXCSR", "[core][quant]") {
#if defined(__SSE__)
  std::vector<float> x(1000);
  std::vector<float> local(1000);
  std::mt19937 rng(3);
  std::normal_distribution<float> normal(0.0f, 1.0f);
  for (size_t i = 0; i < x.size(); ++i) {
    x[i] = normal(rng) * 1e-38f;  // subnormal products and sums
    local[i] = normal(rng) * 1e-39f;
  }
  for (Quant kind : kKinds) {
    const QuantSpec spec{kind, 64};
    const Bytes expected = encode(spec, x);
    const std::vector<float> expected_acc = [&] {
      std::vector<float> acc(x.size());
      REQUIRE(quant_decode_add(spec, expected.data(), expected.size(), local.data(), x.size(), acc.data()).ok());
      return acc;
    }();
    const unsigned saved = _mm_getcsr();
    // Flush-to-zero, denormals-are-zero, round toward zero, overflow unmasked.
    const unsigned hostile = (saved | 0x8040u | 0x6000u) & ~0x0400u;
    _mm_setcsr(hostile);
    Bytes wire(expected.size());
    quant_encode(spec, x.data(), x.size(), wire.data());
    std::vector<float> acc(x.size());
    const Status s = quant_decode_add(spec, wire.data(), wire.size(), local.data(), x.size(), acc.data());
    const unsigned after = _mm_getcsr();
    _mm_setcsr(saved);
    CAPTURE(quant_name(kind));
    CHECK(s.ok());
    CHECK((after & 0xffc0u) == (hostile & 0xffc0u));
    CHECK(wire == expected);
    CHECK(same_bits(acc, expected_acc));
  }
#else
  SUCCEED("not x86");
#endif
}
