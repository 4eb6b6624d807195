// The sparse codec's C calls: argument checks and translation only;
// core/sparse_codec.h does the work (and pins the format).
#include <span>
#include <vector>

#include "capi/api_guard.h"
#include "core/sparse_codec.h"

using ferry::Errc;
using ferry::Error;
using ferry::SparseSpec;
using ferry::capi::guarded;
using ferry::capi::require;

namespace {

void sparse_spec_defaults(ferry_sparse_spec* spec) {
  if (!spec) return;
  const SparseSpec defaults;
  *spec = ferry_sparse_spec{};
  spec->struct_size = sizeof(ferry_sparse_spec);
  spec->chunk = defaults.chunk;
  spec->k = defaults.k;
  spec->bits = defaults.bits;
}

SparseSpec checked_spec(const ferry_sparse_spec* given) {
  const auto c = ferry::capi::read_versioned(given, sparse_spec_defaults, "spec");
  const SparseSpec spec{c.chunk, c.k, c.bits};
  if (!ferry::sparse_spec_valid(spec))
    throw Error(Errc::invalid_argument, "spec: chunk " + std::to_string(spec.chunk) + ", k " +
                                            std::to_string(spec.k) + ", bits " + std::to_string(spec.bits) +
                                            ": need 1 <= k <= chunk <= " + std::to_string(ferry::kMaxSparseChunk) +
                                            " and bits 2, 4 or 8");
  return spec;
}

void check_count(size_t count) {
  if (count > ferry::kMaxSparseCount)
    throw Error(Errc::invalid_argument, "count " + std::to_string(count) + " is above the codec's 2^40 elements");
}

}  // namespace

extern "C" {

void ferry_sparse_spec_init_sized(ferry_sparse_spec* spec, uint32_t struct_size) {
  ferry::capi::init_versioned(spec, struct_size, sparse_spec_defaults);
}

// Programs built against 0.4.0's header or older call this one, with no size.
void(ferry_sparse_spec_init)(ferry_sparse_spec* spec) {
  ferry_sparse_spec_init_sized(spec, ferry::capi::kSizeIn040<ferry_sparse_spec>);
}

uint32_t ferry_sparse_k_for_density(uint32_t chunk, double density) {
  if (chunk < 1 || chunk > ferry::kMaxSparseChunk || !(density > 0.0 && density <= 1.0)) return 0;
  return ferry::sparse_k_for_density(chunk, density);
}

ferry_result ferry_sparse_max_bytes(const ferry_sparse_spec* spec, size_t count, size_t* bytes) {
  return guarded([&] {
    require(bytes, "bytes");
    const SparseSpec s = checked_spec(spec);
    check_count(count);
    *bytes = ferry::sparse_max_encoded_bytes(s, count);
  });
}

ferry_result ferry_sparse_encode(const ferry_sparse_spec* spec, ferry_dtype dtype, const void* x, size_t count,
                                 void* out, size_t capacity, size_t* written, float* residual) {
  return guarded([&] {
    require(out, "out");
    require(written, "written");
    if (count > 0) require(x, "x");
    const SparseSpec s = checked_spec(spec);
    check_count(count);
    const ferry::DType d = ferry::capi::checked_dtype(dtype, "dtype");
    if (d != ferry::DType::f32 && d != ferry::DType::bf16 && d != ferry::DType::f16)
      throw Error(Errc::invalid_argument, "dtype: the sparse codec encodes FERRY_F32, FERRY_BF16 or FERRY_F16");
    const size_t need = ferry::sparse_max_encoded_bytes(s, count);
    if (capacity < need)
      throw Error(Errc::invalid_argument, "capacity " + std::to_string(capacity) + " is below the " +
                                              std::to_string(need) + " bytes ferry_sparse_max_bytes gives");
    *written = ferry::sparse_encode(s, d, x, count, static_cast<uint8_t*>(out), residual);
  });
}

ferry_result ferry_sparse_decode_sum(const void* const* parts, const size_t* sizes, uint32_t members, float* out,
                                     size_t count) {
  return guarded([&] {
    if (count > 0) require(out, "out");
    if (members > 0) {
      require(parts, "parts");
      require(sizes, "sizes");
    }
    std::vector<std::span<const uint8_t>> views(members);
    for (uint32_t r = 0; r < members; ++r) {
      if (sizes[r] > 0 && !parts[r])
        throw Error(Errc::invalid_argument, "parts[" + std::to_string(r) + "] is NULL with sizes[r] > 0");
      views[r] = {static_cast<const uint8_t*>(parts[r]), sizes[r]};
    }
    const ferry::Status st = ferry::sparse_decode_sum(views, out, count);
    if (!st.ok()) throw Error(st.code, st.message);
  });
}

}  // extern "C"
