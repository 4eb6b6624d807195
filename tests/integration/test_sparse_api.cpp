// The sparse codec through the C API, as SparseLoCo uses it: every peer
// encodes its values, the encodings travel in a real all-gather, and every
// peer decodes the same sum, bit for bit; a member with nothing to send
// contributes 0 bytes. And every argument error is named.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <stdexcept>
#include <string>
#include <vector>

#include "harness.h"

using namespace ferry::test;

namespace {

ferry_sparse_spec spec_of(uint32_t chunk, uint32_t k, uint32_t bits) {
  ferry_sparse_spec spec;
  ferry_sparse_spec_init(&spec);
  spec.chunk = chunk;
  spec.k = k;
  spec.bits = bits;
  return spec;
}

std::vector<float> values_of(uint32_t rank, size_t count) {
  std::vector<float> x(count);
  const auto r = static_cast<float>(rank);
  for (size_t i = 0; i < count; ++i) x[i] = std::sin(0.37f * static_cast<float>(i) + r) * (1.0f + r);
  return x;
}

std::vector<uint8_t> encode(const ferry_sparse_spec& spec, const std::vector<float>& x, std::vector<float>* residual) {
  size_t capacity = 0;
  must(ferry_sparse_max_bytes(&spec, x.size(), &capacity), "ferry_sparse_max_bytes");
  std::vector<uint8_t> out(capacity);
  size_t written = 0;
  must(ferry_sparse_encode(&spec, FERRY_F32, x.data(), x.size(), out.data(), out.size(), &written,
                           residual ? residual->data() : nullptr),
       "ferry_sparse_encode");
  out.resize(written);
  return out;
}

std::vector<float> decode_sum(const std::vector<std::vector<uint8_t>>& parts, size_t count) {
  std::vector<const void*> data;
  std::vector<size_t> sizes;
  for (const auto& p : parts) {
    data.push_back(p.data());
    sizes.push_back(p.size());
  }
  std::vector<float> out(count, 42.0f);
  must(ferry_sparse_decode_sum(data.data(), sizes.data(), static_cast<uint32_t>(parts.size()), out.data(), count),
       "ferry_sparse_decode_sum");
  return out;
}

bool same_bits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

}  // namespace

TEST_CASE("sparse API: encodings all-gathered between 3 peers decode to the same sum on each, rank 1 sending nothing",
          "[sparse][api]") {
  constexpr size_t kCount = 5000;  // 19 full chunks and a short one
  const ferry_sparse_spec spec = spec_of(256, 8, 2);
  EmbeddedMaster master;
  std::vector<ferry_comm*> comms(3);
  std::vector<std::vector<float>> sums(3);
  std::vector<std::vector<std::vector<uint8_t>>> gathered(3);
  REQUIRE(failures(run_peers(3, [&](size_t who) {
            comms[who] = create_peer(master.address());
            grow_group(comms[who], 3);
            const auto rank = static_cast<uint32_t>(attribute(comms[who], FERRY_ATTR_RANK));
            std::vector<uint8_t> mine;
            if (rank != 1) {
              const std::vector<float> x = values_of(rank, kCount);
              std::vector<float> residual(kCount);
              mine = encode(spec, x, &residual);
              // The residual is x less what the sum makes of this contribution alone.
              const std::vector<float> alone = decode_sum({mine}, kCount);
              for (size_t i = 0; i < kCount; ++i)
                if (residual[i] != x[i] - alone[i]) throw std::runtime_error("residual " + std::to_string(i) + " is off");
            }
            ferry_all_gather_desc desc;
            ferry_all_gather_desc_init(&desc);
            ferry_gathered* result = nullptr;
            must(ferry_all_gather(comms[who], mine.data(), mine.size(), &desc, &result, nullptr), "ferry_all_gather");
            for (uint32_t r = 0; r < 3; ++r) {
              const void* data = nullptr;
              size_t bytes = 0;
              must(ferry_gathered_part(result, r, &data, &bytes), "ferry_gathered_part");
              const auto* p = static_cast<const uint8_t*>(data);
              gathered[who].emplace_back(p, p + bytes);
            }
            ferry_gathered_destroy(result);
            sums[who] = decode_sum(gathered[who], kCount);
          })) == "");
  for (ferry_comm* c : comms) ferry_comm_destroy(c);
  // The same bytes everywhere, and the encoder is a pure function: each rank's part is what
  // encoding its values here gives.
  const std::vector<std::vector<uint8_t>> expected = {encode(spec, values_of(0, kCount), nullptr), {},
                                                      encode(spec, values_of(2, kCount), nullptr)};
  for (size_t who = 0; who < 3; ++who) {
    CHECK(gathered[who] == expected);
    CHECK(same_bits(sums[who], sums[0]));
  }
  // 2 x 20 chunks of 8 entries at most: the sum has at most 320 non-zeros, and at least one a chunk.
  size_t nonzero = 0;
  for (float v : sums[0]) nonzero += v != 0.0f;
  CHECK(nonzero > 20);
  CHECK(nonzero <= 320);
  CHECK(same_bits(sums[0], decode_sum({expected[0], expected[2]}, kCount)));
}

TEST_CASE("sparse API: every bad argument is refused with its name, and nothing is written", "[sparse][api]") {
  ferry_sparse_spec spec = spec_of(64, 4, 2);
  const std::vector<float> x = values_of(0, 200);
  size_t capacity = 0;
  REQUIRE(ferry_sparse_max_bytes(&spec, x.size(), &capacity) == FERRY_OK);
  std::vector<uint8_t> out(capacity);
  size_t written = 7;

  ferry_sparse_spec unset{};
  CHECK(ferry_sparse_max_bytes(&unset, 10, &capacity) == FERRY_ERR_INVALID_ARGUMENT);
  CHECK_THAT(ferry_last_error(), Catch::Contains("struct_size"));
  CHECK(ferry_sparse_max_bytes(nullptr, 10, &capacity) == FERRY_ERR_INVALID_ARGUMENT);
  CHECK(ferry_sparse_max_bytes(&spec, 10, nullptr) == FERRY_ERR_INVALID_ARGUMENT);
  CHECK(ferry_sparse_max_bytes(&spec, (size_t{1} << 40) + 1, &capacity) == FERRY_ERR_INVALID_ARGUMENT);
  CHECK_THAT(ferry_last_error(), Catch::Contains("2^40"));
  for (const ferry_sparse_spec& bad : {spec_of(0, 1, 2), spec_of(64, 0, 2), spec_of(64, 65, 2), spec_of(64, 4, 3),
                                       spec_of(65537, 4, 2)}) {
    CHECK(ferry_sparse_encode(&bad, FERRY_F32, x.data(), x.size(), out.data(), out.size(), &written, nullptr) ==
          FERRY_ERR_INVALID_ARGUMENT);
    CHECK_THAT(ferry_last_error(), Catch::Contains("need 1 <= k <= chunk"));
  }
  CHECK(ferry_sparse_encode(&spec, FERRY_I32, x.data(), x.size(), out.data(), out.size(), &written, nullptr) ==
        FERRY_ERR_INVALID_ARGUMENT);
  CHECK_THAT(ferry_last_error(), Catch::Contains("FERRY_F32, FERRY_BF16 or FERRY_F16"));
  CHECK(ferry_sparse_encode(&spec, FERRY_F32, x.data(), x.size(), out.data(), capacity - 1, &written, nullptr) ==
        FERRY_ERR_INVALID_ARGUMENT);
  CHECK_THAT(ferry_last_error(), Catch::Contains("capacity"));
  CHECK(ferry_sparse_encode(&spec, FERRY_F32, nullptr, x.size(), out.data(), out.size(), &written, nullptr) ==
        FERRY_ERR_INVALID_ARGUMENT);
  CHECK_THAT(ferry_last_error(), Catch::Contains("x is NULL"));
  CHECK(ferry_sparse_encode(&spec, FERRY_F32, x.data(), x.size(), nullptr, out.size(), &written, nullptr) ==
        FERRY_ERR_INVALID_ARGUMENT);
  CHECK(written == 7);

  REQUIRE(ferry_sparse_encode(&spec, FERRY_F32, x.data(), x.size(), out.data(), out.size(), &written, nullptr) ==
          FERRY_OK);
  const void* parts[3] = {out.data(), nullptr, out.data()};
  size_t sizes[3] = {written, 0, written - 1};  // rank 2's is one byte short
  std::vector<float> sum(x.size(), 42.0f);
  CHECK(ferry_sparse_decode_sum(parts, sizes, 3, sum.data(), sum.size()) == FERRY_ERR_PROTOCOL);
  CHECK_THAT(ferry_last_error(), Catch::StartsWith("rank 2: "));
  CHECK(sum == std::vector<float>(x.size(), 42.0f));
  CHECK(ferry_sparse_decode_sum(parts, sizes, 2, sum.data(), sum.size() + 1) == FERRY_ERR_PROTOCOL);
  CHECK_THAT(ferry_last_error(), Catch::Contains("count 200 where 201 was expected"));
  sizes[1] = 5;
  CHECK(ferry_sparse_decode_sum(parts, sizes, 2, sum.data(), sum.size()) == FERRY_ERR_INVALID_ARGUMENT);
  CHECK_THAT(ferry_last_error(), Catch::Contains("parts[1] is NULL"));
  CHECK(ferry_sparse_decode_sum(nullptr, sizes, 1, sum.data(), sum.size()) == FERRY_ERR_INVALID_ARGUMENT);
  CHECK(ferry_sparse_decode_sum(parts, sizes, 1, nullptr, sum.size()) == FERRY_ERR_INVALID_ARGUMENT);
  CHECK(ferry_sparse_decode_sum(nullptr, nullptr, 0, sum.data(), sum.size()) == FERRY_OK);  // nobody: zeros
  CHECK(sum == std::vector<float>(x.size(), 0.0f));

  CHECK(ferry_sparse_k_for_density(4096, 0.02) == 82);
  CHECK(ferry_sparse_k_for_density(4096, 1e-9) == 1);
  CHECK(ferry_sparse_k_for_density(4096, 0.0) == 0);
  CHECK(ferry_sparse_k_for_density(4096, 1.5) == 0);
  CHECK(ferry_sparse_k_for_density(0, 0.5) == 0);
  CHECK(ferry_sparse_k_for_density(65537, 0.5) == 0);
  ferry_sparse_spec defaults;
  ferry_sparse_spec_init(&defaults);
  CHECK(defaults.struct_size == sizeof(ferry_sparse_spec));
  CHECK(defaults.chunk == 4096);
  CHECK(defaults.k == 82);
  CHECK(defaults.bits == 2);
}
