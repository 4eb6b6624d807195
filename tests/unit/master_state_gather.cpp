// The master's rules for an all-gather: the members' sizes may differ (they
// are exchanged, in ring order, in the gather_go every member gets), while
// the tag and the kind must match (master_collectives.cpp).
#include <catch2/catch.hpp>

#include <algorithm>
#include <vector>

#include "master_state_fixture.h"

using namespace ferry;
using namespace ferry::master;
using namespace ferry::wire;
using namespace ferry::master::testing;

namespace {

CollectiveBegin gather_begin(uint64_t epoch, uint32_t seq, uint64_t bytes, uint64_t tag = 0) {
  return CollectiveBegin{.epoch = epoch,
                         .seq = seq,
                         .kind = static_cast<uint8_t>(CollectiveKind::all_gather),
                         .tag = tag,
                         .count = bytes};
}

}  // namespace

TEST_CASE("master: an all-gather of different sizes goes with every size, the same list for every member",
          "[master][all_gather]") {
  Fixture f;
  f.ring_of(3);
  const uint64_t e = f.state.epoch(0);
  const std::vector<uint64_t> bytes{7, 0, 1u << 20};
  for (ConnId c = 1; c <= 3; ++c) f.state.on_message(c, gather_begin(e, 0, bytes[c - 1], 9));
  f.step();
  CHECK(f.sent<CollectiveGo>().empty());
  auto gos = f.sent<GatherGo>();
  REQUIRE(gos.size() == 3);
  for (auto& [conn, go] : gos) {
    CHECK(go.epoch == e);
    CHECK(go.seq == 0);
    CHECK(go.sizes == gos[0].second.sizes);
  }
  auto sorted = gos[0].second.sizes, want = bytes;
  std::sort(sorted.begin(), sorted.end());
  std::sort(want.begin(), want.end());
  CHECK(sorted == want);
  for (ConnId c = 1; c <= 3; ++c) f.state.on_message(c, CollectiveEnd{e, 0, 0, ""});
  f.step();
  auto results = f.sent<CollectiveResult>();
  REQUIRE(results.size() == 3);
  for (auto& [conn, r] : results) CHECK(r.code == 0);
}

TEST_CASE("master: an all-gather whose tags differ, or met by an all-reduce, aborts for every member",
          "[master][all_gather][mismatch]") {
  Fixture f;
  f.ring_of(2);
  const uint64_t e = f.state.epoch(0);
  SECTION("tags") {
    f.state.on_message(1, gather_begin(e, 0, 4, 1));
    f.state.on_message(2, gather_begin(e, 0, 4, 2));
  }
  SECTION("kinds") {
    f.state.on_message(1, gather_begin(e, 0, 4));
    f.state.on_message(2, begin(e, 0, 4));
  }
  f.step();
  CHECK(f.sent<GatherGo>().empty());
  auto results = f.sent<CollectiveResult>();
  REQUIRE(results.size() == 2);
  for (auto& [conn, r] : results) {
    CHECK(r.code == static_cast<uint32_t>(Errc::mismatch));
    CHECK_THAT(r.reason, Catch::Contains("all_gather"));
  }
}
