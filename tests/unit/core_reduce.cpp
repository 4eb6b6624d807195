// reduce() and finalize_avg() against a scalar reference written here, over
// every dtype x op x aliasing x count with one templated body. Counts cover
// the empty case, vector tails and the f16/bf16 block boundaries.
#include <catch2/catch.hpp>

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include "core/half.h"
#include "core/reduce.h"

using namespace ferry;

namespace {

// How the reference reads and writes an element: unchanged for integers,
// f32 and f64; through f32 for f16 and bf16.
template <class T>
struct PlainFormat {
  static T widen(T x) { return x; }
  static T narrow(T x) { return x; }
};
struct F16Format {
  static float widen(uint16_t h) { return f16_to_f32(h); }
  static uint16_t narrow(float f) { return f32_to_f16(f); }
};
struct BF16Format {
  static float widen(uint16_t b) { return bf16_to_f32(b); }
  static uint16_t narrow(float f) { return f32_to_bf16(f); }
};

template <DType D, class Storage_, class Format_ = PlainFormat<Storage_>>
struct DTypeCase {
  static constexpr DType dtype = D;
  using Storage = Storage_;
  using Format = Format_;
  using Compute = decltype(Format::widen(Storage{}));
  static constexpr bool is_float = std::is_floating_point_v<Compute>;
};

using U8 = DTypeCase<DType::u8, uint8_t>;
using I8 = DTypeCase<DType::i8, int8_t>;
using U16 = DTypeCase<DType::u16, uint16_t>;
using I16 = DTypeCase<DType::i16, int16_t>;
using U32 = DTypeCase<DType::u32, uint32_t>;
using I32 = DTypeCase<DType::i32, int32_t>;
using U64 = DTypeCase<DType::u64, uint64_t>;
using I64 = DTypeCase<DType::i64, int64_t>;
using F16 = DTypeCase<DType::f16, uint16_t, F16Format>;
using BF16 = DTypeCase<DType::bf16, uint16_t, BF16Format>;
using F32 = DTypeCase<DType::f32, float>;
using F64 = DTypeCase<DType::f64, double>;

// The contract, one element at a time, as plainly as it can be said.
template <class Case>
typename Case::Storage reference(ReduceOp op, typename Case::Storage a, typename Case::Storage b) {
  using T = typename Case::Storage;
  if constexpr (!Case::is_float) {
    // Integers wrap modulo 2^bits; converting a uint64_t back to T keeps the low bits.
    switch (op) {
      case ReduceOp::sum:
      case ReduceOp::avg: return static_cast<T>(static_cast<uint64_t>(a) + static_cast<uint64_t>(b));
      case ReduceOp::prod: return static_cast<T>(static_cast<uint64_t>(a) * static_cast<uint64_t>(b));
      case ReduceOp::min: return std::min(a, b);
      case ReduceOp::max: return std::max(a, b);
    }
  } else {
    using F = typename Case::Format;
    const auto x = F::widen(a);
    const auto y = F::widen(b);
    switch (op) {
      case ReduceOp::sum:
      case ReduceOp::avg: return F::narrow(x + y);
      case ReduceOp::prod: return F::narrow(x * y);
      case ReduceOp::min:
        if (std::isnan(x)) return F::narrow(x);
        if (std::isnan(y)) return F::narrow(y);
        if (x == y) return F::narrow(std::signbit(x) ? x : y);  // -0 below +0
        return F::narrow(x < y ? x : y);
      case ReduceOp::max:
        if (std::isnan(x)) return F::narrow(x);
        if (std::isnan(y)) return F::narrow(y);
        if (x == y) return F::narrow(std::signbit(x) ? y : x);
        return F::narrow(x > y ? x : y);
    }
  }
  throw std::logic_error("unreachable");
}

// Bit-equal, except that any NaN matches any NaN: which NaN payload an
// add or multiply of two NaNs keeps depends on the operand order the
// compiler chose.
template <class Case>
bool same_result(typename Case::Storage expected, typename Case::Storage actual) {
  if constexpr (Case::is_float) {
    using F = typename Case::Format;
    if (std::isnan(F::widen(expected))) return std::isnan(F::widen(actual));
  }
  return std::memcmp(&expected, &actual, sizeof(expected)) == 0;
}

template <class Case>
std::vector<typename Case::Storage> special_values() {
  using T = typename Case::Storage;
  if constexpr (!Case::is_float) {
    const T lowest = std::numeric_limits<T>::min();
    const T highest = std::numeric_limits<T>::max();
    return {0, 1, static_cast<T>(-1), 2, lowest, highest, static_cast<T>(lowest + 1), static_cast<T>(highest - 1),
            static_cast<T>(highest / 2 + 1)};
  } else {
    using F = typename Case::Format;
    using C = typename Case::Compute;
    const C inf = std::numeric_limits<C>::infinity();
    const C nan = std::numeric_limits<C>::quiet_NaN();
    std::vector<T> values;
    for (const C v : {C(0), -C(0), C(1), C(-1), C(2.5), inf, -inf, nan, -nan, C(1e-30), C(-3e38), C(6e4),
                      std::numeric_limits<C>::denorm_min(), std::numeric_limits<C>::max()}) {
      values.push_back(F::narrow(v));
    }
    if constexpr (std::is_same_v<T, uint16_t>) {  // 16-bit formats' own extremes and a signalling NaN
      for (const int raw : {0x0001, 0x8001, 0x7bff, 0x7f7f, 0x7c01, 0x7f81, 0x03ff}) {
        values.push_back(static_cast<uint16_t>(raw));
      }
    }
    return values;
  }
}

template <class Case>
typename Case::Storage random_value(std::mt19937_64& random) {
  using T = typename Case::Storage;
  const uint64_t raw = random();
  if constexpr (!Case::is_float) {
    return static_cast<T>(raw);  // every bit pattern is a valid integer
  } else {
    // Mostly ordinary values (where the arithmetic is interesting), some
    // arbitrary bit patterns (NaNs, infinities, subnormals, overflow).
    if (raw % 8 == 0) {
      T bits_as_value;
      std::memcpy(&bits_as_value, &raw, sizeof(T));
      return bits_as_value;
    }
    using C = typename Case::Compute;
    const double unit = static_cast<double>(raw >> 11) * 0x1p-53;  // [0, 1)
    return Case::Format::narrow(static_cast<C>((unit - 0.5) * 2000.0));
  }
}

// Inputs whose first k*k elements hold every pair of special values (in both
// orders), the rest random.
template <class Case>
void fill_inputs(std::vector<typename Case::Storage>& incoming, std::vector<typename Case::Storage>& local,
                 uint64_t seed) {
  std::mt19937_64 random(seed);
  const auto specials = special_values<Case>();
  const size_t k = specials.size();
  for (size_t i = 0; i < incoming.size(); ++i) {
    if (i < k * k) {
      incoming[i] = specials[i / k];
      local[i] = specials[i % k];
    } else {
      incoming[i] = random_value<Case>(random);
      local[i] = random_value<Case>(random);
    }
  }
}

enum class Aliasing { none, out_is_incoming, out_is_local, all_three };

const char* aliasing_name(Aliasing a) {
  switch (a) {
    case Aliasing::none: return "out separate";
    case Aliasing::out_is_incoming: return "out == incoming";
    case Aliasing::out_is_local: return "out == local";
    case Aliasing::all_three: return "out == incoming == local";
  }
  return "?";
}

}  // namespace

TEMPLATE_TEST_CASE("reduce matches the scalar reference", "[core][reduce]", U8, I8, U16, I16, U32, I32, U64, I64,
                   F16, BF16, F32, F64) {
  using T = typename TestType::Storage;
  const ReduceOp op = GENERATE(ReduceOp::sum, ReduceOp::avg, ReduceOp::prod, ReduceOp::min, ReduceOp::max);
  const Aliasing aliasing =
      GENERATE(Aliasing::none, Aliasing::out_is_incoming, Aliasing::out_is_local, Aliasing::all_three);
  const size_t count = GENERATE(0, 1, 2, 3, 7, 8, 9, 15, 16, 17, 31, 33, 63, 64, 65, 127, 129, 255, 257, 511, 512,
                                513, 1023, 1025, 4099, 100'003);
  INFO(dtype_name(TestType::dtype) << " " << reduce_op_name(op) << " " << aliasing_name(aliasing) << " count "
                                   << count);

  // Odd counts start one element in, so both aligned and misaligned starts run.
  const size_t offset = count % 2;
  std::vector<T> incoming_storage(count + offset), local_storage(count + offset), out_storage(count + offset);
  std::vector<T> incoming(count), local(count);
  fill_inputs<TestType>(incoming, local, 1000 * count + static_cast<uint64_t>(op));
  if (aliasing == Aliasing::all_three) local = incoming;

  std::vector<T> expected(count);
  for (size_t i = 0; i < count; ++i) expected[i] = reference<TestType>(op, incoming[i], local[i]);

  T* in = incoming_storage.data() + offset;
  T* loc = local_storage.data() + offset;
  std::copy(incoming.begin(), incoming.end(), in);
  std::copy(local.begin(), local.end(), loc);
  T* out = out_storage.data() + offset;
  switch (aliasing) {
    case Aliasing::none: break;
    case Aliasing::out_is_incoming: out = in; break;
    case Aliasing::out_is_local: out = loc; break;
    case Aliasing::all_three: out = loc = in; break;
  }

  reduce(TestType::dtype, op, out, in, loc, count);

  size_t mismatches = 0;
  for (size_t i = 0; i < count; ++i) {
    if (!same_result<TestType>(expected[i], out[i]) && mismatches++ == 0) {
      INFO("first mismatch at " << i << ": incoming " << +incoming[i] << " local " << +local[i] << " expected "
                                << +expected[i] << " got " << +out[i]);
      CHECK(same_result<TestType>(expected[i], out[i]));
    }
  }
  CHECK(mismatches == 0);
  if (aliasing == Aliasing::none) {  // inputs are read-only
    CHECK(std::equal(incoming.begin(), incoming.end(), in, [](T a, T b) { return !std::memcmp(&a, &b, sizeof(T)); }));
    CHECK(std::equal(local.begin(), local.end(), loc, [](T a, T b) { return !std::memcmp(&a, &b, sizeof(T)); }));
  }
}

TEMPLATE_TEST_CASE("finalize_avg divides once, in the element type", "[core][reduce]", U8, I8, U16, I16, U32, I32,
                   U64, I64, F16, BF16, F32, F64) {
  using T = typename TestType::Storage;
  const uint32_t world = GENERATE(1u, 2u, 3u, 7u, 64u, 1000u, 65537u, 0xffffffffu);
  const size_t count = GENERATE(0, 1, 17, 513, 4099);
  INFO(dtype_name(TestType::dtype) << " world " << world << " count " << count);

  std::vector<T> data(count), unused(count);
  fill_inputs<TestType>(data, unused, count + world);

  std::vector<T> expected(count);
  for (size_t i = 0; i < count; ++i) {
    const T x = data[i];
    if (world == 1) {
      expected[i] = x;  // untouched, bit for bit (NaN payloads too)
    } else if constexpr (TestType::is_float) {
      using F = typename TestType::Format;
      using C = typename TestType::Compute;
      expected[i] = F::narrow(F::widen(x) / static_cast<C>(world));
    } else if constexpr (std::is_signed_v<T>) {
      expected[i] = static_cast<T>(static_cast<int64_t>(x) / static_cast<int64_t>(world));  // toward zero
    } else {
      expected[i] = static_cast<T>(static_cast<uint64_t>(x) / world);
    }
  }

  finalize_avg(TestType::dtype, data.data(), count, world);

  size_t mismatches = 0;
  for (size_t i = 0; i < count; ++i) {
    const bool same = world == 1 ? std::memcmp(&expected[i], &data[i], sizeof(T)) == 0
                                 : same_result<TestType>(expected[i], data[i]);
    if (!same && mismatches++ == 0) {
      FAIL_CHECK("first mismatch at " << i << ": expected " << +expected[i] << " got " << +data[i]);
    }
  }
  CHECK(mismatches == 0);
}

TEST_CASE("integer reduce wraps and compares at the type limits", "[core][reduce]") {
  auto run = [](DType dtype, ReduceOp op, auto a, auto b) {
    decltype(a) out{};
    reduce(dtype, op, &out, &a, &b, 1);
    return out;
  };
  CHECK(run(DType::u8, ReduceOp::sum, uint8_t{250}, uint8_t{10}) == 4);
  CHECK(run(DType::i8, ReduceOp::sum, int8_t{127}, int8_t{1}) == -128);
  CHECK(run(DType::i8, ReduceOp::prod, int8_t{-128}, int8_t{-1}) == -128);
  CHECK(run(DType::u16, ReduceOp::prod, uint16_t{0xffff}, uint16_t{0xffff}) == 1);  // no signed-int promotion
  CHECK(run(DType::i32, ReduceOp::sum, std::numeric_limits<int32_t>::max(), int32_t{1}) ==
        std::numeric_limits<int32_t>::min());
  CHECK(run(DType::u64, ReduceOp::sum, ~uint64_t{0}, uint64_t{2}) == 1);
  CHECK(run(DType::i64, ReduceOp::min, std::numeric_limits<int64_t>::min(), int64_t{0}) ==
        std::numeric_limits<int64_t>::min());
  CHECK(run(DType::u32, ReduceOp::max, ~uint32_t{0}, uint32_t{0}) == ~uint32_t{0});
}

TEST_CASE("float min/max: NaN wins, -0 is below +0, in either order", "[core][reduce]") {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  auto run = [](ReduceOp op, float a, float b) {
    float out = 7;
    reduce(DType::f32, op, &out, &a, &b, 1);
    return out;
  };
  for (const ReduceOp op : {ReduceOp::min, ReduceOp::max}) {
    CHECK(std::isnan(run(op, nan, 1.0f)));
    CHECK(std::isnan(run(op, 1.0f, nan)));
    CHECK(std::isnan(run(op, -std::numeric_limits<float>::infinity(), nan)));
  }
  CHECK(std::signbit(run(ReduceOp::min, 0.0f, -0.0f)));
  CHECK(std::signbit(run(ReduceOp::min, -0.0f, 0.0f)));
  CHECK_FALSE(std::signbit(run(ReduceOp::max, 0.0f, -0.0f)));
  CHECK_FALSE(std::signbit(run(ReduceOp::max, -0.0f, 0.0f)));
  CHECK(std::signbit(run(ReduceOp::sum, -0.0f, -0.0f)));
  CHECK_FALSE(std::signbit(run(ReduceOp::sum, -0.0f, 0.0f)));

  // f16: same rules through f32.
  const uint16_t neg_zero = 0x8000, pos_zero = 0x0000, half_nan = 0x7e00, one = 0x3c00;
  auto run_f16 = [](ReduceOp op, uint16_t a, uint16_t b) {
    uint16_t out = 0;
    reduce(DType::f16, op, &out, &a, &b, 1);
    return out;
  };
  CHECK(run_f16(ReduceOp::min, pos_zero, neg_zero) == neg_zero);
  CHECK(run_f16(ReduceOp::max, neg_zero, pos_zero) == pos_zero);
  CHECK(run_f16(ReduceOp::max, one, half_nan) == half_nan);
}

TEST_CASE("f16/bf16 combine in f32 and round once", "[core][reduce]") {
  // 2048 + 1 is not an f16 (spacing 2 there): the f32 sum 2049 rounds to even, 2048.
  uint16_t a = f32_to_f16(2048.0f), b = f32_to_f16(1.0f), out = 0;
  reduce(DType::f16, ReduceOp::sum, &out, &a, &b, 1);
  CHECK(out == f32_to_f16(2048.0f));
  // 65504 + 65504 overflows f16 to inf.
  a = b = f32_to_f16(65504.0f);
  reduce(DType::f16, ReduceOp::sum, &out, &a, &b, 1);
  CHECK(out == 0x7c00);
  // bf16: 256 + 1 rounds to 256 (8 significant bits), 256 + 3 to 260.
  a = f32_to_bf16(256.0f);
  b = f32_to_bf16(3.0f);
  reduce(DType::bf16, ReduceOp::sum, &out, &a, &b, 1);
  CHECK(bf16_to_f32(out) == 260.0f);
}

TEST_CASE("finalize_avg truncates negative integer sums toward zero", "[core][reduce]") {
  std::vector<int32_t> i32 = {-7, 7, -1, 1, std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()};
  finalize_avg(DType::i32, i32.data(), i32.size(), 2);
  CHECK(i32 == std::vector<int32_t>{-3, 3, 0, 0, -1073741824, 1073741823});

  std::vector<int8_t> i8 = {-128, 127, -5};
  finalize_avg(DType::i8, i8.data(), i8.size(), 3);
  CHECK(i8 == std::vector<int8_t>{-42, 42, -1});

  std::vector<int64_t> i64 = {std::numeric_limits<int64_t>::min(), -9};
  finalize_avg(DType::i64, i64.data(), i64.size(), 4);
  CHECK(i64 == std::vector<int64_t>{std::numeric_limits<int64_t>::min() / 4, -2});

  std::vector<float> f32 = {1.0f, -3.0f};
  finalize_avg(DType::f32, f32.data(), f32.size(), 3);
  CHECK(f32 == std::vector<float>{1.0f / 3.0f, -1.0f});
}

TEST_CASE("reduce and finalize_avg reject invalid arguments", "[core][reduce]") {
  float a = 1, b = 2, out = 0;
  CHECK_THROWS_AS(reduce(static_cast<DType>(12), ReduceOp::sum, &out, &a, &b, 1), std::invalid_argument);
  CHECK_THROWS_AS(reduce(static_cast<DType>(255), ReduceOp::sum, &out, &a, &b, 1), std::invalid_argument);
  CHECK_THROWS_AS(reduce(DType::f32, static_cast<ReduceOp>(5), &out, &a, &b, 1), std::invalid_argument);
  CHECK_THROWS_AS(reduce(DType::f32, static_cast<ReduceOp>(200), &out, &a, &b, 0), std::invalid_argument);
  CHECK_THROWS_AS(finalize_avg(static_cast<DType>(12), &a, 1, 2), std::invalid_argument);
  CHECK_THROWS_AS(finalize_avg(static_cast<DType>(12), &a, 1, 1), std::invalid_argument);
  CHECK_THROWS_AS(finalize_avg(DType::f32, &a, 1, 0), std::invalid_argument);
  CHECK(out == 0);
  CHECK(a == 1);
}
