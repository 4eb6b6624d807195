// The sparse codec's decoder (sparse_codec.h): the header, every check of a
// stranger's contribution, and the rank-ordered decode-and-sum.
#include <algorithm>
#include <bit>
#include <cmath>
#include <cstring>
#include <string>

#include "core/float_environment.h"
#include "core/sparse_codec.h"
#include "core/sparse_format.h"

namespace ferry {

using namespace sparse_detail;

namespace {

Status refuse(std::string what) { return Status::failure(Errc::protocol, "sparse contribution: " + std::move(what)); }

uint32_t read_u32(const uint8_t* p) {
  uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}

// Walks the chunks of a contribution whose header (and so length) is known
// good, checking each; out == nullptr only checks, otherwise adds each value
// to out (the caller's count equals the header's).
[[gnu::noinline]] Status walk_chunks(const uint8_t* in, const SparseHeader& h, float* out) {
  const SparseSpec spec = h.spec;
  const uint32_t width = index_width(spec.chunk);
  const uint32_t top = levels(spec.bits);
  const uint8_t* p = in + kSparseHeaderBytes;
  for (uint64_t first = 0, c = 0; first < h.count; first += spec.chunk, ++c) {
    const uint64_t remaining = h.count - first;
    const auto n = static_cast<uint32_t>(remaining < spec.chunk ? remaining : spec.chunk);
    const uint32_t sent = spec.k < n ? spec.k : n;
    const uint32_t lo_bits = read_u32(p);
    const uint32_t step_bits = read_u32(p + 4);
    const float lo = std::bit_cast<float>(lo_bits);
    const float step = std::bit_cast<float>(step_bits);
    const bool marker = lo_bits == kNanBits && step_bits == kNanBits;
    if (!marker) {
      if ((lo_bits >> 31) != 0 || (step_bits >> 31) != 0 || !std::isfinite(lo) || !std::isfinite(step) ||
          !std::isfinite(lo + static_cast<float>(top) * step)) {
        return refuse("chunk " + std::to_string(c) + " has an invalid scale (lo " + std::to_string(lo) + ", step " +
                      std::to_string(step) + ")");
      }
    }
    BitReader indices(p + 8);
    const uint8_t* codes_at = p + 8 + field_bytes(sent, width);
    BitReader codes(codes_at);
    int64_t previous = -1;
    float* chunk_out = out == nullptr ? nullptr : out + first;
    for (uint32_t j = 0; j < sent; ++j) {
      const uint32_t index = indices.get(width);
      if (static_cast<int64_t>(index) <= previous || index >= n) {
        return refuse("chunk " + std::to_string(c) + " entry " + std::to_string(j) + ": index " +
                      std::to_string(index) + (index >= n ? " is past the chunk's " + std::to_string(n) + " elements"
                                                          : " does not increase"));
      }
      previous = index;
      const uint32_t code = codes.get(spec.bits);
      if (chunk_out != nullptr) {
        const float v = marker ? std::bit_cast<float>(kNanBits) : code_value(code, spec.bits, lo, step);
        chunk_out[index] = chunk_out[index] + v;
      }
    }
    if (!indices.padding_zero() || !codes.padding_zero()) {
      return refuse("chunk " + std::to_string(c) + " has padding bits that are not zero");
    }
    p = codes_at + field_bytes(sent, spec.bits);
  }
  return Status::success();
}

}  // namespace

Status sparse_read_header(const uint8_t* in, size_t in_bytes, SparseHeader* header) {
  if (in_bytes < kSparseHeaderBytes) {
    return refuse(std::to_string(in_bytes) + " bytes, shorter than its " + std::to_string(kSparseHeaderBytes) +
                  "-byte header");
  }
  if (in[0] != 'F' || in[1] != 'S') return refuse("bad magic (not a sparse contribution)");
  if (in[2] != kSparseFormatVersion) {
    return refuse("format version " + std::to_string(in[2]) + ", this build reads version " +
                  std::to_string(kSparseFormatVersion));
  }
  if (in[5] != 0 || in[6] != 0 || in[7] != 0) return refuse("reserved header bytes are not zero");
  SparseHeader h;
  h.spec.bits = in[3];
  const uint8_t dtype = in[4];
  if (dtype != static_cast<uint8_t>(DType::f32) && dtype != static_cast<uint8_t>(DType::bf16) &&
      dtype != static_cast<uint8_t>(DType::f16)) {
    return refuse("dtype " + std::to_string(dtype) + " is not f32, bf16 or f16");
  }
  h.dtype = static_cast<DType>(dtype);
  h.spec.chunk = read_u32(in + 8);
  h.spec.k = read_u32(in + 12);
  std::memcpy(&h.count, in + 16, 8);
  if (!sparse_spec_valid(h.spec)) {
    return refuse("chunk " + std::to_string(h.spec.chunk) + ", k " + std::to_string(h.spec.k) + ", bits " +
                  std::to_string(h.spec.bits) + " (chunk 1.." + std::to_string(kMaxSparseChunk) +
                  ", k 1..chunk, bits 2, 4 or 8)");
  }
  if (h.count > kMaxSparseCount) return refuse("count " + std::to_string(h.count) + " exceeds 2^40");
  const size_t expected = sparse_encoded_bytes(h.spec, h.count);
  if (in_bytes != expected) {
    return refuse(std::to_string(in_bytes) + " bytes where its header (count " + std::to_string(h.count) +
                  ", chunk " + std::to_string(h.spec.chunk) + ", k " + std::to_string(h.spec.k) + ", bits " +
                  std::to_string(h.spec.bits) + ") implies " + std::to_string(expected));
  }
  *header = h;
  return Status::success();
}

Status sparse_validate(const uint8_t* in, size_t in_bytes, SparseHeader* header) {
  SparseHeader h;
  Status st = sparse_read_header(in, in_bytes, &h);
  if (!st.ok()) return st;
  const DefaultFloatEnvironment environment;
  st = walk_chunks(in, h, nullptr);
  if (st.ok() && header != nullptr) *header = h;
  return st;
}

Status sparse_decode_add(const uint8_t* in, size_t in_bytes, float* out, size_t count) {
  SparseHeader h;
  Status st = sparse_read_header(in, in_bytes, &h);
  if (!st.ok()) return st;
  if (h.count != count) {
    return refuse("count " + std::to_string(h.count) + " where " + std::to_string(count) + " was expected");
  }
  const DefaultFloatEnvironment environment;
  return walk_chunks(in, h, out);
}

Status sparse_decode_sum(std::span<const std::span<const uint8_t>> contributions, float* out, size_t count) {
  for (size_t r = 0; r < contributions.size(); ++r) {
    SparseHeader h;
    Status st = sparse_validate(contributions[r].data(), contributions[r].size(), &h);
    if (st.ok() && h.count != count) {
      st = refuse("count " + std::to_string(h.count) + " where " + std::to_string(count) + " was expected");
    }
    if (!st.ok()) return Status::failure(st.code, "rank " + std::to_string(r) + ": " + st.message);
  }
  std::fill(out, out + count, 0.0f);
  for (const auto& contribution : contributions) {
    const Status st = sparse_decode_add(contribution.data(), contribution.size(), out, count);
    if (!st.ok()) return Status::failure(Errc::internal, "sparse_decode_sum: a validated contribution failed: " +
                                                             st.message);
  }
  return Status::success();
}

}  // namespace ferry
