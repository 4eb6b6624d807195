// Integer-domain quantization (int_quant.h): the scale rule, the rounding
// and the checked integer sums; the tight bit packing is int_pack.cpp's.
//
// Cost model (per element of f32 input, i8h): absmax reads 4 bytes; encode
// reads 4 and writes w(1)/8 = 1; a hop's encode-add reads 4 + w(k)/8 and
// writes w(k+1)/8; add reads two partials and writes one; decode reads w/8
// and writes 4. Everything goes through an L1 tile of kTile int32 values;
// the packers work on groups of 8 values (= w bytes) with w a compile-time
// constant, so their shifts are constants.
#include "core/int_quant.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "core/float_bits.h"
#include "core/float_environment.h"

namespace ferry {
namespace {

// A multiple of 8, so each tile starts on a byte of the packed stream.
constexpr size_t kTile = 1024;

template <class T>
using Bits = FloatBits<T>;

template <class T>
constexpr Bits<T> kInfBits = sizeof(T) == 4 ? Bits<T>(0x7f800000u) : Bits<T>(0x7ff0000000000000u);

void check_spec(IntQuantSpec spec) {
  if (spec.kind != IntQuantKind::i8h && spec.kind != IntQuantKind::i4h) {
    throw std::invalid_argument("int quant: invalid kind " + std::to_string(static_cast<unsigned>(spec.kind)));
  }
  if (spec.rounding != IntRounding::nearest && spec.rounding != IntRounding::stochastic) {
    throw std::invalid_argument("int quant: invalid rounding " + std::to_string(static_cast<unsigned>(spec.rounding)));
  }
  if (spec.block < 1 || spec.block > kMaxQuantBlock) {
    throw std::invalid_argument("int quant: block " + std::to_string(spec.block) + " is outside 1.." +
                                std::to_string(kMaxQuantBlock));
  }
}

void check_contributors(uint64_t contributors) {
  if (contributors >= 1 && contributors <= kMaxIntQuantGroup) return;
  throw std::invalid_argument("int quant: a sum of " + std::to_string(contributors) + " contributions is outside 1.." +
                              std::to_string(kMaxIntQuantGroup) +
                              " (the largest group whose sums fit the packed width without wrapping)");
}

Status check_length(const char* what, size_t bytes, size_t expected, size_t count, uint32_t contributors) {
  if (bytes == expected) return Status::success();
  return Status::failure(Errc::protocol, std::string("int quant: ") + what + " has " + std::to_string(bytes) +
                                             " bytes for " + std::to_string(count) + " values of " +
                                             std::to_string(contributors) + " contributions, expected " +
                                             std::to_string(expected));
}


// ---- the scale rule and the rounding (int_quant.h, Design)

template <class T>
struct BlockScale {
  enum Kind { zero, nonfinite, normal, subnormal } kind;
  T scale;    // s = A / L
  T inverse;  // L / A, for kind normal
};

template <class T>
BlockScale<T> block_scale(T absmax, int32_t levels) {
  const Bits<T> bits = std::bit_cast<Bits<T>>(absmax);
  if (bits >= kInfBits<T>) return {BlockScale<T>::nonfinite, T(0), T(0)};  // +inf, NaN, or a sign bit
  if (bits == 0) return {BlockScale<T>::zero, T(0), T(0)};
  const T L = static_cast<T>(levels);
  const T s = absmax / L;
  if (s >= std::numeric_limits<T>::min()) return {BlockScale<T>::normal, s, L / absmax};
  return {BlockScale<T>::subnormal, s, T(0)};
}

// splitmix64's finalizer over a Weyl sequence: a counter-based generator, so
// element i's number needs nothing but (key, i). Inline here so that the
// stochastic loop vectorizes (64-bit multiplies: AVX-512DQ).
inline uint64_t splitmix(uint64_t key, uint64_t index) {
  uint64_t z = key + 0x9e3779b97f4a7c15u * (index + 1);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9u;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebu;
  return z ^ (z >> 31);
}

// The random fraction's bits: 24 for float, 53 for double (exact in T).
template <class T>
constexpr int kRandomBits = std::numeric_limits<T>::digits;

// Codes of n elements of one block; t = x * (L / A) or x / s, clamped (NaN
// from an inconsistent caller goes to -L: defined, never undefined behaviour).
template <class T>
void encode_run(const BlockScale<T>& bs, int32_t levels, IntRounding rounding, uint64_t stream, const T* x, size_t n,
                uint64_t index, int32_t* q) {
  if (bs.kind == BlockScale<T>::zero || bs.kind == BlockScale<T>::nonfinite) {
    std::fill(q, q + n, 0);
    return;
  }
  const T L = static_cast<T>(levels);
  const bool multiply = bs.kind == BlockScale<T>::normal;
  const T inverse = bs.inverse;
  const T scale = bs.scale;
  const auto scaled = [=](T v) {
    T t = multiply ? v * inverse : v / scale;
    t = t >= -L ? t : -L;
    return t <= L ? t : L;
  };
  if (rounding == IntRounding::nearest) {
    for (size_t i = 0; i < n; ++i) q[i] = static_cast<int32_t>(std::nearbyint(scaled(x[i])));
    return;
  }
  // Two passes over L1-sized pieces, so that each loop has one element width
  // and vectorizes: the random numbers (64-bit integer work), then the floats.
  using Random = std::conditional_t<sizeof(T) == 4, int32_t, int64_t>;  // u < 2^24 / 2^53: exact in T
  constexpr T kUnit = static_cast<T>(uint64_t{1} << kRandomBits<T>);
  constexpr size_t kPiece = 256;
  Random u[kPiece];
  for (size_t begin = 0; begin < n; begin += kPiece) {
    const size_t m = std::min(kPiece, n - begin);
    for (size_t i = 0; i < m; ++i) {
      u[i] = static_cast<Random>(splitmix(stream, index + begin + i) >> (64 - kRandomBits<T>));
    }
    for (size_t i = 0; i < m; ++i) {
      // r = t - round(t) in [-1/2, 1/2] is exact; go one step toward t with probability |r|.
      const T t = scaled(x[begin + i]);
      const T nearest = std::nearbyint(t);
      const T r = (t - nearest) * kUnit;  // times a power of two: exact
      const T random = static_cast<T>(u[i]);
      const T up = random < r ? T(1) : T(0);
      const T down = random < -r ? T(1) : T(0);
      q[begin + i] = static_cast<int32_t>(nearest + up - down);  // exact: small integers
    }
  }
}

// Codes of x[0..n), global indices first_index.., block by block.
template <class T>
void encode_tile(IntQuantSpec spec, uint64_t stream, int32_t levels, const T* absmax, uint64_t first_index, const T* x,
                 size_t n, int32_t* q) {
  size_t i = 0;
  while (i < n) {
    const uint64_t index = first_index + i;
    const uint64_t block = index / spec.block;
    const size_t run = std::min<uint64_t>(n - i, (block + 1) * spec.block - index);
    encode_run(block_scale(absmax[block], levels), levels, spec.rounding, stream, x + i, run, index, q + i);
    i += run;
  }
}

// The key of a contributor's random stream (int_quant.h, Design).
uint64_t stream_key(IntQuantSpec spec, uint64_t contributor) {
  return splitmix(spec.seed, contributor);
}

Status check_range(const int32_t* v, size_t n, int32_t limit, const char* what, size_t first) {
  int32_t worst = 0;
  // Widths are at most 24 bits, so -v cannot overflow.
  for (size_t i = 0; i < n; ++i) worst = std::max(worst, v[i] < 0 ? -v[i] : v[i]);
  if (worst <= limit) return Status::success();
  for (size_t i = 0; i < n; ++i) {
    if (v[i] < -limit || v[i] > limit) {
      return Status::failure(Errc::protocol, std::string("int quant: ") + what + " value " + std::to_string(v[i]) +
                                                 " at element " + std::to_string(first + i) + " is outside +-" +
                                                 std::to_string(limit));
    }
  }
  return Status::success();
}

// Unpacks n values of width w and checks them against +-limit: what every
// function that reads a peer's partial does before it trusts it.
Status unpack_checked(const uint8_t* in, uint32_t w, size_t n, int32_t limit, const char* what, size_t first,
                      int32_t* values) {
  int_quant_detail::unpack(in, n, w, values);
  return check_range(values, n, limit, what, first);
}

// ---- drivers, out of line so that the environment guard stays around them

template <class T>
[[gnu::noinline]] void encode_chunk(IntQuantSpec spec, uint64_t stream, const T* absmax, size_t first_index, const T* x,
                                    size_t count, uint8_t* out) {
  const int32_t L = int_quant_levels(spec.kind);
  const uint32_t w = int_quant_width(spec, 1);
  int32_t q[kTile];
  for (size_t begin = 0; begin < count; begin += kTile) {
    const size_t n = std::min(kTile, count - begin);
    encode_tile(spec, stream, L, absmax, first_index + begin, x + begin, n, q);
    int_quant_detail::pack(q, n, w, out + begin * w / 8);
  }
}

template <class T>
[[gnu::noinline]] Status encode_add_chunk(IntQuantSpec spec, uint64_t stream, const T* absmax, size_t first_index,
                                          const T* x, size_t count, const uint8_t* in, uint32_t k_in, uint8_t* out) {
  const int32_t L = int_quant_levels(spec.kind);
  const uint32_t w_in = int_quant_width(spec, k_in);
  const uint32_t w_out = int_quant_width(spec, k_in + 1);
  const auto limit = static_cast<int32_t>(k_in) * L;
  int32_t q[kTile];
  int32_t partial[kTile];
  for (size_t begin = 0; begin < count; begin += kTile) {
    const size_t n = std::min(kTile, count - begin);
    Status status = unpack_checked(in + begin * w_in / 8, w_in, n, limit, "incoming partial", begin, partial);
    if (!status.ok()) return status;
    encode_tile(spec, stream, L, absmax, first_index + begin, x + begin, n, q);
    for (size_t i = 0; i < n; ++i) partial[i] += q[i];
    int_quant_detail::pack(partial, n, w_out, out + begin * w_out / 8);
  }
  return Status::success();
}

template <class T>
[[gnu::noinline]] Status decode_chunk(IntQuantSpec spec, const T* absmax, size_t first_index, const uint8_t* in,
                                      uint32_t contributors, ReduceOp op, size_t count, T* out) {
  const int32_t L = int_quant_levels(spec.kind);
  const uint32_t w = int_quant_width(spec, contributors);
  const auto limit = static_cast<int32_t>(contributors) * L;
  const T divisor = static_cast<T>(contributors);
  int32_t s[kTile];
  for (size_t begin = 0; begin < count; begin += kTile) {
    const size_t n = std::min(kTile, count - begin);
    Status status = unpack_checked(in + begin * w / 8, w, n, limit, "sum", begin, s);
    if (!status.ok()) return status;
    size_t i = 0;
    while (i < n) {
      const uint64_t index = first_index + begin + i;
      const uint64_t block = index / spec.block;
      const size_t run = std::min<uint64_t>(n - i, (block + 1) * spec.block - index);
      const BlockScale<T> bs = block_scale(absmax[block], L);
      T* y = out + begin + i;
      if (bs.kind == BlockScale<T>::nonfinite) {
        std::fill(y, y + run, quiet_nan<T>());
      } else if (bs.kind == BlockScale<T>::zero) {
        std::fill(y, y + run, T(0));
      } else if (op == ReduceOp::sum) {
        for (size_t j = 0; j < run; ++j) y[j] = static_cast<T>(s[i + j]) * bs.scale;
      } else {
        for (size_t j = 0; j < run; ++j) y[j] = (static_cast<T>(s[i + j]) * bs.scale) / divisor;
      }
      i += run;
    }
  }
  return Status::success();
}

}  // namespace

IntQuantSpec int_quant_spec(QuantSpec spec, uint64_t seed) {
  IntQuantSpec out;
  switch (spec.kind) {
    case Quant::i8h: out.kind = IntQuantKind::i8h; break;
    case Quant::i4h: out.kind = IntQuantKind::i4h; break;
    case Quant::i8h_sr: out = {IntQuantKind::i8h, 0, IntRounding::stochastic, seed}; break;
    case Quant::i4h_sr: out = {IntQuantKind::i4h, 0, IntRounding::stochastic, seed}; break;
    default: throw std::invalid_argument("int quant: kind " + std::to_string(static_cast<unsigned>(spec.kind)) +
                                         " is not an integer-domain mode");
  }
  out.block = spec.block;
  check_spec(out);
  return out;
}

uint32_t int_quant_bits(IntQuantKind kind) { return kind == IntQuantKind::i4h ? 4 : 8; }

int32_t int_quant_levels(IntQuantKind kind) { return (int32_t{1} << (int_quant_bits(kind) - 1)) - 1; }

uint32_t int_quant_width(IntQuantSpec spec, uint32_t contributors) {
  check_spec(spec);
  check_contributors(contributors);
  return int_quant_bits(spec.kind) + static_cast<uint32_t>(std::bit_width(contributors - 1));  // + ceil(log2 k)
}

size_t int_quant_packed_bytes(IntQuantSpec spec, size_t count, uint32_t contributors) {
  const uint32_t w = int_quant_width(spec, contributors);
  if (count > std::numeric_limits<size_t>::max() / 32) {
    throw std::invalid_argument("int quant: count " + std::to_string(count) + " is too large");
  }
  return (count * w + 7) / 8;
}

size_t int_quant_block_count(IntQuantSpec spec, size_t count) {
  check_spec(spec);
  return count / spec.block + (count % spec.block == 0 ? 0 : 1);
}

template <class T>
void int_quant_absmax(IntQuantSpec spec, const T* x, size_t count, size_t first_index, T* absmax) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>);
  check_spec(spec);
  constexpr Bits<T> kMagnitude = std::numeric_limits<Bits<T>>::max() >> 1;
  size_t i = 0;
  while (i < count) {
    const uint64_t index = first_index + i;
    const uint64_t block = index / spec.block;
    const size_t run = std::min<uint64_t>(count - i, (block + 1) * spec.block - index);
    // On magnitude bits, unsigned order is float order, and NaN sorts above
    // +inf: one integer max finds both the maximum and any non-finite value.
    Bits<T> m = std::bit_cast<Bits<T>>(absmax[block]) & kMagnitude;
    for (size_t j = 0; j < run; ++j) m = std::max<Bits<T>>(m, std::bit_cast<Bits<T>>(x[i + j]) & kMagnitude);
    absmax[block] = std::bit_cast<T>(m >= kInfBits<T> ? kInfBits<T> : m);
    i += run;
  }
}

template <class T>
void int_quant_merge_absmax(T* acc, const T* in, size_t count) {
  for (size_t i = 0; i < count; ++i) {
    acc[i] = std::bit_cast<T>(std::max(std::bit_cast<Bits<T>>(acc[i]), std::bit_cast<Bits<T>>(in[i])));
  }
}

template <class T>
void int_quant_encode(IntQuantSpec spec, uint64_t contributor, const T* absmax, size_t first_index, const T* x,
                      size_t count, uint8_t* out) {
  check_spec(spec);
  const DefaultFloatEnvironment environment;
  encode_chunk(spec, stream_key(spec, contributor), absmax, first_index, x, count, out);
}

Status int_quant_add(IntQuantSpec spec, const uint8_t* a, size_t a_bytes, uint32_t ka, const uint8_t* b, size_t b_bytes,
                     uint32_t kb, size_t count, uint8_t* out) {
  check_contributors(ka);
  check_contributors(kb);
  check_contributors(uint64_t{ka} + kb);
  Status status = check_length("partial a", a_bytes, int_quant_packed_bytes(spec, count, ka), count, ka);
  if (status.ok()) status = check_length("partial b", b_bytes, int_quant_packed_bytes(spec, count, kb), count, kb);
  if (!status.ok()) return status;
  const int32_t L = int_quant_levels(spec.kind);
  const uint32_t wa = int_quant_width(spec, ka), wb = int_quant_width(spec, kb), wo = int_quant_width(spec, ka + kb);
  int32_t va[kTile];
  int32_t vb[kTile];
  for (size_t begin = 0; begin < count; begin += kTile) {
    const size_t n = std::min(kTile, count - begin);
    status = unpack_checked(a + begin * wa / 8, wa, n, static_cast<int32_t>(ka) * L, "partial a", begin, va);
    if (status.ok()) {
      status = unpack_checked(b + begin * wb / 8, wb, n, static_cast<int32_t>(kb) * L, "partial b", begin, vb);
    }
    if (!status.ok()) return status;
    for (size_t i = 0; i < n; ++i) va[i] += vb[i];
    int_quant_detail::pack(va, n, wo, out + begin * wo / 8);
  }
  return Status::success();
}

template <class T>
Status int_quant_encode_add(IntQuantSpec spec, uint64_t contributor, const T* absmax, size_t first_index, const T* x,
                            size_t count, const uint8_t* in, size_t in_bytes, uint32_t k_in, uint8_t* out) {
  check_contributors(k_in);
  check_contributors(uint64_t{k_in} + 1);
  Status status = check_length("incoming partial", in_bytes, int_quant_packed_bytes(spec, count, k_in), count, k_in);
  if (!status.ok()) return status;
  const DefaultFloatEnvironment environment;
  return encode_add_chunk(spec, stream_key(spec, contributor), absmax, first_index, x, count, in, k_in, out);
}

template <class T>
Status int_quant_decode(IntQuantSpec spec, const T* absmax, size_t first_index, const uint8_t* in, size_t in_bytes,
                        uint32_t contributors, ReduceOp op, size_t count, T* out) {
  if (op != ReduceOp::sum && op != ReduceOp::avg) {
    throw std::invalid_argument("int quant: op " + std::string(reduce_op_name(op)) + " (only sum and avg)");
  }
  Status status = check_length("sum", in_bytes, int_quant_packed_bytes(spec, count, contributors), count, contributors);
  if (!status.ok()) return status;
  const DefaultFloatEnvironment environment;
  return decode_chunk(spec, absmax, first_index, in, contributors, op, count, out);
}

namespace int_quant_detail {


uint64_t random_bits(uint64_t key, uint64_t index) { return splitmix(key, index); }

}  // namespace int_quant_detail

template void int_quant_absmax<float>(IntQuantSpec, const float*, size_t, size_t, float*);
template void int_quant_absmax<double>(IntQuantSpec, const double*, size_t, size_t, double*);
template void int_quant_merge_absmax<float>(float*, const float*, size_t);
template void int_quant_merge_absmax<double>(double*, const double*, size_t);
template void int_quant_encode<float>(IntQuantSpec, uint64_t, const float*, size_t, const float*, size_t, uint8_t*);
template void int_quant_encode<double>(IntQuantSpec, uint64_t, const double*, size_t, const double*, size_t, uint8_t*);
template Status int_quant_encode_add<float>(IntQuantSpec, uint64_t, const float*, size_t, const float*, size_t,
                                            const uint8_t*, size_t, uint32_t, uint8_t*);
template Status int_quant_encode_add<double>(IntQuantSpec, uint64_t, const double*, size_t, const double*, size_t,
                                             const uint8_t*, size_t, uint32_t, uint8_t*);
template Status int_quant_decode<float>(IntQuantSpec, const float*, size_t, const uint8_t*, size_t, uint32_t, ReduceOp,
                                        size_t, float*);
template Status int_quant_decode<double>(IntQuantSpec, const double*, size_t, const uint8_t*, size_t, uint32_t,
                                         ReduceOp, size_t, double*);

}  // namespace ferry
