// Quantization codecs: names, lengths, the per-block wire format (quant.h)
// and the chunk drivers. The arithmetic on a block's elements lives in the
// kernels (quant_kernels_*.cpp); here are the decisions a block needs once:
// its header, its validation, its special cases.
//
// Cost model (per element of f32 input): encode reads 4 bytes and writes
// 1 (u8/i8), 0.5 (u4) or 2 (f16/bf16) plus metadata; the block is read twice
// (range, then codes), the second time from L1. Decode-add reads the wire
// bytes and 4 bytes of local, writes 4. Decode-add-encode reads the wire bytes
// and local and writes the wire bytes, with one block of scratch in L1.
#include "core/quant.h"

#include <algorithm>
#include <array>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>
#include <stdexcept>
#include <string>

#include "core/float_bits.h"
#include "core/float_environment.h"
#include "core/half.h"
#include "core/quant_kernels.h"

static_assert(std::endian::native == std::endian::little,
              "the quantized wire format is little-endian; add byte swaps for this target");

namespace ferry {
namespace {

constexpr std::array<std::string_view, kQuantCount> kQuantNames = {"none", "u8",  "i8",  "f16",    "bf16",
                                                                         "u4",   "i8h", "i4h", "i8h-sr", "i4h-sr"};

void check_spec(QuantSpec spec) {
  if (quant_spec_valid(spec) && !quant_is_int_domain(spec.kind)) return;
  if (quant_spec_valid(spec))
    throw std::invalid_argument("quant: " + std::string(quant_name(spec.kind)) + " is an integer-domain mode (int_quant.h)");
  const auto raw = static_cast<uint32_t>(spec.kind);
  if (!quant_valid(raw)) throw std::invalid_argument("quant: invalid kind " + std::to_string(raw));
  if (spec.kind == Quant::none) throw std::invalid_argument("quant: kind none has no encoding (raw data)");
  throw std::invalid_argument("quant: block " + std::to_string(spec.block) + " is outside 1.." +
                              std::to_string(kMaxQuantBlock));
}

bool is_affine(Quant kind) { return kind == Quant::u8 || kind == Quant::i8 || kind == Quant::u4; }

template <class T>
constexpr size_t kMetaBytes = 2 * sizeof(T);

template <class T>
std::string describe(T v) {
  char text[40];
  std::snprintf(text, sizeof text, "%.*g", sizeof(T) == 4 ? 9 : 17, static_cast<double>(v));
  return text;
}

// ---- u8, i8, u4

template <class T>
class AffineCodec {
 public:
  AffineCodec(const quant_detail::QuantKernels<T>& kernels, QuantSpec spec)
      : kernels_(kernels), spec_(spec), levels_(spec.kind == Quant::u4 ? T(15) : T(255)),
        flip_(spec.kind == Quant::i8 ? uint8_t{0x80} : uint8_t{0}) {}

  size_t block_bytes(size_t n) const { return kMetaBytes<T> + (spec_.kind == Quant::u4 ? (n + 1) / 2 : n); }

  void encode_block(const T* x, size_t n, uint8_t* dst) const {
    uint8_t* codes = dst + kMetaBytes<T>;
    const quant_detail::BlockRange<T> r = kernels_.range(x, n);
    T min = quiet_nan<T>();
    T scale = quiet_nan<T>();
    if (std::isfinite(r.min) && std::isfinite(r.max)) {
      const T s = (r.max - r.min) / levels_;
      if (std::isfinite(r.min + levels_ * s)) {  // else the block is too wide to decode: the NaN marker
        min = r.min;
        scale = s;
      }
    }
    std::memcpy(dst, &min, sizeof(T));
    std::memcpy(dst + sizeof(T), &scale, sizeof(T));
    if (std::isnan(scale) || scale == 0) {
      std::memset(codes, 0, block_bytes(n) - kMetaBytes<T>);
    } else if (spec_.kind == Quant::u4) {
      kernels_.quantize4(x, n, min, scale, codes);
    } else {
      kernels_.quantize8(x, n, min, scale, flip_, codes);
    }
  }

  // out[i] = decode[i] (+ local[i] when local is not null), after checking the header.
  Status decode_block(const uint8_t* src, size_t n, const T* local, T* out, size_t index) const {
    const uint8_t* codes = src + kMetaBytes<T>;
    T min;
    T scale;
    std::memcpy(&min, src, sizeof(T));
    std::memcpy(&scale, src + sizeof(T), sizeof(T));
    if (std::isnan(min) && std::isnan(scale)) {
      std::fill(out, out + n, quiet_nan<T>());
      return Status::success();
    }
    if (!std::isfinite(min) || !std::isfinite(scale) || std::signbit(scale) ||
        !std::isfinite(min + levels_ * scale)) {
      return Status::failure(Errc::protocol, "quant " + std::string(quant_name(spec_.kind)) + ": block " +
                                                 std::to_string(index) + " has min " + describe(min) +
                                                 " and scale " + describe(scale) +
                                                 " (want finite min, finite scale >= +0, finite min + L * scale)");
    }
    if (scale == 0) {
      if (local == nullptr) {
        std::fill(out, out + n, min);
      } else {
        for (size_t i = 0; i < n; ++i) out[i] = min + local[i];
      }
    } else if (spec_.kind == Quant::u4) {
      kernels_.dequantize4(codes, n, min, scale, local, out);
    } else {
      kernels_.dequantize8(codes, n, min, scale, flip_, local, out);
    }
    return Status::success();
  }

 private:
  const quant_detail::QuantKernels<T>& kernels_;
  QuantSpec spec_;
  T levels_;
  uint8_t flip_;
};

// ---- f16, bf16

// double -> float rounded to odd (toward zero, then the last bit set if
// anything was dropped): rounding that to nearest-even in a format of at most
// 22 bits of precision gives the correctly rounded result of the double,
// which rounding to nearest twice would not (f16 has 11, bf16 8).
float round_to_odd(double x) {
  const float f = static_cast<float>(x);
  if (std::isnan(x) || static_cast<double>(f) == x) return f;
  uint32_t bits = std::bit_cast<uint32_t>(f);
  if (std::fabs(static_cast<double>(f)) > std::fabs(x)) --bits;  // rounded away from zero (or to inf): step back
  return std::bit_cast<float>(bits | 1u);
}

template <class T>
uint16_t narrow(Quant kind, T x) {
  float f;
  if constexpr (sizeof(T) == 4) {
    f = x;
  } else {
    f = round_to_odd(x);
  }
  return kind == Quant::f16 ? f32_to_f16(f) : f32_to_bf16(f);
}

// Wire bytes go through an aligned copy: the wire buffer need not be aligned
// for uint16_t, and the copy is from L1.
constexpr size_t kHalfChunk = 1024;

template <class T>
void encode_half(Quant kind, const T* src, size_t count, uint8_t* dst) {
  uint16_t bits[kHalfChunk];
  for (size_t begin = 0; begin < count; begin += kHalfChunk) {
    const size_t n = std::min(kHalfChunk, count - begin);
    if constexpr (sizeof(T) == 4) {
      if (kind == Quant::f16) {
        f32_to_f16(src + begin, bits, n);
      } else {
        f32_to_bf16(src + begin, bits, n);
      }
    } else {
      for (size_t i = 0; i < n; ++i) bits[i] = narrow(kind, src[begin + i]);
    }
    std::memcpy(dst + 2 * begin, bits, 2 * n);
  }
}

template <class T>
void decode_half(Quant kind, const uint8_t* src, size_t count, const T* local, T* out) {
  const auto widen = [kind](const uint16_t* bits, float* values, size_t n) {
    if (kind == Quant::f16) {
      f16_to_f32(bits, values, n);
    } else {
      bf16_to_f32(bits, values, n);
    }
  };
  uint16_t bits[kHalfChunk];
  float wide[kHalfChunk];
  for (size_t begin = 0; begin < count; begin += kHalfChunk) {
    const size_t n = std::min(kHalfChunk, count - begin);
    std::memcpy(bits, src + 2 * begin, 2 * n);
    if constexpr (sizeof(T) == 4) {
      if (local == nullptr) {
        widen(bits, out + begin, n);
        continue;
      }
    }
    widen(bits, wide, n);
    if (local != nullptr) {
      for (size_t i = 0; i < n; ++i) out[begin + i] = static_cast<T>(wide[i]) + local[begin + i];
    } else {
      for (size_t i = 0; i < n; ++i) out[begin + i] = static_cast<T>(wide[i]);
    }
  }
}

Status check_length(QuantSpec spec, size_t bytes, size_t expected, size_t count) {
  if (bytes == expected) return Status::success();
  return Status::failure(Errc::protocol, "quant " + std::string(quant_name(spec.kind)) + ": " +
                                             std::to_string(bytes) + " bytes for " + std::to_string(count) +
                                             " elements, expected " + std::to_string(expected));
}

// ---- drivers (the work of the public functions, out of line so that the
// floating-point environment guard stays around all of it)

template <class T>
[[gnu::noinline]] void encode_chunk(const quant_detail::QuantKernels<T>& kernels, QuantSpec spec, const T* src,
                                    size_t count, uint8_t* dst) {
  if (!is_affine(spec.kind)) return encode_half(spec.kind, src, count, dst);
  const AffineCodec<T> codec(kernels, spec);
  for (size_t begin = 0; begin < count; begin += spec.block) {
    const size_t n = std::min<size_t>(spec.block, count - begin);
    codec.encode_block(src + begin, n, dst);
    dst += codec.block_bytes(n);
  }
}

template <class T>
[[gnu::noinline]] Status decode_chunk(const quant_detail::QuantKernels<T>& kernels, QuantSpec spec,
                                      const uint8_t* src, size_t count, const T* local, T* out) {
  if (!is_affine(spec.kind)) {
    decode_half(spec.kind, src, count, local, out);
    return Status::success();
  }
  const AffineCodec<T> codec(kernels, spec);
  for (size_t begin = 0, index = 0; begin < count; begin += spec.block, ++index) {
    const size_t n = std::min<size_t>(spec.block, count - begin);
    Status status = codec.decode_block(src, n, local == nullptr ? nullptr : local + begin, out + begin, index);
    if (!status.ok()) return status;
    src += codec.block_bytes(n);
  }
  return Status::success();
}

// One block (or half chunk) at a time: decode + add into scratch, encode the
// scratch. Each block of in is read completely before the same bytes of out
// are written, so out may be in.
template <class T>
[[gnu::noinline]] Status decode_add_encode_chunk(const quant_detail::QuantKernels<T>& kernels, QuantSpec spec,
                                                 const uint8_t* in, const T* local, size_t count, uint8_t* out) {
  constexpr size_t kStackScratch = 1024;
  T stack_scratch[kStackScratch];
  if (!is_affine(spec.kind)) {
    for (size_t begin = 0; begin < count; begin += kStackScratch) {
      const size_t n = std::min(kStackScratch, count - begin);
      decode_half(spec.kind, in + 2 * begin, n, local + begin, stack_scratch);
      encode_half(spec.kind, stack_scratch, n, out + 2 * begin);
    }
    return Status::success();
  }
  std::unique_ptr<T[]> heap_scratch;
  T* scratch = stack_scratch;
  if (spec.block > kStackScratch) {
    heap_scratch = std::make_unique_for_overwrite<T[]>(std::min<size_t>(spec.block, count));
    scratch = heap_scratch.get();
  }
  const AffineCodec<T> codec(kernels, spec);
  size_t offset = 0;
  for (size_t begin = 0, index = 0; begin < count; begin += spec.block, ++index) {
    const size_t n = std::min<size_t>(spec.block, count - begin);
    Status status = codec.decode_block(in + offset, n, local + begin, scratch, index);
    if (!status.ok()) return status;
    codec.encode_block(scratch, n, out + offset);
    offset += codec.block_bytes(n);
  }
  return Status::success();
}

}  // namespace

std::string_view quant_name(Quant kind) {
  const auto raw = static_cast<uint32_t>(kind);
  if (!quant_valid(raw)) throw std::invalid_argument("invalid quant kind " + std::to_string(raw));
  return kQuantNames[raw];
}

std::optional<Quant> parse_quant(std::string_view name) {
  for (size_t i = 0; i < kQuantNames.size(); ++i) {
    if (kQuantNames[i] == name) return static_cast<Quant>(i);
  }
  return std::nullopt;
}

bool quant_valid(uint32_t raw) { return raw < static_cast<uint32_t>(kQuantCount); }

bool quant_is_int_domain(Quant kind) {
  return kind == Quant::i8h || kind == Quant::i4h || kind == Quant::i8h_sr || kind == Quant::i4h_sr;
}

bool quant_spec_valid(QuantSpec spec) {
  return quant_valid(static_cast<uint32_t>(spec.kind)) && spec.kind != Quant::none && spec.block >= 1 &&
         spec.block <= kMaxQuantBlock;
}

template <class T>
size_t quant_encoded_bytes(QuantSpec spec, size_t count) {
  static_assert(std::is_same_v<T, float> || std::is_same_v<T, double>);
  check_spec(spec);
  // Far beyond any buffer in memory (count * sizeof(T) bytes), but keeps the sums below exact.
  if (count > std::numeric_limits<size_t>::max() / (kMetaBytes<T> + 2)) {
    throw std::invalid_argument("quant: count " + std::to_string(count) + " is too large");
  }
  if (!is_affine(spec.kind)) return 2 * count;
  const size_t full = count / spec.block;
  const size_t tail = count % spec.block;
  const auto block_bytes = [&](size_t n) {
    return kMetaBytes<T> + (spec.kind == Quant::u4 ? (n + 1) / 2 : n);
  };
  return full * block_bytes(spec.block) + (tail == 0 ? 0 : block_bytes(tail));
}

template <class T>
void quant_encode(QuantSpec spec, const T* src, size_t count, uint8_t* dst) {
  quant_detail::encode_with(quant_detail::quant_paths().back(), spec, src, count, dst);
}

template <class T>
Status quant_decode(QuantSpec spec, const uint8_t* src, size_t bytes, size_t count, T* dst) {
  return quant_detail::decode_with<T>(quant_detail::quant_paths().back(), spec, src, bytes, count, nullptr, dst);
}

template <class T>
Status quant_decode_add(QuantSpec spec, const uint8_t* in, size_t in_bytes, const T* local, size_t count, T* acc) {
  return quant_detail::decode_with(quant_detail::quant_paths().back(), spec, in, in_bytes, count, local, acc);
}

template <class T>
Status quant_decode_add_encode(QuantSpec spec, const uint8_t* in, size_t in_bytes, const T* local, size_t count,
                               uint8_t* out) {
  return quant_detail::decode_add_encode_with(quant_detail::quant_paths().back(), spec, in, in_bytes, local, count,
                                              out);
}

namespace quant_detail {

std::string_view quant_path_name(QuantPath path) {
  switch (path) {
    case QuantPath::scalar: return "scalar";
    case QuantPath::avx2: return "avx2";
    case QuantPath::avx512: return "avx512";
  }
  return "unknown";
}

std::span<const QuantPath> quant_paths() {
  static constexpr QuantPath kPaths[] = {
      QuantPath::scalar,
#if defined(__AVX2__)
      QuantPath::avx2,
#endif
#if defined(FERRY_QUANT_AVX512)
      QuantPath::avx512,
#endif
  };
  return kPaths;
}

template <class T>
const QuantKernels<T>& quant_kernels(QuantPath path) {
  switch (path) {
    case QuantPath::scalar: return scalar_quant_kernels<T>();
#if defined(__AVX2__)
    case QuantPath::avx2: return avx2_quant_kernels<T>();
#endif
#if defined(FERRY_QUANT_AVX512)
    case QuantPath::avx512: return avx512_quant_kernels<T>();
#endif
    default: break;
  }
  throw std::invalid_argument("quant: kernel path " + std::string(quant_path_name(path)) +
                              " is not compiled into this build");
}

template <class T>
void encode_with(QuantPath path, QuantSpec spec, const T* src, size_t count, uint8_t* dst) {
  check_spec(spec);
  const QuantKernels<T>& kernels = quant_kernels<T>(path);
  const DefaultFloatEnvironment environment;
  encode_chunk(kernels, spec, src, count, dst);
}

template <class T>
Status decode_with(QuantPath path, QuantSpec spec, const uint8_t* src, size_t bytes, size_t count, const T* local,
                   T* dst) {
  Status status = check_length(spec, bytes, quant_encoded_bytes<T>(spec, count), count);
  if (!status.ok()) return status;
  const QuantKernels<T>& kernels = quant_kernels<T>(path);
  const DefaultFloatEnvironment environment;
  return decode_chunk(kernels, spec, src, count, local, dst);
}

template <class T>
Status decode_add_encode_with(QuantPath path, QuantSpec spec, const uint8_t* in, size_t in_bytes, const T* local,
                              size_t count, uint8_t* out) {
  Status status = check_length(spec, in_bytes, quant_encoded_bytes<T>(spec, count), count);
  if (!status.ok()) return status;
  const QuantKernels<T>& kernels = quant_kernels<T>(path);
  const DefaultFloatEnvironment environment;
  return decode_add_encode_chunk(kernels, spec, in, local, count, out);
}

template const QuantKernels<float>& quant_kernels<float>(QuantPath);
template const QuantKernels<double>& quant_kernels<double>(QuantPath);
template void encode_with<float>(QuantPath, QuantSpec, const float*, size_t, uint8_t*);
template void encode_with<double>(QuantPath, QuantSpec, const double*, size_t, uint8_t*);
template Status decode_with<float>(QuantPath, QuantSpec, const uint8_t*, size_t, size_t, const float*, float*);
template Status decode_with<double>(QuantPath, QuantSpec, const uint8_t*, size_t, size_t, const double*, double*);
template Status decode_add_encode_with<float>(QuantPath, QuantSpec, const uint8_t*, size_t, const float*, size_t,
                                              uint8_t*);
template Status decode_add_encode_with<double>(QuantPath, QuantSpec, const uint8_t*, size_t, const double*, size_t,
                                               uint8_t*);

}  // namespace quant_detail

template size_t quant_encoded_bytes<float>(QuantSpec, size_t);
template size_t quant_encoded_bytes<double>(QuantSpec, size_t);
template void quant_encode<float>(QuantSpec, const float*, size_t, uint8_t*);
template void quant_encode<double>(QuantSpec, const double*, size_t, uint8_t*);
template Status quant_decode<float>(QuantSpec, const uint8_t*, size_t, size_t, float*);
template Status quant_decode<double>(QuantSpec, const uint8_t*, size_t, size_t, double*);
template Status quant_decode_add<float>(QuantSpec, const uint8_t*, size_t, const float*, size_t, float*);
template Status quant_decode_add<double>(QuantSpec, const uint8_t*, size_t, const double*, size_t, double*);
template Status quant_decode_add_encode<float>(QuantSpec, const uint8_t*, size_t, const float*, size_t, uint8_t*);
template Status quant_decode_add_encode<double>(QuantSpec, const uint8_t*, size_t, const double*, size_t,
                                                uint8_t*);

}  // namespace ferry
