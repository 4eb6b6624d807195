// The sparse codec's decoder refuses every malformed contribution the header
// lists (core/sparse_codec.h, Byte layout) with Errc::protocol and a message
// that names the fault, reading nothing outside the bytes it was given (the
// ASan build and fuzz_sparse_decode check that part).
#include <algorithm>
#include <bit>
#include <catch2/catch.hpp>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "core/sparse_format.h"
#include "sparse_codec_fixture.h"

using namespace ferry;
using namespace ferry::sparse_test;

namespace {

// spec {16, 3, 4}, 40 elements: chunks of 16, 16 and 8; Rice parameter
// r = floor(log2(16 / 3)) = 2.
constexpr SparseSpec kSpec{16, 3, 4};
constexpr size_t kCount = 40;

Bytes good() { return encode(kSpec, normal_values(kCount, 9)); }

// A contribution of one chunk of 16 written by hand: lo 1, step 0.5, the
// given gaps (Rice, r = 2), then the index field's bits `index_pad` ORed in
// past its end, and three 4-bit codes.
Bytes one_chunk(std::vector<uint32_t> gaps, uint8_t index_pad = 0, uint32_t lo_bits = 0x3f800000u,
                uint32_t step_bits = 0x3f000000u) {
  Bytes b = encode(kSpec, normal_values(16, 1));
  b.resize(kSparseHeaderBytes + 8 + 64);
  std::memcpy(b.data() + kSparseHeaderBytes, &lo_bits, 4);
  std::memcpy(b.data() + kSparseHeaderBytes + 4, &step_bits, 4);
  sparse_detail::BitWriter indices(b.data() + kSparseHeaderBytes + 8);
  for (uint32_t g : gaps) indices.put_rice(g, 2);
  uint8_t* codes = indices.finish();
  codes[-1] |= index_pad;
  sparse_detail::BitWriter values(codes);
  for (int j = 0; j < 3; ++j) values.put(0xa, 4);
  b.resize(static_cast<size_t>(values.finish() - b.data()));
  return b;
}

std::string refusal(const Bytes& b) {
  SparseHeader h;
  const Status st = sparse_validate(b.data(), b.size(), &h);
  REQUIRE(st.code == Errc::protocol);
  std::vector<float> out(kCount);
  REQUIRE(sparse_decode_add(b.data(), b.size(), out.data(), kCount).code == Errc::protocol);
  return st.message;
}

void set_u32(Bytes& b, size_t at, uint32_t v) { std::memcpy(b.data() + at, &v, 4); }

}  // namespace

TEST_CASE("sparse malformed: the good contribution passes", "[core][sparse]") {
  const Bytes b = good();
  REQUIRE(b.size() <= sparse_max_encoded_bytes(kSpec, kCount));
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
  REQUIRE_THAT(refusal(longer), Contains("61 bytes where its header (count 40, chunk 16, k 3, bits 4) implies 60..60"));
  // Where the gaps leave the length open (here 2 chunks of 4096 at 2 %), the
  // walk finds what the header's bounds cannot.
  const Bytes wide = encode({4096, 82, 2}, normal_values(8192, 4));
  Bytes wide_longer = wide;
  wide_longer.push_back(0);
  Bytes wide_cut(wide.begin(), wide.end() - 1);
  for (const Bytes* c : {&wide_longer, &wide_cut}) {
    REQUIRE(sparse_validate(c->data(), c->size(), nullptr).code == Errc::protocol);
  }
  REQUIRE_THAT(sparse_validate(wide_longer.data(), wide_longer.size(), nullptr).message,
               Contains("1 bytes past its last chunk"));
  REQUIRE_THAT(sparse_validate(wide_cut.data(), wide_cut.size(), nullptr).message,
               Contains("ends inside chunk 1's values"));
}

TEST_CASE("sparse malformed: chunk faults", "[core][sparse]") {
  using Catch::Matchers::Contains;
  // Indices 0, 5, 15 decode; the value of each is -(1 + 2 * 0.5) = -2.
  const Bytes fine = one_chunk({0, 4, 9});
  SparseHeader h;
  REQUIRE(sparse_validate(fine.data(), fine.size(), &h).ok());
  REQUIRE(h.count == 16);
  std::vector<float> out(16, 0.0f);
  REQUIRE(sparse_decode_add(fine.data(), fine.size(), out.data(), 16).ok());
  REQUIRE((out[0] == -2.0f && out[5] == -2.0f && out[15] == -2.0f && out[1] == 0.0f));

  auto refused = [](const Bytes& b) {
    const Status st = sparse_validate(b.data(), b.size(), nullptr);
    REQUIRE(st.code == Errc::protocol);
    return st.message;
  };
  REQUIRE_THAT(refused(one_chunk({0, 4, 10})), Contains("chunk 0 entry 2: index past the chunk's 16 elements"));
  REQUIRE_THAT(refused(one_chunk({16, 0, 0})), Contains("chunk 0 entry 0: index past"));
  REQUIRE_THAT(refused(one_chunk({0, 4, 9}, 0x80)), Contains("padding bits"));
  Bytes code_pad = fine;
  code_pad.back() |= 0xf0;  // 12 bits of codes: the last byte's high nibble is padding
  REQUIRE_THAT(refused(code_pad), Contains("padding bits"));
  Bytes cut = fine;
  cut.pop_back();
  REQUIRE_THAT(refused(cut), Contains("implies 36..36"));
  // A run of one-bits longer than any gap: refused, not read on.
  Bytes ones = fine;
  std::fill(ones.begin() + kSparseHeaderBytes + 8, ones.end(), 0xff);
  REQUIRE_THAT(refused(ones), Contains("index past"));

  const float inf = std::numeric_limits<float>::infinity();
  for (auto [lo, step] : {std::pair{-1.0f, 0.1f}, std::pair{1.0f, -0.0f}, std::pair{inf, 0.0f},
                          std::pair{1.0f, std::numeric_limits<float>::quiet_NaN()},
                          std::pair{1.0f, std::numeric_limits<float>::max() / 4}}) {
    INFO("lo " << lo << ", step " << step);
    REQUIRE_THAT(refused(one_chunk({0, 4, 9}, 0, std::bit_cast<uint32_t>(lo), std::bit_cast<uint32_t>(step))),
                 Contains("chunk 0 has an invalid scale"));
  }
  // The non-finite marker is valid, with any codes, and decodes to the quiet NaN.
  const Bytes marker = one_chunk({0, 4, 9}, 0, 0x7fc00000u, 0x7fc00000u);
  std::vector<float> nan_out(16, 0.0f);
  REQUIRE(sparse_decode_add(marker.data(), marker.size(), nan_out.data(), 16).ok());
  REQUIRE(bits_of(nan_out[5]) == 0x7fc00000u);
}
