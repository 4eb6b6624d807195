// The sparse codec's encoder and sizes (sparse_codec.h); the selection is
// sparse_select.cpp's, the decoder sparse_decode.cpp's.
#include "core/sparse_codec.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "core/float_environment.h"
#include "core/half.h"
#include "core/sparse_format.h"

namespace ferry {

static_assert(std::endian::native == std::endian::little,
              "the sparse contribution format is little-endian; add byte swaps for this target");
static_assert(sizeof(size_t) >= 8, "contribution sizes are 64-bit");

using namespace sparse_detail;

namespace {

void check_spec(SparseSpec spec) {
  if (!sparse_spec_valid(spec)) {
    throw std::invalid_argument("sparse codec: chunk must be 1.." + std::to_string(kMaxSparseChunk) +
                                ", k 1..chunk and bits 2, 4 or 8 (got chunk " + std::to_string(spec.chunk) +
                                ", k " + std::to_string(spec.k) + ", bits " + std::to_string(spec.bits) + ")");
  }
}

// The most bytes a chunk of n elements can take.
uint64_t chunk_bytes_max(SparseSpec spec, uint64_t n) {
  const uint64_t sent = std::min<uint64_t>(spec.k, n);
  return 8 + field_bytes(index_bits_max(n, sent, rice_parameter(spec.chunk, spec.k))) + field_bytes(sent * spec.bits);
}

uint8_t* write_header(SparseSpec spec, DType dtype, uint64_t count, uint8_t* out) {
  std::memset(out, 0, kSparseHeaderBytes);
  out[0] = 'F';
  out[1] = 'S';
  out[2] = kSparseFormatVersion;
  out[3] = static_cast<uint8_t>(spec.bits);
  out[4] = static_cast<uint8_t>(dtype);
  std::memcpy(out + 8, &spec.chunk, 4);
  std::memcpy(out + 12, &spec.k, 4);
  std::memcpy(out + 16, &count, 8);
  return out + kSparseHeaderBytes;
}

// Per-call buffers, sized for one chunk.
struct ChunkScratch {
  explicit ChunkScratch(uint32_t n, uint32_t k) : widened(n), mag(n), select(2 * size_t{n}), selected(k) {}
  std::vector<float> widened;  // bf16 / f16 input as f32
  std::vector<uint32_t> mag;
  std::vector<uint32_t> select;
  std::vector<uint32_t> selected;
};

// One chunk of n f32 values x to out (residual: the chunk's); returns the
// end of what it wrote.
uint8_t* encode_chunk(SparseSpec spec, const float* x, uint32_t n, ChunkScratch& s, uint8_t* out,
                      float* residual) {
  for (uint32_t i = 0; i < n; ++i) s.mag[i] = std::bit_cast<uint32_t>(x[i]) & 0x7fffffffu;
  const uint32_t sent = select_top_k(s.mag.data(), n, spec.k, s.select.data(), s.selected.data());
  const uint32_t* selected = s.selected.data();

  uint32_t lo_bits = 0xffffffffu;
  uint32_t hi_bits = 0;
  for (uint32_t j = 0; j < sent; ++j) {
    lo_bits = std::min(lo_bits, s.mag[selected[j]]);
    hi_bits = std::max(hi_bits, s.mag[selected[j]]);
  }
  const uint32_t top = levels(spec.bits);
  bool finite = hi_bits < 0x7f800000u;
  float lo = std::bit_cast<float>(lo_bits);
  float step = finite ? (std::bit_cast<float>(hi_bits) - lo) / static_cast<float>(top) : 0.0f;
  if (finite && !std::isfinite(lo + static_cast<float>(top) * step)) finite = false;
  if (!finite) lo = step = std::bit_cast<float>(kNanBits);
  std::memcpy(out, &lo, 4);
  std::memcpy(out + 4, &step, 4);

  BitWriter indices(out + 8);
  const uint32_t r = rice_parameter(spec.chunk, spec.k);
  for (uint32_t j = 0; j < sent; ++j) indices.put_rice(selected[j] - (j == 0 ? 0 : selected[j - 1] + 1), r);
  BitWriter codes(indices.finish());
  for (uint32_t j = 0; j < sent; ++j) {
    const float v = x[selected[j]];
    uint32_t code = 0;
    if (finite) {
      uint32_t m = 0;
      if (step > 0.0f) {
        const float t = std::clamp((std::fabs(v) - lo) / step, 0.0f, static_cast<float>(top));
        m = static_cast<uint32_t>(std::nearbyint(t));
      }
      code = (std::bit_cast<uint32_t>(v) >> 31) << (spec.bits - 1) | m;
    }
    codes.put(code, spec.bits);
    if (residual != nullptr) {
      // +0 + v: what sparse_decode_sum makes of this contribution alone (a -0 becomes +0).
      const float sent_value = 0.0f + (finite ? code_value(code, spec.bits, lo, step) : std::bit_cast<float>(kNanBits));
      residual[selected[j]] = v - sent_value;
    }
  }
  return codes.finish();
}

// [[gnu::noinline]]: the work stays behind the floating-point guard of sparse_encode.
[[gnu::noinline]] size_t encode_all(SparseSpec spec, DType dtype, const void* x, size_t count, uint8_t* out,
                                    float* residual) {
  uint8_t* const begin = out;
  out = write_header(spec, dtype, count, out);
  const uint32_t max_n = static_cast<uint32_t>(std::min<size_t>(spec.chunk, count));
  ChunkScratch scratch(max_n, std::min(spec.k, max_n));
  const bool in_place = dtype == DType::f32 && residual == static_cast<const float*>(x);
  for (size_t first = 0; first < count; first += spec.chunk) {
    const auto n = static_cast<uint32_t>(std::min<size_t>(spec.chunk, count - first));
    const float* chunk = nullptr;
    if (dtype == DType::f32) {
      chunk = static_cast<const float*>(x) + first;
    } else {
      const uint16_t* half = static_cast<const uint16_t*>(x) + first;
      if (dtype == DType::bf16) {
        bf16_to_f32(half, scratch.widened.data(), n);
      } else {
        f16_to_f32(half, scratch.widened.data(), n);
      }
      chunk = scratch.widened.data();
    }
    float* r = residual == nullptr ? nullptr : residual + first;
    if (r != nullptr && !in_place) std::memcpy(r, chunk, n * sizeof(float));
    out = encode_chunk(spec, chunk, n, scratch, out, r);
  }
  return static_cast<size_t>(out - begin);
}

}  // namespace

bool sparse_spec_valid(SparseSpec spec) {
  return spec.chunk >= 1 && spec.chunk <= kMaxSparseChunk && spec.k >= 1 && spec.k <= spec.chunk &&
         (spec.bits == 2 || spec.bits == 4 || spec.bits == 8);
}

uint32_t sparse_k_for_density(uint32_t chunk, double density) {
  if (!(density > 0.0 && density <= 1.0) || chunk == 0) {
    throw std::invalid_argument("sparse codec: density must be in (0, 1] and chunk at least 1");
  }
  const double k = std::round(density * chunk);
  return static_cast<uint32_t>(std::clamp(k, 1.0, static_cast<double>(chunk)));
}

size_t sparse_max_encoded_bytes(SparseSpec spec, size_t count) {
  check_spec(spec);
  if (count > kMaxSparseCount) {
    throw std::invalid_argument("sparse codec: count " + std::to_string(count) + " exceeds 2^40");
  }
  const size_t full = count / spec.chunk;
  const size_t rest = count % spec.chunk;
  return kSparseHeaderBytes + full * chunk_bytes_max(spec, spec.chunk) +
         (rest != 0 ? chunk_bytes_max(spec, rest) : 0);
}

size_t sparse_encode(SparseSpec spec, DType dtype, const void* x, size_t count, uint8_t* out, float* residual) {
  (void)sparse_max_encoded_bytes(spec, count);  // checks spec and count
  if (dtype != DType::f32 && dtype != DType::bf16 && dtype != DType::f16) {
    throw std::invalid_argument("sparse codec: input must be f32, bf16 or f16");
  }
  const DefaultFloatEnvironment environment;
  return encode_all(spec, dtype, x, count, out, residual);
}

}  // namespace ferry
