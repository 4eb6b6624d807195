// The sparse codec's decoder refuses every malformed contribution the header
// lists (core/sparse_codec.h, Byte layout) with Errc::protocol and a message
// that names the fault, reading nothing outside the bytes it was given (the
// ASan build and fuzz_sparse_decode check that part).
#include <bit>
#include <catch2/catch.hpp>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "sparse_codec_fixture.h"

using namespace ferry;
using namespace ferry::sparse_test;

namespace {

// spec {16, 3, 4}, 40 elements: chunks of 16, 16, 8; w = 4 bits an index.
// A chunk: lo (4) | step (4) | 3 indices, 12 bits -> 2 bytes | 3 codes, 12 bits -> 2 bytes = 12 bytes.
constexpr SparseSpec kSpec{16, 3, 4};
constexpr size_t kCount = 40;
constexpr size_t kChunkBytes = 12;

Bytes good() { return encode(kSpec, normal_values(kCount, 9)); }

std::string refusal(const Bytes& b) {
  SparseHeader h;
  const Status st = sparse_validate(b.data(), b.size(), &h);
  REQUIRE(st.code == Errc::protocol);
  std::vector<float> out(kCount);
  REQUIRE(sparse_decode_add(b.data(), b.size(), out.data(), kCount).code == Errc::protocol);
  return st.message;
}

void set_u32(Bytes& b, size_t at, uint32_t v) { std::memcpy(b.data() + at, &v, 4); }
void set_f32(Bytes& b, size_t at, float v) { set_u32(b, at, std::bit_cast<uint32_t>(v)); }

}  // namespace

TEST_CASE("sparse malformed: the good contribution passes", "[core][sparse]") {
  const Bytes b = good();
  REQUIRE(b.size() == kSparseHeaderBytes + 3 * kChunkBytes);
  SparseHeader h;
  REQUIRE(sparse_validate(b.data(), b.size(), &h).ok());
  REQUIRE((h.spec.chunk == 16 && h.spec.k == 3 && h.spec.bits == 4 && h.count == kCount && h.dtype == DType::f32));
}

TEST_CASE("sparse malformed: header faults", "[core][sparse]") {
  using Catch::Matchers::Contains;
  Bytes b = good();
  REQUIRE_THAT(refusal(Bytes(b.begin(), b.begin() + 23)), Contains("shorter than its 24-byte header"));
  REQUIRE_THAT(refusal(Bytes{}), Contains("shorter"));
  auto with = [&](size_t at, uint8_t v) {
    Bytes c = b;
    c[at] = v;
    return c;
  };
  REQUIRE_THAT(refusal(with(0, 'X')), Contains("magic"));
  REQUIRE_THAT(refusal(with(2, 2)), Contains("format version 2"));
  REQUIRE_THAT(refusal(with(3, 3)), Contains("bits 3"));
  REQUIRE_THAT(refusal(with(4, static_cast<uint8_t>(DType::i32))), Contains("dtype 5"));
  REQUIRE_THAT(refusal(with(6, 1)), Contains("reserved"));
  auto with_u32 = [&](size_t at, uint32_t v) {
    Bytes c = b;
    set_u32(c, at, v);
    return c;
  };
  REQUIRE_THAT(refusal(with_u32(8, 0)), Contains("chunk 0"));
  REQUIRE_THAT(refusal(with_u32(8, kMaxSparseChunk + 1)), Contains("chunk 65537"));
  REQUIRE_THAT(refusal(with_u32(12, 0)), Contains("k 0"));
  REQUIRE_THAT(refusal(with_u32(12, 17)), Contains("k 17"));
  Bytes huge = b;
  const uint64_t too_many = kMaxSparseCount + 1;
  std::memcpy(huge.data() + 16, &too_many, 8);
  REQUIRE_THAT(refusal(huge), Contains("exceeds 2^40"));
  // A count that implies more bytes than arrived: refused on length, nothing allocated.
  Bytes bigger = b;
  const uint64_t many = kMaxSparseCount;
  std::memcpy(bigger.data() + 16, &many, 8);
  REQUIRE_THAT(refusal(bigger), Contains("implies"));
  Bytes longer = b;
  longer.push_back(0);
  REQUIRE_THAT(refusal(longer), Contains("61 bytes where its header"));
}

TEST_CASE("sparse malformed: chunk faults", "[core][sparse]") {
  using Catch::Matchers::Contains;
  const Bytes b = good();
  const size_t chunk1 = kSparseHeaderBytes + kChunkBytes;  // the second chunk
  const size_t chunk2 = chunk1 + kChunkBytes;              // the last, of 8 elements
  auto with_indices = [&](size_t chunk, uint32_t i0, uint32_t i1, uint32_t i2) {
    Bytes c = b;
    c[chunk + 8] = static_cast<uint8_t>(i0 | i1 << 4);
    c[chunk + 9] = static_cast<uint8_t>(i2);
    return c;
  };
  REQUIRE(sparse_validate(with_indices(chunk1, 0, 1, 15).data(), b.size(), nullptr).ok());
  REQUIRE_THAT(refusal(with_indices(chunk1, 3, 3, 5)), Contains("chunk 1 entry 1: index 3 does not increase"));
  REQUIRE_THAT(refusal(with_indices(chunk1, 4, 2, 5)), Contains("does not increase"));
  REQUIRE_THAT(refusal(with_indices(chunk2, 1, 2, 8)), Contains("index 8 is past the chunk's 8 elements"));
  Bytes padded = b;
  padded[chunk1 + 9] |= 0x10;  // bit 12 of the index field: padding
  REQUIRE_THAT(refusal(padded), Contains("padding"));
  Bytes code_pad = b;
  code_pad[chunk1 + 11] |= 0x80;
  REQUIRE_THAT(refusal(code_pad), Contains("padding"));

  const float inf = std::numeric_limits<float>::infinity();
  for (auto [lo, step] : {std::pair{-1.0f, 0.1f}, std::pair{1.0f, -0.0f}, std::pair{inf, 0.0f},
                          std::pair{1.0f, std::numeric_limits<float>::quiet_NaN()},
                          std::pair{1.0f, std::numeric_limits<float>::max() / 4}}) {
    INFO("lo " << lo << ", step " << step);
    Bytes c = b;
    set_f32(c, chunk1, lo);
    set_f32(c, chunk1 + 4, step);
    REQUIRE_THAT(refusal(c), Contains("chunk 1 has an invalid scale"));
  }
  // The non-finite marker is valid, with any codes.
  Bytes marker = b;
  set_u32(marker, chunk1, 0x7fc00000u);
  set_u32(marker, chunk1 + 4, 0x7fc00000u);
  marker[chunk1 + 10] = 0xff;
  REQUIRE(sparse_validate(marker.data(), marker.size(), nullptr).ok());
}
