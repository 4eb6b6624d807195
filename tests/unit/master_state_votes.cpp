// The master's rules for votes and pending queries: decided once all are in, held for a larger
// world, and compared with the collectives members began (master_votes.cpp).
#include <catch2/catch.hpp>

#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "master_state_fixture.h"

using namespace ferry;
using namespace ferry::master;
using namespace ferry::wire;

using namespace ferry::master::testing;

TEST_CASE("master: a vote that changes nothing keeps the ring but restarts the collective numbering",
          "[master]") {
  Fixture f;
  f.ring_of(2);
  uint64_t epoch = f.state.epoch(0);
  // A collective fails; before the vote, peer 1 issued one more collective than peer 2 (each
  // stops issuing at its own sight of the failure).
  f.all_begin(epoch, 0, 2);
  f.state.on_message(2, CollectiveEnd{epoch, 0, static_cast<uint32_t>(Errc::timeout), "no progress"});
  f.state.on_message(1, begin(epoch, 1));
  f.state.on_message(1, TopologyVote{});
  f.step();
  CHECK(f.sent<CallRefused>().empty());
  CHECK(f.sent<TopologyDone>().empty());  // waits for every member
  CHECK(f.step().sends.empty());  // waits for every member
  f.state.on_message(2, TopologyVote{});
  f.step();
  CHECK(f.sent<Topology>().empty());  // no new ring: the links stay up
  auto done = f.sent<TopologyDone>();
  REQUIRE(done.size() == 2);
  uint64_t renewed = done[0].second.epoch;
  CHECK(renewed > epoch);
  // Numbering starts again at 0 in the renewed epoch, and the stale begin is forgotten.
  f.state.on_message(1, begin(renewed, 0));
  f.state.on_message(2, begin(renewed, 0));
  f.step();
  CHECK(f.sent<CollectiveGo>().size() == 2);
  f.state.on_message(2, begin(epoch, 2));
  f.step();
  REQUIRE(f.sent<CollectiveResult>().size() == 1);
  CHECK(f.sent<CollectiveResult>()[0].second.code == static_cast<uint32_t>(Errc::peer_lost));
}

TEST_CASE("master: a vote or pending query where another member began a collective fails both as a mismatch",
          "[master]") {
  Fixture f;
  f.ring_of(2);
  uint64_t e = f.state.epoch(0);
  auto expect_mismatch = [&](const char* call) {
    auto refused = f.sent<CallRefused>();
    REQUIRE(refused.size() == 1);
    CHECK(refused[0].first == 2);
    CHECK(refused[0].second.code == static_cast<uint32_t>(Errc::mismatch));
    auto aborted = f.sent<CollectiveResult>();
    REQUIRE(aborted.size() == 1);
    CHECK(aborted[0].first == 1);
    CHECK(aborted[0].second.code == static_cast<uint32_t>(Errc::mismatch));
    for (const std::string& why : {refused[0].second.reason, aborted[0].second.reason})
      CHECK_THAT(why, Catch::Contains(std::string("rank 1 (peer ")) && Catch::Contains(std::string("called ") + call) &&
                          Catch::Contains("rank 0 (peer ") && Catch::Contains("called all_reduce(count 10, f32") &&
                          Catch::Contains("same calls in the same order"));
  };
  SECTION("the collective first, then the vote") {
    f.state.on_message(1, begin(e, 0));
    f.state.on_message(2, TopologyVote{});
    f.step();
    expect_mismatch("ferry_update_topology");
  }
  SECTION("the held vote first (different expected world sizes), then the collective") {
    f.state.on_message(2, TopologyVote{0, 0, 3, 60'000});
    CHECK(f.step().sends.empty());
    f.state.on_message(1, begin(e, 0));
    f.step();
    expect_mismatch("ferry_wait_for_world");
  }
  SECTION("a pending query, then the collective") {
    f.state.on_message(2, PendingQuery{});
    f.step();
    f.state.on_message(1, begin(e, 0));
    f.step();
    expect_mismatch("ferry_peers_pending");
  }
  // Both carry on: the next vote of both is counted.
  f.state.on_message(1, TopologyVote{});
  f.state.on_message(2, TopologyVote{});
  f.step();
  CHECK(f.sent<TopologyDone>().size() == 2);
  CHECK(f.sent<CallRefused>().empty());
}

TEST_CASE("master: a member that queries after beginning its collective is ahead, not out of order", "[master]") {
  Fixture f;
  f.ring_of(2);
  uint64_t e = f.state.epoch(0);
  f.state.on_message(2, begin(e, 0));
  f.state.on_message(2, PendingQuery{});  // its next call, issued async before the wait
  f.state.on_message(1, begin(e, 0));
  f.step();
  CHECK(f.sent<CallRefused>().empty());
  CHECK(f.sent<CollectiveGo>().size() == 2);
}

TEST_CASE("master: a voter whose links failed gets the ring rebuilt", "[master]") {
  Fixture f;
  f.ring_of(2);
  f.state.on_message(1, TopologyVote{1});
  f.state.on_message(2, TopologyVote{0});
  f.step();
  auto proposals = f.sent<Topology>();
  REQUIRE(proposals.size() == 2);
  CHECK(proposals[0].second.ring.size() == 2);
}

TEST_CASE("master: pending counts reach every accepted member alike, once all asked", "[master]") {
  Fixture f;
  f.ring_of(2);
  f.join(3);
  f.state.on_message(1, PendingQuery{});
  CHECK(f.step().sends.empty());
  f.state.on_message(2, PendingQuery{});
  f.step();
  auto counts = f.sent<PendingCount>();
  REQUIRE(counts.size() == 2);
  CHECK(counts[0].second.pending == 1);
  CHECK(counts[1].second.pending == 1);
}

TEST_CASE("master: a vote asking for a larger world is held until enough newcomers wait, or until its hold ends",
          "[master][vote]") {
  Fixture f;
  f.ring_of(2);
  const uint64_t epoch = f.state.epoch(0);
  SECTION("the newcomer's hello decides it") {
    f.state.on_message(1, TopologyVote{0, 0, 3, 60000});
    f.state.on_message(2, TopologyVote{0, 0, 3, 60000});
    f.step();
    CHECK(f.sent<Topology>().empty());
    CHECK(f.sent<TopologyDone>().empty());
    f.now_ms += 30000;
    f.state.on_tick(f.now_ms);
    f.step();
    CHECK(f.sent<Topology>().empty());  // still within the hold
    f.join(3);
    CHECK(f.sent<Topology>().size() == 3);  // proposed with the newcomer
    f.all_ready();
    CHECK(f.state.ring(0).size() == 3);
  }
  SECTION("the hold's end decides it, with whoever is there") {
    f.state.on_message(1, TopologyVote{0, 0, 3, 2000});
    f.state.on_message(2, TopologyVote{0, 0, 3, 2000});
    f.step();
    f.now_ms += 1000;
    f.state.on_tick(f.now_ms);
    f.step();
    CHECK(f.sent<TopologyDone>().empty());
    f.now_ms += 1500;
    f.state.on_tick(f.now_ms);
    f.step();
    CHECK(f.sent<TopologyDone>().size() == 2);  // the ring of two, renewed
    CHECK(f.state.epoch(0) > epoch);
  }
  SECTION("a plain vote beside it allows no wait") {
    f.state.on_message(1, TopologyVote{0, 0, 3, 60000});
    f.state.on_message(2, TopologyVote{});
    f.step();
    CHECK(f.sent<TopologyDone>().size() == 2);
  }
  SECTION("the group already that large decides at once") {
    f.state.on_message(1, TopologyVote{0, 0, 2, 60000});
    f.state.on_message(2, TopologyVote{0, 0, 2, 60000});
    f.step();
    CHECK(f.sent<TopologyDone>().size() == 2);
  }
}
