// A master started again: groups rebuilt from their members' resume hellos (master_resume.cpp).
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

TEST_CASE("master: started again, it rebuilds a group from resume hellos: ids, ring order and revision kept, the "
          "vote held until all are back",
          "[master][resume]") {
  Fixture f;
  Hello first = resume_hello(f, 1, 7, 12, {9, 7, 8});
  first.resume_revision = 4;  // revision 3
  CHECK(f.say(1, first) == 7);
  CHECK(f.state.ring(0) == std::vector<PeerId>{7});
  CHECK(f.state.epoch(0) == 12);
  CHECK(f.state.ring_broken(0));
  // A collective waits for the vote; the vote waits for the others.
  f.state.on_message(1, begin(12, 0));
  f.state.on_message(1, TopologyVote{});
  f.step();
  REQUIRE(f.sent<CollectiveResult>().size() == 1);
  CHECK(f.sent<CollectiveResult>()[0].second.code == static_cast<uint32_t>(Errc::peer_lost));
  CHECK(f.sent<Topology>().empty());
  CHECK(f.say(2, resume_hello(f, 2, 8, 12, {9, 7, 8})) == 8);
  CHECK(f.say(3, resume_hello(f, 3, 9, 12, {9, 7, 8})) == 9);
  CHECK(f.state.ring(0) == std::vector<PeerId>{9, 7, 8});
  CHECK(f.sent<Topology>().empty());
  f.state.on_message(2, TopologyVote{});
  f.state.on_message(3, TopologyVote{});
  f.step();
  REQUIRE(f.sent<Topology>().size() == 3);
  uint64_t epoch = f.all_ready();
  CHECK(epoch > 12);
  CHECK(f.state.ring(0) == std::vector<PeerId>{9, 7, 8});
  CHECK_FALSE(f.state.ring_broken(0));
  CHECK(f.state.shared_revision(0) == 3);
  // Ids go on above the ones taken back; a later resume is refused: the group committed a ring here.
  CHECK(f.join(4) == 10);
  CHECK(f.say(5, resume_hello(f, 5, 11, 12, {9, 7, 8, 11})) == 0);
  CHECK(f.kick_of(5).reason.find("did not restart") != std::string::npos);
}

TEST_CASE("master: started again, it commits an awaited collective some member saw committed, and aborts the rest",
          "[master][resume]") {
  Fixture f;
  f.say(1, resume_hello(f, 1, 1, 5, {1, 2}, {2, 3}, {}));
  CHECK(f.sent<CollectiveResult>().empty());  // not settled: member 2 may know more
  f.say(2, resume_hello(f, 2, 2, 5, {1, 2}, {}, {3, 4}));
  auto results = f.sent<CollectiveResult>();
  REQUIRE(results.size() == 2);
  for (auto& [conn, r] : results) {
    CHECK(conn == 2);
    CHECK(r.epoch == 5);
    CHECK(r.code == (r.seq == 3 ? 0u : static_cast<uint32_t>(Errc::peer_lost)));
  }
}

TEST_CASE("master: started again, a group settles without members that stay away, and refuses them after",
          "[master][resume]") {
  Fixture f;
  f.say(1, resume_hello(f, 1, 1, 5, {1, 2, 3}, {}, {0}));
  f.say(2, resume_hello(f, 2, 2, 5, {1, 2, 3}));
  f.state.on_message(1, TopologyVote{});
  f.state.on_message(2, TopologyVote{});
  f.now_ms += 9'000;
  f.state.on_tick(f.now_ms);
  f.step();
  CHECK(f.sent<Topology>().empty());
  f.now_ms += 2'000;
  f.state.on_tick(f.now_ms);
  f.step();
  REQUIRE(f.sent<CollectiveResult>().size() == 1);  // nobody saw 0 committed
  CHECK(f.sent<CollectiveResult>()[0].second.code == static_cast<uint32_t>(Errc::peer_lost));
  REQUIRE(f.sent<Topology>().size() == 2);
  CHECK(f.sent<Topology>()[0].second.ring.size() == 2);
  CHECK(f.say(3, resume_hello(f, 3, 3, 5, {1, 2, 3})) == 0);
  CHECK(f.kick_of(3).reason.find("rebuilt without it") != std::string::npos);
}

TEST_CASE("master: started again, newcomers that formed the group before the old members came back keep their place",
          "[master][resume]") {
  Fixture f;
  const PeerId newcomer = f.join(1);  // a ring of one at once, at this master's first epoch
  f.all_ready();
  REQUIRE(f.state.epoch(0) < 12);
  f.state.on_message(1, begin(f.state.epoch(0), 0));
  f.step();
  CHECK(f.say(2, resume_hello(f, 2, 7, 12, {7, 8})) == 7);
  CHECK(f.state.ring(0) == std::vector<PeerId>{7, newcomer});
  CHECK(f.state.epoch(0) == 12);
  REQUIRE(f.sent<CollectiveResult>().size() == 1);  // the newcomer's collective of the old epoch aborts
  CHECK(f.sent<CollectiveResult>()[0].second.code == static_cast<uint32_t>(Errc::peer_lost));
  f.state.on_message(1, TopologyVote{});
  f.state.on_message(2, TopologyVote{});
  f.step();
  CHECK(f.sent<Topology>().empty());  // member 8 is not back yet
  CHECK(f.say(3, resume_hello(f, 3, 8, 12, {7, 8})) == 8);
  f.state.on_message(3, TopologyVote{});
  f.step();
  REQUIRE(f.sent<Topology>().size() == 3);
  f.all_ready();
  CHECK(f.state.ring(0).size() == 3);
  CHECK(f.state.epoch(0) > 12);
}

TEST_CASE("master: started again, the highest epoch reported is the group: members of older rings only are refused",
          "[master][resume]") {
  Fixture f;
  // Member 3 left at epoch 6; it still reports epoch 5's ring.
  SECTION("the stale member first: it goes when the later ring arrives") {
    CHECK(f.say(3, resume_hello(f, 3, 3, 5, {1, 2, 3})) == 3);
    CHECK(f.say(1, resume_hello(f, 1, 1, 6, {1, 2})) == 1);
    CHECK(f.closed(3));
    CHECK(f.kick_of(3).reason.find("epoch 6") != std::string::npos);
  }
  SECTION("the stale member last: refused at once") {
    CHECK(f.say(1, resume_hello(f, 1, 1, 6, {1, 2})) == 1);
    CHECK(f.say(3, resume_hello(f, 3, 3, 5, {1, 2, 3})) == 0);
  }
  // A member of epoch 6 still at epoch 5 (the commit did not reach it) keeps its place.
  CHECK(f.say(2, resume_hello(f, 2, 2, 5, {1, 2, 3})) == 2);
  CHECK(f.state.ring(0) == std::vector<PeerId>{1, 2});
  CHECK(f.state.epoch(0) == 6);
  // An id that is connected, a ring without the sender, or one naming a member twice, is refused.
  CHECK(f.say(4, resume_hello(f, 4, 2, 6, {1, 2})) == 0);
  CHECK(f.say(5, resume_hello(f, 5, 9, 6, {1, 2})) == 0);
  CHECK(f.say(6, resume_hello(f, 6, 7, 7, {1, 2, 7, 7})) == 0);  // a later ring would be the group
  CHECK(f.kick_of(6).reason.find("twice") != std::string::npos);
  CHECK(f.state.ring(0) == std::vector<PeerId>{1, 2});
  CHECK(f.state.epoch(0) == 6);
}
