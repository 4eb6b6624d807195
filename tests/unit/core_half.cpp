// f16/bf16 <-> f32: the scalar functions against an independent reference
// built from double arithmetic (ldexp / nearbyint), and the bulk functions
// (F16C where the build has it) against the scalar ones, bit for bit.
#include <catch2/catch.hpp>

#include <bit>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/half.h"

#if defined(__SSE__)
#include <xmmintrin.h>
#endif

using namespace ferry;

namespace {

static_assert(f32_to_f16(1.0f) == 0x3c00 && f16_to_f32(0x3c00) == 1.0f);
static_assert(f32_to_bf16(1.0f) == 0x3f80 && bf16_to_f32(0x3f80) == 1.0f);

uint32_t bits(float f) { return std::bit_cast<uint32_t>(f); }
float from_bits(uint32_t u) { return std::bit_cast<float>(u); }
bool f16_is_nan(uint16_t h) { return (h & 0x7c00) == 0x7c00 && (h & 0x3ff) != 0; }
bool bf16_is_nan(uint16_t b) { return (b & 0x7f80) == 0x7f80 && (b & 0x7f) != 0; }

// The value of a non-NaN f16, from the format's definition.
double f16_value(uint16_t h) {
  const int exponent = (h >> 10) & 0x1f;
  const int mantissa = h & 0x3ff;
  double magnitude = 0;
  if (exponent == 0x1f) {
    magnitude = std::numeric_limits<double>::infinity();
  } else if (exponent == 0) {
    magnitude = std::ldexp(mantissa, -24);
  } else {
    magnitude = std::ldexp(1024 + mantissa, exponent - 25);
  }
  return (h & 0x8000) != 0 ? -magnitude : magnitude;
}

double bf16_value(uint16_t b) {
  const int exponent = (b >> 7) & 0xff;
  const int mantissa = b & 0x7f;
  double magnitude = 0;
  if (exponent == 0xff) {
    magnitude = std::numeric_limits<double>::infinity();
  } else if (exponent == 0) {
    magnitude = std::ldexp(mantissa, -133);
  } else {
    magnitude = std::ldexp(128 + mantissa, exponent - 134);
  }
  return (b & 0x8000) != 0 ? -magnitude : magnitude;
}

// Round a finite or infinite (non-NaN) f32 to f16: scale so that the f16's
// last mantissa bit is the unit, round to nearest-even in double (exact), and
// encode the integer we got.
uint16_t reference_f32_to_f16(float x) {
  const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  const double magnitude = std::fabs(static_cast<double>(x));
  if (magnitude >= 65520.0) return sign | 0x7c00;  // halfway above 65504 or more: inf
  if (magnitude < std::ldexp(1.0, -14)) {
    return static_cast<uint16_t>(sign | static_cast<uint16_t>(std::nearbyint(std::ldexp(magnitude, 24))));
  }
  int exponent = std::ilogb(magnitude);
  double units = std::nearbyint(std::ldexp(magnitude, 10 - exponent));  // in [1024, 2048]
  if (units == 2048) {
    units = 1024;
    ++exponent;
  }
  return static_cast<uint16_t>(sign | ((exponent + 15) << 10) | (static_cast<int>(units) - 1024));
}

uint16_t reference_f32_to_bf16(float x) {
  const uint16_t sign = std::signbit(x) ? 0x8000 : 0;
  const double magnitude = std::fabs(static_cast<double>(x));
  if (magnitude == 0) return sign;
  const int exponent = std::max(std::ilogb(magnitude), -126);
  const double rounded = std::ldexp(std::nearbyint(std::ldexp(magnitude, 7 - exponent)), exponent - 7);
  if (rounded >= std::ldexp(1.0, 128)) return sign | 0x7f80;
  const uint32_t f32 = bits(static_cast<float>(rounded));
  REQUIRE((f32 & 0xffff) == 0);  // the rounded value has at most 8 significant bits
  return static_cast<uint16_t>(sign | (f32 >> 16));
}

// f32 inputs around every rounding boundary of a 16-bit format: each
// representable value, the midpoint to the next one (a tie), and their f32
// neighbours; both signs. `value` gives the format's values in order.
template <class Value>
std::vector<float> boundary_inputs(uint16_t largest_finite, Value value) {
  std::vector<float> inputs;
  for (uint16_t h = 0; h <= largest_finite; ++h) {
    const double here = value(h);
    // Past the largest finite value, the next step would be as wide as the last one.
    const double next = h == largest_finite ? 2 * here - value(static_cast<uint16_t>(h - 1))
                                            : value(static_cast<uint16_t>(h + 1));
    const auto midpoint = static_cast<float>((here + next) / 2);  // exact: one bit more than the format
    for (const float x : {static_cast<float>(here), midpoint}) {
      for (const float y : {x, std::nextafter(x, 0.0f), std::nextafter(x, INFINITY)}) {
        inputs.push_back(y);
        inputs.push_back(-y);
      }
    }
  }
  return inputs;
}

std::vector<float> special_inputs() {
  const float inf = std::numeric_limits<float>::infinity();
  std::vector<float> inputs = {0.0f, -0.0f, inf, -inf, FLT_MAX, -FLT_MAX, FLT_MIN, -FLT_MIN,
                               FLT_TRUE_MIN, -FLT_TRUE_MIN, 65504.0f, 65519.996f, 65520.0f, 65536.0f,
                               0x1p-24f, 0x1p-25f, std::nextafter(0x1p-25f, 1.0f), 0x1p-26f, 0x1.8p-24f,
                               0x1.4p-23f, 0x1p-14f, 0x1.ff8p-15f, 0x1.ffcp-15f, 1e10f, -1e-10f, 3.0f, 0.1f};
  for (const uint32_t nan : {0x7fc00000u, 0xffc00000u, 0x7f800001u, 0xff800001u, 0x7fa5a5a5u,
                             0xffffffffu, 0x7fbfffffu, 0x7f802000u, 0x7f801fffu}) {
    inputs.push_back(from_bits(nan));
  }
  return inputs;
}

// Every 4093rd f32 bit pattern and a million random ones.
std::vector<float> spread_inputs() {
  std::vector<float> inputs;
  for (uint64_t u = 0; u <= 0xffffffffu; u += 4093) inputs.push_back(from_bits(static_cast<uint32_t>(u)));
  std::mt19937 random(20240601);
  for (int i = 0; i < 1'000'000; ++i) inputs.push_back(from_bits(static_cast<uint32_t>(random())));
  return inputs;
}

// Bulk conversion over the whole vector and over a misaligned, odd-length
// slice of it (vector tails), compared with the scalar function bit for bit.
template <class In, class Out, class Scalar, class Bulk>
void check_bulk_matches_scalar(const std::vector<In>& inputs, Scalar scalar, Bulk bulk) {
  for (const size_t offset : {size_t{0}, size_t{1}, size_t{3}}) {
    const size_t count = inputs.size() - offset - (offset == 0 ? 0 : 5);
    std::vector<Out> out(count);
    bulk(inputs.data() + offset, out.data(), count);
    size_t mismatches = 0;
    for (size_t i = 0; i < count; ++i) {
      const Out expected = scalar(inputs[offset + i]);
      if (std::memcmp(&expected, &out[i], sizeof(Out)) != 0 && mismatches++ == 0) {
        INFO("offset " << offset << " index " << i);
        CHECK(std::memcmp(&expected, &out[i], sizeof(Out)) == 0);
      }
    }
    CHECK(mismatches == 0);
  }
}

}  // namespace

TEST_CASE("f16 -> f32 is exact for all 65536 inputs, bulk equals scalar", "[core][half]") {
  std::vector<uint16_t> all(65536);
  for (uint32_t h = 0; h < all.size(); ++h) all[h] = static_cast<uint16_t>(h);

  size_t mismatches = 0;
  for (const uint16_t h : all) {
    const float f = f16_to_f32(h);
    bool ok = false;
    if (f16_is_nan(h)) {  // quiet NaN, sign and payload kept
      const uint32_t expected = ((h & 0x8000u) << 16) | 0x7fc00000u | ((h & 0x3ffu) << 13);
      ok = bits(f) == expected;
    } else {
      ok = bits(f) == bits(static_cast<float>(f16_value(h)));
    }
    if (!ok && mismatches++ == 0) FAIL_CHECK("f16 " << h << " -> f32 bits " << bits(f));
  }
  CHECK(mismatches == 0);

  check_bulk_matches_scalar<uint16_t, float>(all, [](uint16_t h) { return f16_to_f32(h); },
                                             [](const uint16_t* in, float* out, size_t n) { f16_to_f32(in, out, n); });
}

TEST_CASE("f16 -> f32 -> f16 round-trips every non-NaN and every quiet NaN", "[core][half]") {
  for (uint32_t h = 0; h < 65536; ++h) {
    const auto half = static_cast<uint16_t>(h);
    const uint16_t expected = f16_is_nan(half) ? static_cast<uint16_t>(half | 0x200) : half;
    if (f32_to_f16(f16_to_f32(half)) != expected) FAIL_CHECK("f16 " << h);
  }
}

TEST_CASE("f32 -> f16 rounds to nearest-even, saturates to inf, keeps NaN", "[core][half]") {
  std::vector<float> inputs = boundary_inputs(0x7bff, f16_value);
  for (const auto& more : {special_inputs(), spread_inputs()}) inputs.insert(inputs.end(), more.begin(), more.end());

  size_t mismatches = 0;
  for (const float x : inputs) {
    const uint16_t h = f32_to_f16(x);
    bool ok = false;
    if (std::isnan(x)) {
      ok = f16_is_nan(h) && (h & 0x200) != 0 && ((h & 0x8000) != 0) == std::signbit(x);
    } else {
      ok = h == reference_f32_to_f16(x);
    }
    if (!ok && mismatches++ == 0) {
      FAIL_CHECK("f32 bits " << bits(x) << " -> f16 " << h << ", reference " << reference_f32_to_f16(x));
    }
  }
  CHECK(mismatches == 0);

  check_bulk_matches_scalar<float, uint16_t>(inputs, [](float f) { return f32_to_f16(f); },
                                             [](const float* in, uint16_t* out, size_t n) { f32_to_f16(in, out, n); });
}

TEST_CASE("f32 -> f16 edge values", "[core][half]") {
  CHECK(f32_to_f16(65504.0f) == 0x7bff);
  CHECK(f32_to_f16(65519.996f) == 0x7bff);
  CHECK(f32_to_f16(65520.0f) == 0x7c00);
  CHECK(f32_to_f16(-1e9f) == 0xfc00);
  CHECK(f32_to_f16(0x1p-24f) == 0x0001);
  CHECK(f32_to_f16(0x1p-25f) == 0x0000);    // tie between 0 and the smallest subnormal: even is 0
  CHECK(f32_to_f16(0x1.8p-24f) == 0x0002);  // tie between 1 and 2 units: even is 2
  CHECK(f32_to_f16(-0.0f) == 0x8000);
  CHECK(f32_to_f16(0x1.ff8p-15f) == 0x03ff);  // the largest subnormal
  CHECK(f32_to_f16(0x1.ffcp-15f) == 0x0400);  // a tie above it rounds up into the normals
  CHECK(f32_to_f16(1.0f + 0x1p-11f) == 0x3c00);
  CHECK(f32_to_f16(1.0f + 0x1.8p-10f) == 0x3c02);
}

TEST_CASE("bf16 <-> f32: exact widening, nearest-even narrowing, bulk equals scalar", "[core][half]") {
  std::vector<uint16_t> all(65536);
  for (uint32_t b = 0; b < all.size(); ++b) all[b] = static_cast<uint16_t>(b);
  for (const uint16_t b : all) {
    const float f = bf16_to_f32(b);
    if (bits(f) != static_cast<uint32_t>(b) << 16) FAIL_CHECK("bf16 " << b);
    if (!bf16_is_nan(b) && bits(f) != bits(static_cast<float>(bf16_value(b)))) FAIL_CHECK("bf16 value " << b);
  }
  check_bulk_matches_scalar<uint16_t, float>(all, [](uint16_t b) { return bf16_to_f32(b); },
                                             [](const uint16_t* in, float* out, size_t n) { bf16_to_f32(in, out, n); });

  std::vector<float> inputs = boundary_inputs(0x7f7f, bf16_value);
  for (const auto& more : {special_inputs(), spread_inputs()}) inputs.insert(inputs.end(), more.begin(), more.end());
  size_t mismatches = 0;
  for (const float x : inputs) {
    const uint16_t b = f32_to_bf16(x);
    bool ok = false;
    if (std::isnan(x)) {
      ok = b == static_cast<uint16_t>((bits(x) >> 16) | 0x40);
    } else {
      ok = b == reference_f32_to_bf16(x);
    }
    if (!ok && mismatches++ == 0) FAIL_CHECK("f32 bits " << bits(x) << " -> bf16 " << b);
  }
  CHECK(mismatches == 0);
  check_bulk_matches_scalar<float, uint16_t>(inputs, [](float f) { return f32_to_bf16(f); },
                                             [](const float* in, uint16_t* out, size_t n) { f32_to_bf16(in, out, n); });

  CHECK(f32_to_bf16(FLT_MAX) == 0x7f80);
  CHECK(f32_to_bf16(-FLT_MAX) == 0xff80);
  CHECK(f32_to_bf16(FLT_TRUE_MIN) == 0x0000);
  CHECK(f32_to_bf16(from_bits(0x00008000u)) == 0x0000);  // subnormal tie: even
  CHECK(f32_to_bf16(from_bits(0x00018000u)) == 0x0002);
  CHECK(f32_to_bf16(from_bits(0x7f800001u)) == 0x7fc0);  // signalling NaN made quiet, not inf
}

TEST_CASE("bulk conversions accept an empty range", "[core][half]") {
  f16_to_f32(nullptr, nullptr, 0);
  f32_to_f16(nullptr, nullptr, 0);
  bf16_to_f32(nullptr, nullptr, 0);
  f32_to_bf16(nullptr, nullptr, 0);
  SUCCEED();
}

#if defined(__SSE__)
TEST_CASE("conversions do not depend on MXCSR flush-to-zero / denormals-are-zero", "[core][half]") {
  // Training frameworks may set FTZ/DAZ (torch.set_flush_denormal); f16
  // subnormals must survive it, or peers would disagree.
  std::vector<uint16_t> all(65536);
  for (uint32_t h = 0; h < all.size(); ++h) all[h] = static_cast<uint16_t>(h);
  std::vector<float> widened(all.size()), widened_ftz(all.size());
  std::vector<uint16_t> narrowed(all.size()), narrowed_ftz(all.size());
  f16_to_f32(all.data(), widened.data(), all.size());
  f32_to_f16(widened.data(), narrowed.data(), widened.size());

  const unsigned saved = _mm_getcsr();
  _mm_setcsr(saved | 0x8040u);  // FTZ | DAZ
  f16_to_f32(all.data(), widened_ftz.data(), all.size());
  f32_to_f16(widened.data(), narrowed_ftz.data(), widened.size());
  volatile uint16_t smallest_subnormal = 0x0001;  // volatile: convert at run time, under these flags
  const float scalar_subnormal = f16_to_f32(static_cast<uint16_t>(smallest_subnormal));
  _mm_setcsr(saved);

  CHECK(std::memcmp(widened.data(), widened_ftz.data(), widened.size() * sizeof(float)) == 0);
  CHECK(narrowed == narrowed_ftz);
  CHECK(scalar_subnormal == 0x1p-24f);
}
#endif
