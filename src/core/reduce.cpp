// Reduce kernels. One hot loop per (dtype, op), chosen once per call; each
// loop is a plain element-wise expression the compiler vectorizes at -O3.
//
// Cost: one pass, reading 2 and writing 1 element per index, so large
// buffers run at memory bandwidth. f16 and bf16 are widened to f32, combined,
// and narrowed once per element (see the formats below).
#include "core/reduce.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "core/half.h"

// out may alias an input exactly, never partially, so iteration i only ever
// touches index i: there is no loop-carried dependence. Saying so lets the
// compiler vectorize without a runtime overlap check, which would otherwise
// send the in-place case (out == local, the ring engine's usual call) down
// the scalar path.
#if defined(__clang__)
#define FERRY_ELEMENTWISE_LOOP _Pragma("clang loop vectorize(assume_safety)")
#elif defined(__GNUC__)
#define FERRY_ELEMENTWISE_LOOP _Pragma("GCC ivdep")
#else
#define FERRY_ELEMENTWISE_LOOP
#endif

namespace ferry {
namespace {

// Integers wrap: compute in an unsigned type no narrower than unsigned int,
// so that integer promotion never turns u16 * u16 into a signed overflow.
template <class T>
using WrapType = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;

struct SumOp {
  template <class T>
  static T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      return static_cast<T>(static_cast<WrapType<T>>(a) + static_cast<WrapType<T>>(b));
    } else {
      return a + b;
    }
  }
};

struct ProdOp {
  template <class T>
  static T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      return static_cast<T>(static_cast<WrapType<T>>(a) * static_cast<WrapType<T>>(b));
    } else {
      return a * b;
    }
  }
};

// Floats: NaN wins, and -0 counts as less than +0. That makes min and max
// total orders, so the result does not depend on which peer's value comes
// first. Equal floats differ at most in the sign of a zero, so OR-ing their
// bits picks -0 (min) and AND-ing picks +0 (max); written as selects and bit
// operations rather than std::signbit so that f64 vectorizes too.
template <class T>
using FloatBits = std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>;

struct MinOp {
  template <class T>
  static T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      return b < a ? b : a;
    } else {
      using Bits = FloatBits<T>;
      const T ordered = a < b ? a : b;  // b when b is NaN
      const T tie = std::bit_cast<T>(static_cast<Bits>(std::bit_cast<Bits>(a) | std::bit_cast<Bits>(b)));
      const T smaller = a == b ? tie : ordered;
      return std::isnan(a) ? a : smaller;
    }
  }
};

struct MaxOp {
  template <class T>
  static T apply(T a, T b) {
    if constexpr (std::is_integral_v<T>) {
      return a < b ? b : a;
    } else {
      using Bits = FloatBits<T>;
      const T ordered = a > b ? a : b;  // b when b is NaN
      const T tie = std::bit_cast<T>(static_cast<Bits>(std::bit_cast<Bits>(a) & std::bit_cast<Bits>(b)));
      const T larger = a == b ? tie : ordered;
      return std::isnan(a) ? a : larger;
    }
  }
};

// How a dtype's elements are read into the arithmetic type and written back.
// bf16 converts with a few integer operations that vectorize inline, so its
// loop fuses load, op and store; f16 is handled in blocks instead (below).
template <class T>
struct NativeFormat {
  using Stored = T;
  static T load(T x) { return x; }
  static T store(T x) { return x; }
};

struct BF16Format {
  using Stored = uint16_t;
  static float load(uint16_t b) { return bf16_to_f32(b); }
  static uint16_t store(float f) { return f32_to_bf16(f); }
};

template <class Op, class Format, class Stored = typename Format::Stored>
void combine(Stored* out, const Stored* incoming, const Stored* local, size_t count) {
  FERRY_ELEMENTWISE_LOOP
  for (size_t i = 0; i < count; ++i) {
    out[i] = Format::store(Op::apply(Format::load(incoming[i]), Format::load(local[i])));
  }
}

template <class Format, class Stored = typename Format::Stored>
void divide(Stored* data, size_t count, uint32_t world) {
  using T = decltype(Format::load(Stored{}));
  if constexpr (std::is_integral_v<T> && sizeof(T) <= 4) {
    // Exact, and vectorizable where integer division is not: the quotient of
    // a 32-bit integer by world, rounded to double, is off by at most
    // 2^-53 * 2^31 / world < 1 / world, while a non-integer quotient lies at
    // least 1 / world away from every integer, so truncation cannot cross one.
    const double divisor = world;
    FERRY_ELEMENTWISE_LOOP
    for (size_t i = 0; i < count; ++i) data[i] = static_cast<T>(static_cast<double>(data[i]) / divisor);
  } else if constexpr (std::is_integral_v<T>) {
    // 64-bit: integer division truncates toward zero; world > 0 rules out INT64_MIN / -1.
    const T divisor = static_cast<T>(world);
    for (size_t i = 0; i < count; ++i) data[i] = data[i] / divisor;
  } else {
    // IEEE division by world, which is exact as a divisor up to 2^24 (f32) and
    // 2^53 (f64): far beyond any real world size.
    const T divisor = static_cast<T>(world);
    FERRY_ELEMENTWISE_LOOP
    for (size_t i = 0; i < count; ++i) data[i] = Format::store(Format::load(data[i]) / divisor);
  }
}

// f16 goes through an L1-resident f32 block: the bulk conversions use F16C,
// which the compiler would not find in the scalar bit manipulation, and the
// f32 loop in between vectorizes as usual. 2 x 2 KiB of f32 per block.
constexpr size_t kF16Block = 512;

template <class Op>
void combine_f16(uint16_t* out, const uint16_t* incoming, const uint16_t* local, size_t count) {
  float a[kF16Block];
  float b[kF16Block];
  for (size_t begin = 0; begin < count; begin += kF16Block) {
    const size_t n = std::min(kF16Block, count - begin);
    f16_to_f32(incoming + begin, a, n);
    f16_to_f32(local + begin, b, n);
    combine<Op, NativeFormat<float>>(a, a, b, n);
    f32_to_f16(a, out + begin, n);
  }
}

void divide_f16(uint16_t* data, size_t count, uint32_t world) {
  float block[kF16Block];
  for (size_t begin = 0; begin < count; begin += kF16Block) {
    const size_t n = std::min(kF16Block, count - begin);
    f16_to_f32(data + begin, block, n);
    divide<NativeFormat<float>>(block, n, world);
    f32_to_f16(block, data + begin, n);
  }
}

using Kernel = void (*)(void* out, const void* incoming, const void* local, size_t count);

template <class Op, class Format>
void typed_kernel(void* out, const void* incoming, const void* local, size_t count) {
  using Stored = typename Format::Stored;
  combine<Op, Format>(static_cast<Stored*>(out), static_cast<const Stored*>(incoming),
                      static_cast<const Stored*>(local), count);
}

template <class Op>
void f16_kernel(void* out, const void* incoming, const void* local, size_t count) {
  combine_f16<Op>(static_cast<uint16_t*>(out), static_cast<const uint16_t*>(incoming),
                  static_cast<const uint16_t*>(local), count);
}

void check_dtype(DType dtype) {
  const auto raw = static_cast<uint32_t>(dtype);
  if (!dtype_valid(raw)) throw std::invalid_argument("reduce: invalid dtype " + std::to_string(raw));
}

template <class Op>
Kernel kernel_for(DType dtype) {
  switch (dtype) {
    case DType::u8: return typed_kernel<Op, NativeFormat<uint8_t>>;
    case DType::i8: return typed_kernel<Op, NativeFormat<int8_t>>;
    case DType::u16: return typed_kernel<Op, NativeFormat<uint16_t>>;
    case DType::i16: return typed_kernel<Op, NativeFormat<int16_t>>;
    case DType::u32: return typed_kernel<Op, NativeFormat<uint32_t>>;
    case DType::i32: return typed_kernel<Op, NativeFormat<int32_t>>;
    case DType::u64: return typed_kernel<Op, NativeFormat<uint64_t>>;
    case DType::i64: return typed_kernel<Op, NativeFormat<int64_t>>;
    case DType::f16: return f16_kernel<Op>;
    case DType::bf16: return typed_kernel<Op, BF16Format>;
    case DType::f32: return typed_kernel<Op, NativeFormat<float>>;
    case DType::f64: return typed_kernel<Op, NativeFormat<double>>;
  }
  check_dtype(dtype);
  return nullptr;  // unreachable: check_dtype threw
}

Kernel select_kernel(DType dtype, ReduceOp op) {
  check_dtype(dtype);
  switch (op) {
    case ReduceOp::sum:
    case ReduceOp::avg: return kernel_for<SumOp>(dtype);
    case ReduceOp::prod: return kernel_for<ProdOp>(dtype);
    case ReduceOp::min: return kernel_for<MinOp>(dtype);
    case ReduceOp::max: return kernel_for<MaxOp>(dtype);
  }
  throw std::invalid_argument("reduce: invalid op " + std::to_string(static_cast<uint32_t>(op)));
}

}  // namespace

void reduce(DType dtype, ReduceOp op, void* out, const void* incoming, const void* local, size_t count) {
  select_kernel(dtype, op)(out, incoming, local, count);
}

void finalize_avg(DType dtype, void* data, size_t count, uint32_t world) {
  check_dtype(dtype);
  if (world == 0) throw std::invalid_argument("finalize_avg: world must be at least 1");
  if (world == 1) return;
  switch (dtype) {
    case DType::u8: return divide<NativeFormat<uint8_t>>(static_cast<uint8_t*>(data), count, world);
    case DType::i8: return divide<NativeFormat<int8_t>>(static_cast<int8_t*>(data), count, world);
    case DType::u16: return divide<NativeFormat<uint16_t>>(static_cast<uint16_t*>(data), count, world);
    case DType::i16: return divide<NativeFormat<int16_t>>(static_cast<int16_t*>(data), count, world);
    case DType::u32: return divide<NativeFormat<uint32_t>>(static_cast<uint32_t*>(data), count, world);
    case DType::i32: return divide<NativeFormat<int32_t>>(static_cast<int32_t*>(data), count, world);
    case DType::u64: return divide<NativeFormat<uint64_t>>(static_cast<uint64_t*>(data), count, world);
    case DType::i64: return divide<NativeFormat<int64_t>>(static_cast<int64_t*>(data), count, world);
    case DType::f16: return divide_f16(static_cast<uint16_t*>(data), count, world);
    case DType::bf16: return divide<BF16Format>(static_cast<uint16_t*>(data), count, world);
    case DType::f32: return divide<NativeFormat<float>>(static_cast<float*>(data), count, world);
    case DType::f64: return divide<NativeFormat<double>>(static_cast<double*>(data), count, world);
  }
}

}  // namespace ferry
