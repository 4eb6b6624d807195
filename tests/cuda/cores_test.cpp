// The device codecs' __host__ __device__ cores (src/cuda/*_core.h), run on
// the CPU in the order the kernels run them (a warp's lanes one after
// another), against ferry's CPU codecs and xxHash: the same bytes for every
// mode and every edge case. This is what makes the kernels right before any
// GPU runs them; ferry_cuda_tests then compares the kernels' bytes on a GPU.
#include <catch2/catch.hpp>
#include <cstdint>
#include <cstring>
#include <vector>

#include "codec_inputs.h"
#include "core/content_hash.h"
#include "core/hash.h"
#include "core/int_quant.h"
#include "core/quant.h"
#include "cuda/affine_quant_core.h"
#include "cuda/int_quant_core.h"
#include "cuda/xxh3_core.h"

using namespace ferry;
using namespace ferry::device_core;
using ferry::codec_inputs::float_cases;
using ferry::codec_inputs::random_bytes;

namespace {

constexpr uint8_t kSecret[kXxh3SecretSize] = {FERRY_XXH3_SECRET_BYTES};

uint64_t xxh3_model(const uint8_t* data, size_t len) {
  return len <= kXxh3MidsizeMax ? xxh3_short(data, len, kSecret) : xxh3_long_by_lanes(data, len, kSecret);
}

// affine_encode.cu's kernel, one lane after another.
template <class T>
std::vector<uint8_t> affine_model(QuantSpec spec, const std::vector<T>& src) {
  const bool four_bit = spec.kind == Quant::u4;
  const T levels = four_bit ? T(15) : T(255);
  const uint8_t flip = spec.kind == Quant::i8 ? 0x80 : 0;
  std::vector<uint8_t> out;
  for (size_t begin = 0; begin < src.size(); begin += spec.block) {
    const size_t n = std::min<size_t>(spec.block, src.size() - begin);
    const T* x = src.data() + begin;
    AffineRange<T> range = AffineRange<T>::empty();
    for (unsigned lane = 0; lane < 32; ++lane) {
      AffineRange<T> part = AffineRange<T>::empty();
      for (size_t i = lane; i < n; i += 32) part.fold(x[i]);
      range.merge(part);
    }
    const AffineHeader<T> h = affine_header(range, levels);
    uint8_t meta[2 * sizeof(T)];
    std::memcpy(meta, &h.min, sizeof(T));
    std::memcpy(meta + sizeof(T), &h.scale, sizeof(T));
    out.insert(out.end(), meta, meta + sizeof meta);
    for (size_t k = 0; k < affine_code_bytes(four_bit, n); ++k) {
      out.push_back(h.zero_codes() ? uint8_t{0} : affine_code_byte(x, n, k, h, four_bit, flip));
    }
  }
  return out;
}

// int_encode.cu's kernels: absmax merged per block, then every packed byte.
template <class T>
void absmax_model(IntQuantSpec spec, const T* x, size_t count, size_t first_index, T* absmax) {
  using Bits = typename FloatTraits<T>::Bits;
  for (size_t b = first_index / spec.block; b * spec.block < first_index + count; ++b) {
    Bits m = magnitude_bits(absmax[b]);
    for (size_t g = std::max<size_t>(b * spec.block, first_index); g < std::min<size_t>((b + 1) * spec.block, first_index + count); ++g) {
      m = std::max(m, magnitude_bits(x[g - first_index]));
    }
    absmax[b] = absmax_value<T>(m);
  }
}

template <class T>
std::vector<uint8_t> int_encode_model(IntQuantSpec spec, uint64_t contributor, const T* absmax, size_t first_index,
                                      const std::vector<T>& x) {
  const int32_t levels = int_quant_levels(spec.kind);
  const uint64_t stream = splitmix(spec.seed, contributor);
  const auto code = [&](size_t i) {
    const uint64_t index = first_index + i;
    return int_code(int_block_scale(absmax[index / spec.block], levels), levels,
                    spec.rounding == IntRounding::stochastic, stream, x[i], index);
  };
  std::vector<uint8_t> out(int_quant_packed_bytes(spec, x.size(), 1));
  for (size_t k = 0; k < out.size(); ++k) out[k] = int_packed_byte(spec.kind == IntQuantKind::i4h, x.size(), k, code);
  return out;
}

}  // namespace

TEST_CASE("device core: XXH3-64 of every length up to 2100 bytes and around 4 MiB is xxHash's",
          "[cuda][core]") {
  const std::vector<uint8_t> data = random_bytes(kContentHashBlock + 4096, 41);
  for (size_t len = 0; len <= 2100; ++len) {
    INFO("length " << len);
    REQUIRE(xxh3_model(data.data(), len) == hash_bytes(data.data(), len));
    REQUIRE(xxh3_model(data.data() + 3, len) == hash_bytes(data.data() + 3, len));  // unaligned
  }
  for (size_t len : {size_t{4095}, size_t{1} << 20, kContentHashBlock - 1, kContentHashBlock, kContentHashBlock + 1,
                     kContentHashBlock + 4096}) {
    INFO("length " << len);
    REQUIRE(xxh3_model(data.data(), len) == hash_bytes(data.data(), len));
  }
}

TEST_CASE("device core: the content hash from per-block XXH3 is content_hash's", "[cuda][core]") {
  for (size_t size : {size_t{0}, size_t{100}, kContentHashBlock, 2 * kContentHashBlock + 200, 3 * kContentHashBlock + 7}) {
    const std::vector<uint8_t> data = random_bytes(size, size);
    std::vector<uint64_t> blocks;
    for (size_t begin = 0; begin < size || blocks.empty(); begin += kContentHashBlock) {
      blocks.push_back(xxh3_model(data.data() + begin, std::min(kContentHashBlock, size - begin)));
    }
    INFO("size " << size);
    REQUIRE(content_hash_from_blocks(blocks, size) == content_hash(data.data(), size));
  }
}

TEMPLATE_TEST_CASE("device core: u8, i8 and u4 encodings are quant_encode's bytes", "[cuda][core]", float, double) {
  for (Quant kind : {Quant::u8, Quant::i8, Quant::u4}) {
    for (uint32_t block : {1u, 7u, 256u, 1000u}) {
      for (size_t count : {size_t{1}, size_t{255}, size_t{2049}}) {
        for (const auto& input : float_cases<TestType>(count, count * 31 + block)) {
          const QuantSpec spec{kind, block};
          std::vector<uint8_t> cpu(quant_encoded_bytes<TestType>(spec, count));
          quant_encode<TestType>(spec, input.values.data(), count, cpu.data());
          INFO(quant_name(kind) << " block " << block << " count " << count << ": " << input.name);
          REQUIRE(affine_model(spec, input.values) == cpu);
        }
      }
    }
  }
}

TEMPLATE_TEST_CASE("device core: i8h and i4h maxima and encodings are int_quant's bytes", "[cuda][core]", float,
                   double) {
  for (IntQuantKind kind : {IntQuantKind::i8h, IntQuantKind::i4h}) {
    for (IntRounding rounding : {IntRounding::nearest, IntRounding::stochastic}) {
      for (uint32_t block : {1u, 256u, 333u}) {
        for (size_t first_index : {size_t{0}, size_t{100}}) {
          const size_t count = 2049;
          for (const auto& input : float_cases<TestType>(count, block + first_index)) {
            const IntQuantSpec spec{kind, block, rounding, 0x5eed + block};
            const size_t blocks = int_quant_block_count(spec, first_index + count);
            // Maxima from an earlier chunk are merged, not overwritten.
            std::vector<TestType> cpu_max(blocks, TestType(0)), model_max(blocks, TestType(0));
            cpu_max[first_index / block] = model_max[first_index / block] = TestType(0.5);
            int_quant_absmax(spec, input.values.data(), count, first_index, cpu_max.data());
            absmax_model(spec, input.values.data(), count, first_index, model_max.data());
            INFO((kind == IntQuantKind::i8h ? "i8h" : "i4h") << (rounding == IntRounding::stochastic ? "-sr" : "")
                                                             << " block " << block << " first " << first_index << ": "
                                                             << input.name);
            REQUIRE(std::memcmp(cpu_max.data(), model_max.data(), blocks * sizeof(TestType)) == 0);
            std::vector<uint8_t> cpu(int_quant_packed_bytes(spec, count, 1));
            int_quant_encode(spec, 7, cpu_max.data(), first_index, input.values.data(), count, cpu.data());
            REQUIRE(int_encode_model(spec, 7, cpu_max.data(), first_index, input.values) == cpu);
          }
        }
      }
    }
  }
}
