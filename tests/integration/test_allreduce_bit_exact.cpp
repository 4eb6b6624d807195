// Bit-exactness across versions. Peers agreeing with each other is tested
// everywhere; these tests pin what they agree on, so that a change to the
// reduction order (ring_plan.h) or to a codec's rounding (core/quant.h) fails
// here even when every peer changes alike: an old and a new build in one ring
// would disagree.
#include <catch2/catch.hpp>

#include <cmath>
#include <cstring>
#include <vector>

#include "core/hash.h"
#include "harness.h"

using namespace ferry::test;

namespace {

uint64_t splitmix64(uint64_t& state) {
  uint64_t z = (state += 0x9E3779B97F4A7C15ULL);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ULL;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBULL;
  return z ^ (z >> 31);
}

// The same bits on every platform (the standard leaves std::*_distribution's
// output open): ±m * 2^e with a 24-bit m and e in -8..7, exact in f32. The
// spread of magnitudes makes a sum depend on the order of its operands.
std::vector<float> golden_input(size_t rank, size_t count) {
  uint64_t state = 0xF3221 + rank;
  std::vector<float> out(count);
  for (float& x : out) {
    uint64_t bits = splitmix64(state);
    float m = static_cast<float>(bits >> 40) / 16777216.0f;
    int e = static_cast<int>(bits & 15) - 8;
    x = std::ldexp((bits & 16) ? -m : m, e);
  }
  return out;
}

}  // namespace

TEST_CASE("bit-exact: a 3-peer f32 sum hashes to its pinned value, raw and through every codec",
          "[allreduce][quant][golden]") {
  // 3 x 2000 elements: 8000-byte segments, one chunk each at any connection
  // count (RingPlan stripes a segment over lanes only past kMinChunkBytes per
  // chunk), so quant blocks, which restart at every chunk, fall in the same
  // places and one golden holds for every connection count.
  // Nor may the transport matter: shared-memory lanes decode quantized payloads in place.
  const uint32_t connections = GENERATE(1u, 3u);
  const Wire wire = GENERATE(Wire::plain, Wire::shm);
  CAPTURE(connections, wire_name(wire));
  WireScope scope(wire);
  const size_t peers = 3, count = 6000;
  struct Golden {
    ferry_quant quant;
    uint64_t hash;  // ferry::hash_bytes (XXH3-64) of the f32 result
  };
  // Never regenerate these to make a change pass: a new value means old and
  // new builds give different bits for the same all-reduce.
  const std::vector<Golden> goldens = {
      {FERRY_QUANT_NONE, 0x558c9d6cdbf4951eULL},
      {FERRY_QUANT_U8, 0xe31c554c03670950ULL},
      {FERRY_QUANT_I8, 0xe31c554c03670950ULL},  // u8's codes with the top bit flipped: the same values
      {FERRY_QUANT_U4, 0xed0aeaf1e5c71abcULL},
      {FERRY_QUANT_F16, 0xd757810a155c5943ULL},
      {FERRY_QUANT_BF16, 0x184551d04a74c1ebULL},
  };
  EmbeddedMaster master;
  std::vector<std::vector<uint64_t>> hashes(peers, std::vector<uint64_t>(goldens.size()));
  auto results = run_peers(peers, [&](size_t) {
    PeerSettings settings;
    settings.connections = connections;
    ferry_comm* comm = create_peer(master.address(), settings);
    grow_group(comm, static_cast<int64_t>(peers));
    size_t rank = static_cast<size_t>(attribute(comm, FERRY_ATTR_RANK));
    for (size_t g = 0; g < goldens.size(); ++g) {
      std::vector<float> data = golden_input(rank, count);
      auto desc = allreduce_desc(FERRY_F32, FERRY_OP_SUM, goldens[g].quant, g);
      must(ferry_allreduce(comm, data.data(), data.data(), count, &desc, nullptr), "ferry_allreduce");
      hashes[rank][g] = ferry::hash_bytes(data.data(), data.size() * sizeof(float));
    }
    ferry_comm_destroy(comm);
  });
  REQUIRE(failures(results) == "");
  for (size_t g = 0; g < goldens.size(); ++g) {
    INFO("ferry_quant " << goldens[g].quant << ": got 0x" << std::hex << hashes[0][g]);
    for (size_t r = 0; r < peers; ++r) CHECK(hashes[r][g] == goldens[g].hash);
  }
}

TEST_CASE("bit-exact: each segment is summed in ring_plan.h's order, starting at the rank it is named after",
          "[allreduce][order]") {
  // Inputs where f32 addition is far from associative: 2^24 + 1 rounds back to
  // 2^24, so each segment's value tells which operands were added first.
  // Three peers: segment 0 is ((x0+x1)+x2) = 0, segment 1 ((x1+x2)+x0) = 1,
  // segment 2 ((x2+x0)+x1) = 1; the ring run the other way would give 1, 0, 1.
  const size_t peers = GENERATE(3, 4);
  CAPTURE(peers);
  const float big = 16777216.0f;
  const std::vector<float> x = peers == 3 ? std::vector<float>{big, 1, -big} : std::vector<float>{big, 1, -big, 1};
  std::vector<float> want(peers);
  for (size_t seg = 0; seg < peers; ++seg) {
    float acc = x[seg];
    for (size_t k = 1; k < peers; ++k) acc += x[(seg + k) % peers];
    want[seg] = acc;
  }
  if (peers == 3) REQUIRE(want == std::vector<float>{0, 1, 1});
  if (peers == 4) REQUIRE(want == std::vector<float>{1, 2, 2, 0});

  const size_t per_segment = 16, count = peers * per_segment;  // equal segments
  EmbeddedMaster master;
  std::vector<std::vector<float>> out(peers);
  auto results = run_peers(peers, [&](size_t) {
    ferry_comm* comm = create_peer(master.address());
    grow_group(comm, static_cast<int64_t>(peers));
    size_t rank = static_cast<size_t>(attribute(comm, FERRY_ATTR_RANK));
    std::vector<float> data(count, x[rank]);
    auto desc = allreduce_desc(FERRY_F32, FERRY_OP_SUM, FERRY_QUANT_NONE, 0);
    must(ferry_allreduce(comm, data.data(), data.data(), count, &desc, nullptr), "ferry_allreduce");
    out[rank] = data;
    ferry_comm_destroy(comm);
  });
  REQUIRE(failures(results) == "");
  for (size_t r = 0; r < peers; ++r)
    for (size_t i = 0; i < count; ++i) {
      INFO("rank " << r << ", element " << i << " (segment " << i / per_segment << ")");
      REQUIRE(out[r][i] == want[i / per_segment]);
    }
}
