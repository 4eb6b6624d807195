// The master's rules, fed message by message: no sockets, and a clock only when a test moves it.
#include <catch2/catch.hpp>

#include <memory>
#include <set>
#include <sstream>
#include <tuple>

#include <spdlog/logger.h>
#include <spdlog/sinks/ostream_sink.h>

#include "core/log.h"
#include "master/master_state.h"
#include "master_fixture.h"
#include "wire/frame.h"

using namespace ferry;
using namespace ferry::master;
using namespace ferry::wire;

using namespace ferry::master::testing;

TEST_CASE("master: the first peer of a group is admitted at once, the next waits for a vote", "[master]") {
  Fixture f;
  f.join(1);
  auto proposals = f.sent<Topology>();
  REQUIRE(proposals.size() == 1);
  CHECK(proposals[0].second.ring.size() == 1);
  CHECK(proposals[0].second.ring[0].host == "10.0.0.1");  // no advertised host: what the master saw
  f.all_ready();
  CHECK(f.state.ring(0).size() == 1);

  f.join(2);
  CHECK(f.sent<Topology>().empty());  // peer 2 waits: group 0 has an accepted member
  CHECK(f.state.pending(0).size() == 1);
  f.state.on_message(1, TopologyVote{});
  f.step();
  auto second = f.sent<Topology>();
  REQUIRE(second.size() == 2);
  CHECK(second[0].second.ring.size() == 2);
  CHECK(second[0].second.p2p_connections == 2);
  uint64_t epoch = f.all_ready();
  CHECK(f.state.epoch(0) == epoch);
  CHECK(f.state.pending(0).empty());
  auto done = f.sent<TopologyDone>();
  CHECK(done[0].second.global_world == 2);
  CHECK(done[0].second.num_groups == 1);
}

TEST_CASE("master: a peer is offered at the address it was seen at, then at its addresses of the other family",
          "[master][address]") {
  Fixture f;
  // Seen over IPv4; it also listens at two IPv6 addresses, one IPv4 one, and sends a name.
  f.hello(1, 0, "192.0.2.1", {"192.0.2.1", "2001:db8::1", "10.1.1.1", "fd00::1", "evil.example"});
  auto proposals = f.sent<Topology>();
  REQUIRE(proposals.size() == 1);
  const RingMember& seen_v4 = proposals[0].second.ring[0];
  CHECK(seen_v4.host == "192.0.2.1");
  CHECK(seen_v4.other_hosts == std::vector<std::string>{"2001:db8::1", "fd00::1"});
  f.all_ready();

  // Seen over IPv6: its IPv4 address is the other one.
  f.hello(2, 0, "2001:db8::2", {"192.0.2.2", "2001:db8::2"});
  f.state.on_message(1, TopologyVote{});
  f.step();
  auto second = f.sent<Topology>();
  REQUIRE(second.size() == 2);
  REQUIRE(second[0].second.ring.size() == 2);
  CHECK(second[0].second.ring[0] == seen_v4);
  CHECK(second[0].second.ring[1].host == "2001:db8::2");
  CHECK(second[0].second.ring[1].other_hosts == std::vector<std::string>{"192.0.2.2"});
}

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

TEST_CASE("master: collectives go when all began alike and commit when all ended", "[master]") {
  Fixture f;
  f.ring_of(3);
  uint64_t e = f.state.epoch(0);
  f.state.on_message(1, begin(e, 0));
  f.state.on_message(2, begin(e, 0));
  CHECK(f.step().sends.empty());
  f.state.on_message(3, begin(e, 0));
  f.step();
  CHECK(f.sent<CollectiveGo>().size() == 3);
  f.state.on_message(1, CollectiveEnd{e, 0, 0, ""});
  f.state.on_message(2, CollectiveEnd{e, 0, 0, ""});
  CHECK(f.step().sends.empty());
  f.state.on_message(3, CollectiveEnd{e, 0, 0, ""});
  f.step();
  auto results = f.sent<CollectiveResult>();
  REQUIRE(results.size() == 3);
  for (auto& [conn, r] : results) CHECK(r.code == 0);
}

TEST_CASE("master: a member that ended and asks for a late verdict is told who still runs, and nothing aborts",
          "[master]") {
  Fixture f;
  f.ring_of(3);
  uint64_t e = f.state.epoch(0);
  for (ConnId c = 1; c <= 3; ++c) f.state.on_message(c, begin(e, 0));
  f.step();
  f.state.on_message(1, CollectiveEnd{e, 0, 0, ""});
  f.step();
  // Member 1, long done (behind it, a slow link still carries the others' bytes).
  f.state.on_message(1, CollectiveEnd{e, 0, static_cast<uint32_t>(Errc::timeout), "no verdict from the master"});
  f.step();
  CHECK(f.sent<CollectiveResult>().empty());
  auto pending = f.sent<CollectivePending>();
  REQUIRE(pending.size() == 1);
  CHECK(pending[0].first == 1);
  CHECK(pending[0].second.seq == 0);
  CHECK(pending[0].second.waiting_for == std::vector<uint64_t>{2, 3});

  SECTION("the others end: committed for all") {
    f.state.on_message(2, CollectiveEnd{e, 0, 0, ""});
    f.state.on_message(3, CollectiveEnd{e, 0, 0, ""});
    f.step();
    f.expect_verdicts(3, Errc::ok);
  }
  SECTION("a member still running fails: aborted for all, as before") {
    f.state.on_message(2, CollectiveEnd{e, 0, static_cast<uint32_t>(Errc::timeout), "no progress"});
    f.step();
    f.expect_verdicts(3, Errc::timeout);
  }
}

TEST_CASE("master: a disagreement aborts the collective for every member, late ones included", "[master]") {
  Fixture f;
  f.ring_of(3);
  uint64_t e = f.state.epoch(0);
  f.state.on_message(2, begin(e, 0, 10, 1));
  f.state.on_message(1, begin(e, 0, 10, 2));  // lower peer id, other tag
  f.step();
  auto aborted = f.sent<CollectiveResult>();
  REQUIRE(aborted.size() == 2);
  for (auto& [conn, r] : aborted) CHECK(r.code == static_cast<uint32_t>(Errc::mismatch));
  CHECK(aborted[0].second.reason.find("tag") != std::string::npos);
  f.state.on_message(3, begin(e, 0, 10, 1));
  f.step();
  REQUIRE(f.sent<CollectiveResult>().size() == 1);
  CHECK(f.sent<CollectiveResult>()[0].second.code == static_cast<uint32_t>(Errc::mismatch));
  CHECK(f.sent<CollectiveGo>().empty());
}

TEST_CASE("master: a disagreement is told in names: the differing fields, each side's call, ranks and hosts",
          "[master]") {
  Fixture f;
  f.ring_of(2);
  uint64_t e = f.state.epoch(0);
  CollectiveBegin f32_sum = begin(e, 0, 8);
  CollectiveBegin f64_avg = f32_sum;
  f64_avg.dtype = 11;  // f64
  f64_avg.op = 1;      // avg
  f.state.on_message(1, f32_sum);
  f.state.on_message(2, f64_avg);
  f.step();
  auto aborted = f.sent<CollectiveResult>();
  REQUIRE(aborted.size() == 2);
  const std::string& why = aborted[0].second.reason;
  CHECK_THAT(why, Catch::Contains("(dtype f32 vs f64, op sum vs avg)") &&
                      Catch::Contains("called all_reduce(count 8, f32, sum, tag 0, quant none)") &&
                      Catch::Contains("called all_reduce(count 8, f64, avg, tag 0, quant none)") &&
                      Catch::Contains("rank 0 (peer ") && Catch::Contains("rank 1 (peer ") &&
                      Catch::Contains(" at 10.0.0.2)"));
  CHECK_THAT(why, !Catch::Contains("dtype 10"));
}

TEST_CASE("master: a start timeout names the members that never began the collective", "[master]") {
  Fixture f;
  f.ring_of(3);
  uint64_t e = f.state.epoch(0);
  f.state.on_message(1, begin(e, 0));
  f.state.on_message(2, begin(e, 0));
  f.state.on_message(1, CollectiveEnd{e, 0, static_cast<uint32_t>(Errc::timeout),
                                      "the other peers did not start collective 0 within 60000 ms"});
  f.step();
  auto aborted = f.sent<CollectiveResult>();
  REQUIRE(aborted.size() == 2);
  const std::string& why = aborted[0].second.reason;
  CHECK_THAT(why, Catch::StartsWith("rank 0 (peer ") && Catch::Contains("within 60000 ms; not begun by rank 2 (peer "));
  CHECK_THAT(why, !Catch::Contains("rank 1 "));
  f.state.on_message(3, begin(e, 0));  // the late one hears the same
  f.step();
  REQUIRE(f.sent<CollectiveResult>().size() == 1);
  CHECK(f.sent<CollectiveResult>()[0].second.reason == why);
}

TEST_CASE("master: a failed end aborts the collective for everyone", "[master]") {
  Fixture f;
  f.ring_of(2);
  uint64_t e = f.state.epoch(0);
  f.all_begin(e, 0, 2);
  f.state.on_message(1, CollectiveEnd{e, 0, 0, ""});
  f.state.on_message(2, CollectiveEnd{e, 0, static_cast<uint32_t>(Errc::timeout), "no progress"});
  f.step();
  f.expect_verdicts(2, Errc::timeout);
}

// A member whose verdict is late sends end(failure) after its end(ok): while the
// others are members the master says they still run (see above); once it has
// committed, the ask changes nothing.
TEST_CASE("master: a late member's ask after its own ok end aborts nothing, before the commit or after", "[master]") {
  Fixture f;
  f.ring_of(2);
  uint64_t e = f.state.epoch(0);
  f.all_begin(e, 0, 2);
  f.all_begin(e, 1, 2);
  f.state.on_message(1, CollectiveEnd{e, 0, 0, ""});
  f.state.on_message(1, CollectiveEnd{e, 0, static_cast<uint32_t>(Errc::timeout), "no verdict"});
  f.step();
  CHECK(f.sent<CollectiveResult>().empty());
  CHECK(f.sent<CollectivePending>().size() == 1);
  f.state.on_message(2, CollectiveEnd{e, 0, 0, ""});  // the slow member ends: committed
  f.step();
  f.expect_verdicts(2, Errc::ok);

  f.state.on_message(1, CollectiveEnd{e, 1, 0, ""});
  f.state.on_message(2, CollectiveEnd{e, 1, 0, ""});
  f.step();
  f.expect_verdicts(2, Errc::ok);
  f.state.on_message(1, CollectiveEnd{e, 1, static_cast<uint32_t>(Errc::timeout), "no verdict"});
  CHECK(f.step().sends.empty());  // too late: every member already has the commit
  CHECK_FALSE(f.closed(1));
}

TEST_CASE("master: losing a member aborts its collectives and breaks the ring until a new vote", "[master]") {
  Fixture f;
  f.ring_of(3);
  uint64_t e = f.state.epoch(0);
  f.state.on_message(1, begin(e, 0));
  f.state.on_message(2, begin(e, 0));
  f.step();
  f.state.on_disconnected(3, "connection reset");
  f.step();
  auto results = f.sent<CollectiveResult>();
  REQUIRE(results.size() == 2);
  for (auto& [conn, r] : results) CHECK(r.code == static_cast<uint32_t>(Errc::peer_lost));
  CHECK(f.state.ring_broken(0));
  // A new collective on the broken ring is refused at once.
  f.state.on_message(1, begin(e, 1));
  f.step();
  REQUIRE(f.sent<CollectiveResult>().size() == 1);
  CHECK(f.sent<CollectiveResult>()[0].second.code == static_cast<uint32_t>(Errc::peer_lost));
  // The survivors vote a smaller ring.
  f.state.on_message(1, TopologyVote{});
  f.state.on_message(2, TopologyVote{});
  f.step();
  REQUIRE(f.sent<Topology>().size() == 2);
  CHECK(f.sent<Topology>()[0].second.ring.size() == 2);
  f.all_ready();
  CHECK_FALSE(f.state.ring_broken(0));
}

TEST_CASE("master: a sync outlives a lost holder while every member still fetching has another, and no longer",
          "[master][shared]") {
  Fixture f;
  f.ring_of(3);
  uint64_t e = f.state.epoch(0);
  // Conns 1 and 2 hold revision 5 of "w"; conn 3 (revision 0, receive-only) fetches it from both.
  auto sync = [&](ConnId conn, uint64_t revision, uint64_t hash, SyncStrategy strategy) {
    f.state.on_message(conn, SyncBegin{e, 0, revision, static_cast<uint8_t>(strategy), {{"w", 10, 100, hash, 0}}});
  };
  sync(1, 5, 0xA, SyncStrategy::enforce_popular);
  sync(2, 5, 0xA, SyncStrategy::enforce_popular);
  sync(3, 0, 0xC, SyncStrategy::receive_only);
  f.step();
  REQUIRE(f.sent<SyncPlan>().size() == 3);
  SECTION("one holder lost: the sync goes on and commits among the survivors") {
    f.state.on_message(1, CollectiveEnd{e, 0, 0, ""});  // a holder that ended before it died changes nothing
    f.step();
    f.state.on_disconnected(1, "connection reset");
    f.step();
    CHECK(f.sent<CollectiveResult>().empty());
    CHECK(f.state.ring_broken(0));
    f.state.on_message(2, CollectiveEnd{e, 0, 0, ""});
    CHECK(f.step().sends.empty());
    f.state.on_message(3, CollectiveEnd{e, 0, 0, ""});
    f.step();
    f.expect_verdicts(2, Errc::ok);
    CHECK(f.state.shared_revision(0) == 5);
    CHECK(f.state.ring(0).size() == 2);
  }
  SECTION("both holders lost: the fetch cannot finish and the sync aborts") {
    f.state.on_disconnected(1, "connection reset");
    f.step();
    CHECK(f.sent<CollectiveResult>().empty());
    f.state.on_disconnected(2, "connection reset");
    f.step();
    f.expect_verdicts(1, Errc::peer_lost);
    CHECK_FALSE(f.state.shared_revision(0).has_value());
  }
  SECTION("the fetcher done, both holders lost: nobody is left who needs them, and it commits") {
    f.state.on_message(3, CollectiveEnd{e, 0, 0, ""});
    f.step();
    f.state.on_disconnected(1, "connection reset");
    f.state.on_disconnected(2, "connection reset");
    f.step();
    f.expect_verdicts(1, Errc::ok);
    CHECK(f.state.shared_revision(0) == 5);
  }
  SECTION("an all-reduce open beside the sync still aborts") {
    for (ConnId c = 1; c <= 3; ++c) f.state.on_message(c, begin(e, 1));
    f.step();
    f.state.on_disconnected(2, "connection reset");
    f.step();
    auto results = f.sent<CollectiveResult>();
    REQUIRE(results.size() == 2);
    for (auto& [conn, r] : results) CHECK(r.seq == 1);
    f.expect_verdicts(2, Errc::peer_lost);
  }
}

// What a member that lost its master says to the new one (hello.resume_*).
Hello resume_hello(const Fixture& f, ConnId conn, PeerId id, uint64_t epoch, std::vector<PeerId> ring,
                   std::vector<uint32_t> committed = {}, std::vector<uint32_t> awaiting = {}) {
  Hello h = f.hello_of(conn);
  h.resume_peer_id = id;
  h.resume_epoch = epoch;
  h.resume_ring = std::move(ring);
  h.resume_committed = seq_ranges(committed);
  h.resume_awaiting = seq_ranges(awaiting);
  return h;
}

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

TEST_CASE("master: a member lost during a proposal is dropped and the ring proposed again", "[master]") {
  Fixture f;
  f.ring_of(2);
  f.join(3);
  f.state.on_message(1, TopologyVote{});
  f.state.on_message(2, TopologyVote{});
  f.step();
  uint64_t first = f.sent<Topology>()[0].second.epoch;
  f.state.on_disconnected(3, "gone");
  f.step();
  auto again = f.sent<Topology>();
  REQUIRE(again.size() == 2);
  CHECK(again[0].second.epoch > first);
  CHECK(again[0].second.ring.size() == 2);
  // A ready for the superseded proposal changes nothing.
  f.state.on_message(1, TopologyReady{first, 0, 0, ""});
  CHECK(f.step().sends.empty());
}

TEST_CASE("master: a silent joiner its accepted neighbour cannot reach is heard for a grace, then evicted, and the "
          "ring proposed without it",
          "[master]") {
  Fixture f;
  auto [newcomer, epoch] = f.ring_of_two_proposing_a_third();
  f.state.on_message(2, TopologyReady{epoch, static_cast<uint32_t>(Errc::connect), newcomer, "refused"});
  f.step();
  CHECK_FALSE(f.closed(3));  // one report decides nothing while an accepted member has not answered
  f.answer(1, epoch);
  f.step();
  CHECK_FALSE(f.closed(3));  // its answer may show the link down at both ends: a ring without it
  f.now_ms += f.silent_link_ms + 1000 - 1;
  f.state.on_tick(f.now_ms);
  f.step();
  CHECK_FALSE(f.closed(3));
  f.pass_answer_grace();
  CHECK(f.closed(3));  // silent past its grace: it loses to an accepted member
  auto again = f.sent<Topology>();
  REQUIRE(again.size() == 2);
  CHECK(again[0].second.ring.size() == 2);
  // Naming a peer outside the proposal blames the reporter instead.
  f.state.on_message(1, TopologyReady{again[0].second.epoch, 6, 999, "lies"});
  f.step();
  CHECK_FALSE(f.closed(1));
  f.answer(2, again[0].second.epoch);
  f.step();
  CHECK(f.closed(1));
  CHECK_FALSE(f.closed(2));
}

// Found by fuzz_master_state: a peer's reason of the longest legal length,
// quoted in the master's kick, made a kick no peer could decode.
TEST_CASE("master: reasons that quote a peer's longest reason still decode at the peers", "[master][fuzz]") {
  auto decodes = [](const Message& m) {
    auto frame = encode_message(m);
    std::vector<uint8_t> payload(frame.begin() + kFrameHeaderBytes, frame.end());
    return decode_message(static_cast<uint16_t>(message_type(m)), payload).status.ok();
  };
  const std::string longest(kMaxReasonLength, 'r');
  Fixture f;
  auto [newcomer, epoch] = f.ring_of_two_proposing_a_third();
  f.state.on_message(2, TopologyReady{epoch, static_cast<uint32_t>(Errc::connect), newcomer, longest});
  f.answer(1, epoch);
  f.step();
  f.pass_answer_grace();
  REQUIRE(f.closed(3));
  for (auto& c : f.last.closes) {
    REQUIRE(c.last);
    CHECK(decodes(*c.last));
  }
  f.all_ready();
  uint64_t e = f.state.epoch(0);
  f.state.on_message(1, begin(e, 0));
  f.state.on_message(2, begin(e, 0));
  f.step();
  f.state.on_message(1, CollectiveEnd{e, 0, static_cast<uint32_t>(Errc::timeout), longest});
  f.state.on_message(2, CollectiveEnd{e, 0, 0, ""});
  f.step();
  auto results = f.sent<CollectiveResult>();
  REQUIRE(results.size() == 2);
  for (auto& [conn, r] : results) CHECK(decodes(r));
  // A cut keeps UTF-8 whole.
  std::string accents;
  while (accents.size() < 2 * kMaxReasonLength) accents += "\xc3\xa9";
  std::string cut = bounded_reason(accents);
  CHECK(cut.size() <= kMaxReasonLength);
  CHECK(cut.substr(cut.size() - 3) == "...");
  CHECK((cut.size() - 3) % 2 == 0);
}

TEST_CASE("master: protocol violations get the sender kicked, with a reason", "[master]") {
  Fixture f;
  f.state.on_connected(1, "h", Fixture::nonce(1));
  f.state.on_message(1, CollectiveGo{});
  f.step();
  REQUIRE(f.closed(1));
  REQUIRE(f.last.closes[0].last.has_value());
  CHECK(std::get<Kick>(*f.last.closes[0].last).reason.find("expected hello") != std::string::npos);

  f.ring_of(2);
  f.state.on_message(2, Hello{});
  f.step();
  CHECK(f.closed(2));  // a second hello
  PeerId pending = f.join(4);
  (void)pending;
  f.state.on_message(4, TopologyVote{});
  f.step();
  CHECK(f.closed(4));  // votes are for accepted peers only
  CHECK(f.state.connection_count() == 1);
}

TEST_CASE("master: with a run secret, only a valid proof joins, and the master proves back", "[master][auth]") {
  auto secret = RunSecret::from_bytes("0123456789abcdef-secret");
  Fixture f(secret);
  f.state.on_connected(1, "h", Fixture::nonce(1));
  f.step();
  REQUIRE(f.sent<AuthChallenge>().size() == 1);
  CHECK(f.sent<AuthChallenge>()[0].second.required == 1);
  CHECK(f.sent<AuthChallenge>()[0].second.nonce == Fixture::nonce(1));

  std::string peer_nonce(32, 'z');
  Hello good{0, "", 5001, 2, 5000, peer_nonce,
             secret.proof("ferry/1/peer-to-master", Fixture::nonce(1), peer_nonce), 0, {}, 0, 0, {}, 0, {}, {}};
  f.state.on_message(1, good);
  f.step();
  REQUIRE(f.sent<Welcome>().size() == 1);
  CHECK(secret.verify(f.sent<Welcome>()[0].second.proof, "ferry/1/master-to-peer", peer_nonce, Fixture::nonce(1)));

  for (std::string bad_proof : {std::string(), std::string(32, '0'),
                                secret.proof("ferry/1/peer-to-master", Fixture::nonce(9), peer_nonce),  // replayed
                                RunSecret::from_bytes("another secret, 16+ bytes")
                                    .proof("ferry/1/peer-to-master", Fixture::nonce(2), peer_nonce)}) {
    f.state.on_connected(2, "h", Fixture::nonce(2));
    f.step();
    f.state.on_message(2, Hello{0, "", 5002, 2, 5000, peer_nonce, bad_proof, 0, {}, 0, 0, {}, 0, {}, {}});
    f.step();
    REQUIRE(f.closed(2));
    CHECK(std::get<Kick>(*f.last.closes[0].last).code == static_cast<uint32_t>(Errc::auth));
    CHECK(f.sent<Welcome>().empty());
  }
  CHECK(f.state.peer_count() == 1);
}

TEST_CASE("master: peer groups are separate rings with separate epochs", "[master][groups]") {
  Fixture f;
  f.join(1, 5);
  f.all_ready();
  f.join(2, 6);
  f.all_ready();  // an empty group admits its first peer at once, whatever other groups do
  CHECK(f.state.ring(5).size() == 1);
  CHECK(f.state.ring(6).size() == 1);
  CHECK(f.state.epoch(5) != f.state.epoch(6));
  auto done = f.sent<TopologyDone>();
  CHECK(done[0].second.num_groups == 2);
  CHECK(done[0].second.global_world == 2);
}

// --- insiders: accusations, caps, back-off, bounded state (issue 22) ------------------------

namespace {

// Conns 1..n (the accepted ring) vote; returns the epoch of the proposal that follows.
uint64_t vote_in(Fixture& f, ConnId n, uint8_t links_broken = 0) {
  for (ConnId c = 1; c <= n; ++c) f.state.on_message(c, TopologyVote{links_broken});
  f.step();
  auto proposals = f.sent<Topology>();
  REQUIRE_FALSE(proposals.empty());
  return proposals[0].second.epoch;
}

// The ring of the one proposal the last step sent, by conn: what every member got.
std::vector<uint64_t> proposed_ring(const Fixture& f) {
  auto proposals = f.sent<Topology>();
  std::vector<uint64_t> ids;
  if (!proposals.empty())
    for (auto& m : proposals[0].second.ring) ids.push_back(m.peer_id);
  return ids;
}

}  // namespace

TEST_CASE("master: a joiner that falsely names an accepted neighbour unreachable is evicted, nobody else is",
          "[master][insiders]") {
  Fixture f;
  f.ring_of(3);
  PeerId liar = f.join(4);
  uint64_t epoch = vote_in(f, 3);
  // Ring 1 2 3 4: the liar's neighbours are 3 and 1; it blames 1 at once.
  f.answer(4, epoch, 1);
  f.step();
  CHECK(f.last.closes.empty());
  f.answer(1, epoch);
  f.answer(2, epoch);
  f.step();
  CHECK(f.last.closes.empty());  // still waiting for accepted member 3
  f.answer(3, epoch);
  f.step();
  REQUIRE(f.last.closes.size() == 1);
  CHECK(f.closed(4));
  CHECK(f.kick_of(4).reason.find("whose side of their link formed") != std::string::npos);
  CHECK(proposed_ring(f) == std::vector<uint64_t>{1, 2, 3});
  CHECK(f.sent<Topology>().size() == 3);  // one re-proposal
  CHECK(f.state.pending(0).empty());
  (void)liar;

  // Among accepted members the accuser of a ready member goes too.
  uint64_t rebuilt = f.sent<Topology>()[0].second.epoch;
  f.answer(3, rebuilt, 1);
  f.answer(1, rebuilt);
  f.answer(2, rebuilt);
  f.step();
  CHECK(f.closed(3));
  CHECK_FALSE(f.closed(1));
  CHECK(proposed_ring(f) == std::vector<uint64_t>{1, 2});
}

// Every member of the last proposal answers as a network where `blocked`
// ordered pairs cannot connect would have it: the dialer of a blocked link
// blames its next peer, the far end its previous one (its inbound lane never
// came). Returns the proposal's ring.
std::vector<PeerId> answer_as_network(Fixture& f, const std::set<std::pair<PeerId, PeerId>>& blocked) {
  auto proposals = f.sent<Topology>();
  REQUIRE_FALSE(proposals.empty());
  std::vector<PeerId> ring;
  for (auto& m : proposals[0].second.ring) ring.push_back(m.peer_id);
  const size_t n = ring.size();
  for (size_t i = 0; i < n; ++i) {
    PeerId self = ring[i], next = ring[(i + 1) % n], prev = ring[(i + n - 1) % n];
    PeerId blamed = blocked.count({self, next}) ? next : blocked.count({prev, self}) ? prev : 0;
    f.answer(static_cast<ConnId>(self), proposals[0].second.epoch, blamed);  // conn n joined as peer n
  }
  f.step();
  return ring;
}

bool uses(const std::vector<PeerId>& ring, PeerId from, PeerId to) {
  for (size_t i = 0; i < ring.size(); ++i)
    if (ring[i] == from && ring[(i + 1) % ring.size()] == to) return true;
  return false;
}

TEST_CASE("master: a peer both neighbours cannot reach is evicted, a link down at both ends is routed around",
          "[master][insiders]") {
  SECTION("blamed by both neighbours") {
    Fixture f;
    f.ring_of(3);
    uint64_t epoch = vote_in(f, 3, /*links_broken=*/1);
    f.answer(1, epoch, 2);
    f.answer(3, epoch, 2);
    f.answer(2, epoch, 1);  // it blames one of them back: two voices against one
    f.step();
    REQUIRE(f.last.closes.size() == 1);
    CHECK(f.closed(2));
    CHECK(proposed_ring(f) == std::vector<uint64_t>{1, 3});
  }
  SECTION("a pending peer and an accepted one blame each other: nobody goes, the ring turns around their pair") {
    Fixture f;
    f.ring_of(2);
    f.join(3);
    uint64_t epoch = vote_in(f, 2);
    REQUIRE(proposed_ring(f) == std::vector<uint64_t>{1, 2, 3});
    f.answer(3, epoch, 2);
    f.answer(2, epoch, 3);
    f.answer(1, epoch);
    f.step();
    CHECK(f.last.closes.empty());
    auto ring = proposed_ring(f);
    REQUIRE(ring.size() == 3);
    CHECK_FALSE(uses(ring, 2, 3));
    f.all_ready();
    CHECK(f.state.ring(0).size() == 3);
    CHECK(f.state.link_matrix(0).empty());  // unreachable is not a measurement
  }
  SECTION("two accepted peers blame each other: no ring of two without that link, the newer goes") {
    Fixture f;
    f.ring_of(2);
    uint64_t epoch = vote_in(f, 2, 1);
    f.answer(1, epoch, 2);
    f.answer(2, epoch, 1);
    f.step();
    REQUIRE(f.last.closes.size() == 1);
    CHECK(f.closed(2));
    CHECK(proposed_ring(f) == std::vector<uint64_t>{1});
  }
  SECTION("a joiner nobody can dial: each predecessor is tried, then it waits and the others go on without it") {
    Fixture f;
    f.ring_of(3);
    f.join(4);
    vote_in(f, 3);
    const std::set<std::pair<PeerId, PeerId>> blocked{{1, 4}, {2, 4}, {3, 4}};
    int rounds = 0;
    while (proposed_ring(f).size() == 4 && rounds < 10) {
      answer_as_network(f, blocked);
      ++rounds;
    }
    CHECK(rounds == 3);  // one round per predecessor
    CHECK(f.last.closes.empty());
    CHECK(proposed_ring(f).size() == 3);
    f.all_ready();
    CHECK(f.state.ring(0).size() == 3);
    CHECK(f.state.pending(0) == std::vector<PeerId>{4});  // a newcomer may yet make a ring with it possible
    for (ConnId c = 1; c <= 3; ++c) f.state.on_message(c, TopologyVote{});
    f.step();
    CHECK(f.sent<Topology>().empty());  // no failed round per vote: the ring stands
    CHECK(f.sent<TopologyDone>().size() == 3);
  }
  SECTION("a ring of two one way blocked: the joiner waits, and joins once newcomers make a ring without the pair") {
    Fixture f;
    f.join(1);
    f.all_ready();
    f.join(2);
    f.state.on_message(1, TopologyVote{});
    f.step();
    REQUIRE(proposed_ring(f) == std::vector<uint64_t>{1, 2});
    const std::set<std::pair<PeerId, PeerId>> blocked{{1, 2}};
    answer_as_network(f, blocked);
    CHECK(f.last.closes.empty());
    CHECK(proposed_ring(f) == std::vector<uint64_t>{1});  // which way failed is unknown in a ring of two
    f.all_ready();
    f.join(3);
    f.join(4);
    f.state.on_message(1, TopologyVote{});
    f.step();
    auto ring = answer_as_network(f, blocked);
    CHECK(ring.size() == 4);
    CHECK_FALSE(uses(ring, 1, 2));
    CHECK_FALSE(uses(ring, 2, 1));
    CHECK(f.state.ring(0).size() == 4);
  }
  SECTION("accepted members with no ring among them: the fewest go, saying why") {
    Fixture f;
    f.ring_of(3);
    uint64_t epoch = vote_in(f, 3, 1);
    (void)epoch;
    // Nobody can dial 3 any more: rerouted twice, then it is evicted.
    const std::set<std::pair<PeerId, PeerId>> blocked{{1, 3}, {2, 3}};
    int rounds = 0;
    while (f.last.closes.empty() && rounds < 10) {
      answer_as_network(f, blocked);
      ++rounds;
    }
    CHECK(rounds == 2);
    REQUIRE(f.last.closes.size() == 1);
    CHECK(f.closed(3));
    CHECK_THAT(f.kick_of(3).reason, Catch::Contains("no ring of the group avoids every pair that cannot connect") &&
                                        Catch::Contains("leaving out peer 3 is the fewest"));
    CHECK(proposed_ring(f) == std::vector<uint64_t>{1, 2});
  }
  SECTION("a joiner that cannot dial one accepted peer stays, on a ring without that pair") {
    Fixture f;
    f.ring_of(3);
    f.join(4);
    vote_in(f, 3);
    // Arrival order 1 2 3 4 has 4 dial 1: blocked.
    answer_as_network(f, {{4, 1}});
    for (auto& c : f.last.closes) INFO(c.reason);
    CHECK(f.last.closes.empty());
    auto ring = answer_as_network(f, {{4, 1}});
    CHECK_FALSE(uses(ring, 4, 1));
    CHECK(f.sent<TopologyDone>().size() == 4);
    CHECK(f.state.ring(0).size() == 4);
  }
  SECTION("past max_reroutes failed links evict again: the pending end goes") {
    MasterLimits limits;
    limits.max_reroutes = 0;
    Fixture f(limits);
    f.ring_of(2);
    f.join(3);
    uint64_t epoch = vote_in(f, 2);
    f.answer(3, epoch, 2);
    f.answer(2, epoch, 3);
    f.answer(1, epoch);
    f.step();
    REQUIRE(f.last.closes.size() == 1);
    CHECK(f.closed(3));
  }
}

TEST_CASE("master: a pair that could not connect is tried again after its back-off, doubling while it fails",
          "[master][insiders]") {
  MasterLimits limits;
  limits.unreachable_retry_ms = 1000;
  Fixture f(limits);
  uint64_t now = 1;
  f.state.advance_clock(now);
  f.ring_of(2);
  f.answer_probes = false;
  f.join(3);
  vote_in(f, 2);
  answer_as_network(f, {{2, 3}});
  answer_as_network(f, {{2, 3}});
  // The rerouted ring's links are up: its probes skip 2 -> 3 (known unreachable); answered as measured.
  auto answer_probes = [&](std::set<std::pair<PeerId, PeerId>> blocked) {
    std::set<std::pair<PeerId, PeerId>> asked;
    for (int guard = 0; guard < 8 && !f.sent<ProbeRound>().empty(); ++guard) {
      for (auto& [conn, r] : f.sent<ProbeRound>()) {
        std::vector<LinkEntry> links;
        std::vector<PeerId> unreachable;
        for (auto& t : r.targets) {
          asked.insert({static_cast<PeerId>(conn), t.peer_id});
          if (blocked.count({static_cast<PeerId>(conn), t.peer_id}))
            unreachable.push_back(t.peer_id);
          else
            links.push_back({static_cast<PeerId>(conn), t.peer_id, 0, 25'000'000, 0, 1000, 0, 0, 0, 8});
        }
        f.state.on_message(conn, ProbeDone{r.epoch, r.round, links, unreachable});
      }
      f.step();
    }
    return asked;
  };
  auto asked = answer_probes({{2, 3}});
  CHECK_FALSE(asked.count({2, 3}));
  REQUIRE(f.state.ring(0).size() == 3);
  auto vote = [&] {
    for (ConnId c = 1; c <= 3; ++c) f.state.on_message(c, TopologyVote{});
    f.step();
    return !f.sent<Topology>().empty();  // rebuilt (else renewed)
  };
  now += 900;
  f.state.advance_clock(now);
  CHECK_FALSE(vote());  // within its back-off: nothing to retry
  now += 200;
  f.state.advance_clock(now);
  REQUIRE(vote());  // due: the ring is rebuilt so that the pair is probed once its links are up
  answer_as_network(f, {{2, 3}});
  asked = answer_probes({{2, 3}});  // still blocked: marked again, for 2 s now
  CHECK(asked == std::set<std::pair<PeerId, PeerId>>{{2, 3}});
  now += 1500;
  f.state.advance_clock(now);
  CHECK_FALSE(vote());
  now += 600;
  f.state.advance_clock(now);
  REQUIRE(vote());
  answer_as_network(f, {});
  asked = answer_probes({});  // healed: measured, and its failures forgotten
  CHECK(asked == std::set<std::pair<PeerId, PeerId>>{{2, 3}});
  now += 100'000;
  f.state.advance_clock(now);
  CHECK_FALSE(vote());
}

TEST_CASE("master: every fake joiner of a round is evicted together, and the ring proposed once", "[master][insiders]") {
  const bool fakes_claim_ready = GENERATE(false, true);
  Fixture f;
  f.ring_of(3);
  for (ConnId c = 4; c <= 6; ++c) f.join(c);
  uint64_t epoch = vote_in(f, 3);
  // Ring 1 2 3 4 5 6: 3 cannot finish its handshake with 4, 1 never hears from 6.
  if (fakes_claim_ready)
    for (ConnId c = 4; c <= 6; ++c) f.answer(c, epoch);
  f.answer(2, epoch);
  f.answer(3, epoch, 4);
  f.step();
  CHECK(f.last.closes.empty());
  f.answer(1, epoch, 6);
  f.step();
  if (!fakes_claim_ready) {
    CHECK(f.last.closes.empty());  // the joiners 3 and 1 blamed are heard for a grace
    f.pass_answer_grace();
  }
  INFO("fakes claim ready: " << fakes_claim_ready);
  CHECK(f.last.closes.size() == 3);
  for (ConnId c = 4; c <= 6; ++c) CHECK(f.closed(c));
  CHECK(f.sent<Topology>().size() == 3);
  CHECK(proposed_ring(f) == std::vector<uint64_t>{1, 2, 3});
  f.all_ready();
  CHECK(f.state.ring(0).size() == 3);
}

TEST_CASE("master: joiners are capped per source address and per group", "[master][insiders]") {
  MasterLimits limits;
  limits.max_pending_per_source = 2;
  limits.max_pending_per_group = 3;
  Fixture f(limits);
  f.join(1);
  f.all_ready();
  CHECK(f.hello(2, 0, "10.9.9.9") != 0);
  CHECK(f.hello(3, 0, "10.9.9.9") != 0);
  CHECK(f.hello(4, 0, "10.9.9.9") == 0);
  CHECK(f.kick_of(4).code == static_cast<uint32_t>(Errc::kicked));
  CHECK(f.kick_of(4).reason.find("already wait for admission") != std::string::npos);
  CHECK(f.hello(5, 0, "10.8.8.8") != 0);  // another address still may
  CHECK(f.hello(6, 0, "10.7.7.7") == 0);  // but the group is full
  CHECK(f.kick_of(6).reason.find("peer group 0 already has 3 joiners waiting") != std::string::npos);
  CHECK(f.hello(7, 1, "10.7.7.7") != 0);  // other groups are not
  // Admitted joiners no longer count.
  f.state.on_message(1, TopologyVote{});
  f.step();
  f.all_ready();
  CHECK(f.hello(8, 0, "10.9.9.9") != 0);
}

TEST_CASE("master: a source whose joiner's links failed is refused, doubling, until its back-off ends",
          "[master][insiders]") {
  Fixture f;
  f.silent_link_ms = 0;  // a fake that says nothing of its deadline is not waited for once blamed
  f.state.advance_clock(1'000'000);
  f.ring_of(2);
  ConnId next_conn = 10;
  // Evicts a joiner from 10.6.6.6, as a fake whose port never answers.
  auto evict_fake = [&] {
    ConnId conn = next_conn++;
    REQUIRE(f.hello(conn, 0, "10.6.6.6") != 0);
    uint64_t epoch = vote_in(f, 2);
    f.answer(2, epoch, f.state.pending(0).at(0));
    f.answer(1, epoch);
    f.step();
    REQUIRE(f.closed(conn));
    f.all_ready();
  };
  evict_fake();
  CHECK(f.state.backoff_until("10.6.6.6") == 1'030'000);
  CHECK(f.hello(next_conn++, 0, "10.6.6.6") == 0);
  CHECK(f.kick_of(next_conn - 1).reason.find("may join again in 30 s") != std::string::npos);
  CHECK(f.hello(next_conn++, 0, "10.5.5.5") != 0);  // other addresses are unaffected
  f.state.on_disconnected(next_conn - 1, "bye");
  f.state.advance_clock(1'030'000);
  evict_fake();  // the second eviction doubles it
  CHECK(f.hello(next_conn++, 0, "10.6.6.6") == 0);
  f.state.advance_clock(1'089'999);
  CHECK(f.hello(next_conn++, 0, "10.6.6.6") == 0);
  CHECK(f.kick_of(next_conn - 1).reason.find("again in 1 s") != std::string::npos);
  f.state.advance_clock(1'090'000);
  CHECK(f.state.backoff_until("10.6.6.6") == 0);
  // After an hour without an eviction the address starts over at 30 s.
  f.state.advance_clock(1'090'000 + 3'600'000);
  evict_fake();
  CHECK(f.state.backoff_until("10.6.6.6") == 1'090'000 + 3'600'000 + 30'000);
}

TEST_CASE("master: a group with nobody left is forgotten", "[master][insiders]") {
  Fixture f;
  f.join(1, 5);
  f.all_ready();
  f.join(2, 5);
  f.join(3, 6);
  CHECK(f.state.group_count() == 2);
  f.state.on_disconnected(3, "gone");  // its group never had a ring
  f.state.on_message(1, Leave{});
  CHECK(f.state.group_count() == 1);   // group 5 still has its joiner, proposed alone now
  f.state.on_disconnected(2, "gone");
  f.step();
  CHECK(f.state.group_count() == 0);
}

TEST_CASE("master: a peer holding too many collectives open is kicked, finished ones do not count",
          "[master][insiders]") {
  MasterLimits limits;
  limits.max_open_collectives_per_peer = 4;
  limits.max_open_syncs_per_peer = 1;
  Fixture f(limits);
  f.ring_of(2);
  uint64_t e = f.state.epoch(0);
  for (uint32_t seq = 0; seq < 10; ++seq) {  // all of them finish: never more than one open
    f.all_begin(e, seq, 2);
    f.state.on_message(1, CollectiveEnd{e, seq, 0, ""});
    f.state.on_message(2, CollectiveEnd{e, seq, 0, ""});
    f.step();
  }
  CHECK(f.state.peer_count() == 2);
  SECTION("collectives the others never begin") {
    for (uint32_t seq = 10; seq < 14; ++seq) f.state.on_message(1, begin(e, seq));
    CHECK(f.step().closes.empty());
    f.state.on_message(1, begin(e, 14));
    f.step();
    REQUIRE(f.closed(1));
    CHECK(f.kick_of(1).code == static_cast<uint32_t>(Errc::protocol));
    CHECK(f.kick_of(1).reason.find("more than 4 collectives open") != std::string::npos);
  }
  SECTION("shared-state syncs") {
    SyncBegin sync{e, 10, 0, 0, {}};
    f.state.on_message(2, sync);
    CHECK(f.step().closes.empty());
    sync.seq = 11;
    f.state.on_message(2, sync);
    f.step();
    REQUIRE(f.closed(2));
    CHECK(f.kick_of(2).reason.find("shared-state syncs open") != std::string::npos);
  }
}

TEST_CASE("master: members' link reports make one matrix per group, which every member can query",
          "[master][links]") {
  MasterLimits limits;
  limits.link_max_age_ms = 5000;
  Fixture f(limits);
  f.ring_of(3);
  f.state.advance_clock(1000);
  LinkEntry one_two{1, 2, 0, 100, 90, 50, 1, 1000, 0};
  f.state.on_message(1, LinkReport{{one_two}});
  f.state.on_message(2, LinkReport{{{2, 3, 1, 200, 0, 0, 0, 2000, 0}}});
  f.state.on_message(3, LinkMatrixQuery{42});
  f.step();
  auto answers = f.sent<wire::LinkMatrix>();
  REQUIRE(answers.size() == 1);
  CHECK(answers[0].first == 3);
  CHECK(answers[0].second.request == 42);
  REQUIRE(answers[0].second.links.size() == 2);
  CHECK(answers[0].second.links[0] == one_two);
  CHECK(f.state.link_matrix(1).empty());  // another group's is its own

  // Entries age out.
  f.state.advance_clock(5500);
  f.state.on_message(2, LinkReport{{{2, 3, 1, 300, 0, 0, 0, 3000, 0}}});
  f.state.advance_clock(6500);
  auto aged = f.state.link_matrix(0);
  REQUIRE(aged.size() == 1);
  CHECK(aged[0].goodput_bps == 300);
  CHECK(aged[0].age_ms == 1000);

  // A member that leaves takes its links along; an empty group takes its matrix.
  f.state.on_message(2, Leave{});
  CHECK(f.state.link_matrix(0).empty());
  f.state.on_message(1, Leave{});
  f.state.on_message(3, Leave{});
  CHECK(f.state.group_count() == 0);
}

TEST_CASE("master: link reports of others' links or from peers not yet accepted get the sender kicked",
          "[master][links]") {
  Fixture f;
  f.ring_of(2);
  f.state.on_message(1, LinkReport{{{2, 1, 0, 1, 0, 0, 0, 0, 0}}});
  f.step();
  CHECK(f.kick_of(1).reason.find("sender's links") != std::string::npos);
  f.join(3);  // pending: group 0 has a ring
  f.state.on_message(3, LinkMatrixQuery{1});
  f.step();
  CHECK(f.kick_of(3).reason.find("not accepted") != std::string::npos);
}

TEST_CASE("master: once the links are up, a vote probes the pairs nobody measured, then reorders the ring by its bottleneck",
          "[master][probe]") {
  Fixture f;
  uint64_t epoch = f.three_probing();
  std::set<std::pair<PeerId, PeerId>> probed;
  uint32_t round = 0;
  for (; round < 10; ++round) {
    if (round > 0) f.step();
    auto rounds = f.sent<ProbeRound>();
    if (rounds.empty()) break;
    CHECK(f.sent<TopologyDone>().empty());  // not before the last round's answers
    // Of three peers, one probes one other: a peer never sends and receives in one round.
    REQUIRE(rounds.size() == 2);
    for (auto& [conn, r] : rounds) {
      CHECK(r.epoch == epoch);
      CHECK(r.round == round);
      CHECK(r.targets.size() + r.sources.size() == 1);
      // A collective begun meanwhile is refused: nothing runs while links are probed.
      if (conn == 1) f.state.on_message(conn, CollectiveBegin{epoch - 1, 0, 1, 0, 10, 10, 0});
      PeerId self = static_cast<PeerId>(conn);  // conn n joined as peer n
      std::vector<LinkEntry> links;
      for (auto& t : r.targets) {
        CHECK(t.port == 5000 + t.peer_id);  // the target's p2p endpoint
        probed.insert({self, t.peer_id});
        // 1 -> 2 is slow: the arrival order 1, 2, 3 would run at its pace.
        uint64_t rate = self == 1 && t.peer_id == 2 ? 1'000'000 : 25'000'000 + self;
        links.push_back({self, t.peer_id, 0, rate, 0, 1000, 0, 0, 0, 8});
      }
      f.state.on_message(conn, ProbeDone{epoch, round, links, {}});
    }
  }
  CHECK(round == 6);
  CHECK(f.sent<CollectiveGo>().empty());
  CHECK(probed.size() == 6);
  // The probes call for another order: proposed at once, under a new epoch, with no probes.
  CHECK(f.sent<TopologyDone>().empty());
  auto proposals = f.sent<Topology>();
  REQUIRE(proposals.size() == 3);
  CHECK(proposals[0].second.epoch > epoch);
  std::vector<PeerId> ring;
  for (auto& m : proposals[0].second.ring) ring.push_back(m.peer_id);
  CHECK(ring == std::vector<PeerId>{1, 3, 2});  // every link fast
  f.all_ready();
  CHECK(f.state.ring(0) == ring);
  CHECK(f.state.link_matrix(0).size() == 6);

  // A newcomer: only its own pairs are probed, one at a time (4 sends or hears from one per round).
  f.join(4);
  for (ConnId c = 1; c <= 3; ++c) f.state.on_message(c, TopologyVote{});
  f.step();
  epoch = f.sent<Topology>().at(0).second.epoch;
  for (ConnId c = 1; c <= 4; ++c) f.state.on_message(c, TopologyReady{epoch, 0, 0, ""});
  for (round = 0; round < 6; ++round) {
    f.step();
    auto rounds = f.sent<ProbeRound>();
    REQUIRE(rounds.size() == 2u);  // 4 and the one it probes or that probes it
    for (auto& [conn, r] : rounds) {
      for (auto& t : r.targets) CHECK((conn == 4 || t.peer_id == 4));
      for (PeerId source : r.sources) CHECK((conn == 4 || source == 4));
      std::vector<LinkEntry> links;
      for (auto& t : r.targets) links.push_back({static_cast<PeerId>(conn), t.peer_id, 0, 30'000'000, 0, 1000, 0, 0, 0, 8});
      f.state.on_message(conn, ProbeDone{r.epoch, round, links, {}});
    }
  }
  f.step();
  // No order is 25 % better than the ring with the newcomer appended: it commits.
  CHECK(f.sent<TopologyDone>().size() == 4);
  CHECK(f.state.ring(0) == std::vector<PeerId>{1, 3, 2, 4});
  CHECK(f.state.link_matrix(0).size() == 12);
}

TEST_CASE("master: a vote starts no probe round past its budget: it commits, and a later vote probes the rest",
          "[master][probe]") {
  MasterLimits limits;
  limits.probe_budget_ms = 5'000;
  Fixture f(limits);
  f.state.advance_clock(10);
  uint64_t epoch = f.three_probing();  // 3 peers: 6 pairs, one per round
  auto answer = [&](uint32_t round) {
    for (auto& [conn, r] : f.sent<ProbeRound>()) {
      CHECK(r.round == round);
      std::vector<LinkEntry> links;
      for (auto& t : r.targets)
        links.push_back({static_cast<PeerId>(conn), t.peer_id, 0, 25'000'000, 0, 1000, 0, 0, 0, 8});
      f.state.on_message(conn, ProbeDone{epoch, round, links, {}});
    }
    f.step();
  };
  answer(0);
  REQUIRE_FALSE(f.sent<ProbeRound>().empty());  // 10 ms in: round 1 starts
  f.state.advance_clock(6'000);
  answer(1);
  CHECK(f.sent<ProbeRound>().empty());  // past the budget: no round 2
  CHECK(f.sent<TopologyDone>().size() == 3);
  CHECK(f.state.link_matrix(0).size() == 2);

  // The next proposal (a newcomer's) probes what is left, with the newcomer's pairs.
  f.join(4);
  for (ConnId c = 1; c <= 3; ++c) f.state.on_message(c, TopologyVote{});
  f.step();
  epoch = f.sent<Topology>().at(0).second.epoch;
  for (ConnId c = 1; c <= 4; ++c) f.state.on_message(c, TopologyReady{epoch, 0, 0, ""});
  f.step();
  std::set<std::pair<PeerId, PeerId>> probed;
  for (uint32_t round = 0; round < 20 && !f.sent<ProbeRound>().empty(); ++round) {
    for (auto& [conn, r] : f.sent<ProbeRound>())
      for (auto& t : r.targets) probed.insert({static_cast<PeerId>(conn), t.peer_id});
    answer(round);
  }
  CHECK(probed.size() == 4 + 6);  // 1..3's four left over, 4's six
  CHECK(f.state.link_matrix(0).size() == 12);
}

TEST_CASE("master: a probe answer for links it was not asked about gets the sender kicked, and the rest start over",
          "[master][probe]") {
  Fixture f;
  uint64_t epoch = f.three_probing();
  auto rounds = f.sent<ProbeRound>();
  REQUIRE(rounds.size() == 2);
  if (rounds[0].second.targets.empty()) std::swap(rounds[0], rounds[1]);
  ConnId prober = rounds[0].first;
  PeerId asked = rounds[0].second.targets.at(0).peer_id;
  PeerId other = 6 - prober - asked;  // ids 1, 2, 3
  // A stale round is ignored.
  f.state.on_message(prober, ProbeDone{epoch, 7, {}, {}});
  f.step();
  CHECK_FALSE(f.closed(prober));
  f.state.on_message(prober, ProbeDone{epoch, 0, {{prober, other, 0, 1, 0, 0, 0, 0, 0, 8}}, {}});
  f.step();
  REQUIRE(f.closed(prober));
  CHECK(f.kick_of(prober).reason.find("asked for") != std::string::npos);
  // The kicked prober was in the vote: the other two are proposed again.
  auto again = f.sent<Topology>();
  REQUIRE(again.size() == 2);
  CHECK(again[0].second.epoch > epoch);
}

TEST_CASE("master: a member that never answers a probe round is kicked at the round's deadline", "[master][probe]") {
  MasterLimits limits;
  limits.probe_round_timeout_ms = 1000;
  Fixture f(limits);
  f.state.advance_clock(10);
  uint64_t epoch = f.three_probing();
  const auto rounds = f.sent<ProbeRound>();
  REQUIRE_FALSE(rounds.empty());
  const ConnId silent = rounds.back().first;
  for (auto& [conn, r] : rounds)
    if (conn != silent) f.state.on_message(conn, ProbeDone{epoch, 0, {}, {}});
  f.state.on_tick(900);
  f.step();
  CHECK_FALSE(f.closed(silent));
  f.state.on_tick(1100);
  f.step();
  REQUIRE(f.closed(silent));
  CHECK(f.kick_of(silent).reason.find("did not answer probe round 0") != std::string::npos);
  CHECK(f.sent<Topology>().size() == 2);  // the rest, proposed again
}

TEST_CASE("master: a vote rebuilds the ring when the matrix knows one 25 % faster, and noise does not",
          "[master][ring]") {
  Fixture f;
  f.ring_of(3);  // probes answered with nothing: the order is arrival, 1 2 3
  REQUIRE(f.state.ring(0) == std::vector<PeerId>{1, 2, 3});
  auto report = [&](PeerId from, PeerId to, uint64_t rate) {
    f.state.on_message(from, LinkReport{{{from, to, 0, rate, 0, 1000, 0, 1 << 20, 0, 4}}});
  };
  report(1, 2, 10'000'000);  // the ring's slow link
  report(2, 3, 25'000'000);
  report(3, 1, 25'000'000);
  report(1, 3, 25'000'000);
  report(3, 2, 25'000'000);
  report(2, 1, 25'000'000);
  for (ConnId c = 1; c <= 3; ++c) f.state.on_message(c, TopologyVote{});
  f.step();
  auto proposals = f.sent<Topology>();
  REQUIRE(proposals.size() == 3);
  f.all_ready();
  CHECK(f.state.ring(0) == std::vector<PeerId>{1, 3, 2});

  // A few percent either way: the ring stays, the vote only renews the epoch.
  report(1, 3, 24'000'000);
  report(1, 2, 26'000'000);
  uint64_t epoch = f.state.epoch(0);
  for (ConnId c = 1; c <= 3; ++c) f.state.on_message(c, TopologyVote{});
  f.step();
  CHECK(f.sent<Topology>().empty());
  CHECK(f.sent<TopologyDone>().size() == 3);
  CHECK(f.state.epoch(0) > epoch);
  CHECK(f.state.ring(0) == std::vector<PeerId>{1, 3, 2});
}

TEST_CASE("master: as fast, a ring with half the RTT is taken at a vote, and a tenth less is noise", "[master][ring]") {
  Fixture f;
  f.ring_of(4);
  REQUIRE(f.state.ring(0) == std::vector<PeerId>{1, 2, 3, 4});
  // Two regions, {1, 3} and {2, 4}: arrival order crosses between them at every hop.
  auto report_all = [&](uint32_t far_rtt_us) {
    for (PeerId a = 1; a <= 4; ++a)
      for (PeerId b = 1; b <= 4; ++b)
        if (a != b) {
          uint32_t rtt = a % 2 == b % 2 ? 2'000 : far_rtt_us;
          f.state.on_message(a, LinkReport{{{a, b, 0, 25'000'000, 0, rtt, 0, 1 << 20, 0, 4}}});
        }
  };
  auto vote = [&] {
    for (ConnId c = 1; c <= 4; ++c) f.state.on_message(c, TopologyVote{});
    f.step();
    if (f.sent<Topology>().empty()) return false;
    f.all_ready();
    return true;
  };
  report_all(100'000);  // total RTT 400 ms in arrival order, 204 ms grouped by region
  REQUIRE(vote());
  auto ring = f.state.ring(0);
  int far_hops = 0;
  for (size_t i = 0; i < ring.size(); ++i) far_hops += ring[i] % 2 != ring[(i + 1) % ring.size()] % 2;
  CHECK(far_hops == 2);
  report_all(90'000);  // every RTT a tenth less: the same ring is still best
  CHECK_FALSE(vote());
  CHECK(f.state.ring(0) == ring);
}

TEST_CASE("master: an optimize vote forgets the matrix, probes every pair and takes any better order",
          "[master][ring]") {
  Fixture f;
  f.ring_of(3);
  REQUIRE(f.state.ring(0) == std::vector<PeerId>{1, 2, 3});
  f.answer_probes = false;
  f.state.on_message(1, LinkReport{{{1, 2, 0, 25'000'000, 0, 1000, 0, 1 << 20, 0, 4}}});
  f.state.on_message(1, TopologyVote{0, 1});  // one member asks; the others vote plainly
  f.state.on_message(2, TopologyVote{});
  f.state.on_message(3, TopologyVote{});
  f.step();
  CHECK(f.state.link_matrix(0).empty());  // forgotten: measured afresh
  uint64_t epoch = f.sent<Topology>().at(0).second.epoch;
  for (ConnId c = 1; c <= 3; ++c) f.state.on_message(c, TopologyReady{epoch, 0, 0, ""});
  size_t probed = 0;
  for (uint32_t round = 0; round < 6; ++round) {
    f.step();
    for (auto& [conn, r] : f.sent<ProbeRound>()) {
      std::vector<LinkEntry> links;
      for (auto& t : r.targets) {
        PeerId self = static_cast<PeerId>(conn);
        // 1 -> 2 a tenth slower than the rest: not worth a plain vote's rebuild, but an optimize takes it.
        uint64_t rate = self == 1 && t.peer_id == 2 ? 22'500'000 : 25'000'000;
        links.push_back({self, t.peer_id, 0, rate, 0, 1000, 0, 0, 0, 8});
        ++probed;
      }
      f.state.on_message(conn, ProbeDone{epoch, round, links, {}});
    }
  }
  f.step();
  CHECK(probed == 6);
  auto proposals = f.sent<Topology>();
  REQUIRE(proposals.size() == 3);
  CHECK(proposals[0].second.epoch > epoch);
  f.all_ready();
  CHECK(f.state.ring(0) == std::vector<PeerId>{1, 3, 2});
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

namespace {

// While it lives, ferry's log goes (at `level`) to lines() instead of stderr.
struct LogCapture {
  std::ostringstream out;
  std::vector<spdlog::sink_ptr> saved = ferry::log().sinks();

  explicit LogCapture(const char* level) {
    auto sink = std::make_shared<spdlog::sinks::ostream_sink_st>(out);
    sink->set_pattern("%l %v");
    ferry::log().sinks() = {sink};
    ferry::set_log_level(level);
  }
  ~LogCapture() {
    ferry::log().sinks() = saved;
    ferry::set_log_level("off");
  }
  // The lines logged so far that hold `part`.
  std::vector<std::string> lines(const std::string& part) const {
    std::vector<std::string> found;
    std::istringstream in(out.str());
    for (std::string line; std::getline(in, line);)
      if (line.find(part) != std::string::npos) found.push_back(line);
    return found;
  }
};

}  // namespace

TEST_CASE("master: stats count verdicts by result, the bytes reduced, joins and leaves by why", "[master][stats]") {
  Fixture f;
  f.ring_of(3);
  const uint64_t e = f.state.epoch(0);
  // Committed: 10 f32 (40 bytes).
  f.all_begin(e, 0, 3);
  for (ConnId c = 1; c <= 3; ++c) f.state.on_message(c, CollectiveEnd{e, 0, 0, ""});
  f.step();
  f.expect_verdicts(3, Errc::ok);
  // Mismatch: the late member hears the same verdict, counted once.
  f.state.on_message(1, begin(e, 1, 10, 1));
  f.state.on_message(2, begin(e, 1, 10, 2));
  f.state.on_message(3, begin(e, 1, 10, 1));
  // A failed end.
  f.all_begin(e, 2, 3);
  f.state.on_message(1, CollectiveEnd{e, 2, static_cast<uint32_t>(Errc::timeout), "no progress"});
  f.state.on_message(2, CollectiveEnd{e, 2, static_cast<uint32_t>(Errc::timeout), "no progress either"});
  // A lost member, its collective open.
  f.state.on_message(1, begin(e, 3));
  f.state.on_message(2, begin(e, 3));
  f.state.on_disconnected(3, "connection reset");
  f.step();
  // A begin on the broken ring: refused, not an abort; then one leaves, one is kicked.
  f.state.on_message(1, begin(e, 4));
  f.state.on_message(2, Leave{});
  f.state.on_message(1, f.hello_of(1));  // a second hello
  f.step();
  CHECK(f.closed(1));

  const MasterStats& s = f.state.stats();
  CHECK(s.committed == 1);
  CHECK(s.aborted() == 3);
  CHECK(s.aborted_by_result[static_cast<size_t>(Errc::mismatch)] == 1);
  CHECK(s.aborted_by_result[static_cast<size_t>(Errc::timeout)] == 1);
  CHECK(s.aborted_by_result[static_cast<size_t>(Errc::peer_lost)] == 1);
  CHECK(s.bytes_reduced == 40);
  CHECK(s.begins_refused == 1);
  CHECK(s.joins == 3);
  CHECK(s.resumes == 0);
  CHECK(s.left == 1);
  CHECK(s.lost == 1);
  CHECK(s.kicked == 1);
  CHECK(summary_line(s, std::chrono::milliseconds(3'723'000)) ==
        "summary: ran 1h02m03s; collectives 1 committed, 3 aborted (timeout 1, peer lost 1, collective mismatch 1); "
        "40 B reduced; shared-state syncs 0 committed, 0 B fetched; peers 3 joined, 0 resumed, 1 left, 1 lost, "
        "1 kicked; 1 begins refused on a changed ring");
}

TEST_CASE("master: stats count committed shared-state syncs, the bytes their plans fetch, and resumed members",
          "[master][stats]") {
  SECTION("a sync: conn 3 fetches 100 f32 from the holders") {
    Fixture f;
    f.ring_of(3);
    const uint64_t e = f.state.epoch(0);
    f.state.on_message(1, SyncBegin{e, 0, 5, 0, {{"w", 10, 100, 0xA, 0}}});
    f.state.on_message(2, SyncBegin{e, 0, 5, 0, {{"w", 10, 100, 0xA, 0}}});
    f.state.on_message(3, SyncBegin{e, 0, 0, static_cast<uint8_t>(SyncStrategy::receive_only), {{"w", 10, 100, 0xC, 0}}});
    f.step();
    REQUIRE(f.sent<SyncPlan>().size() == 3);
    for (ConnId c = 1; c <= 3; ++c) f.state.on_message(c, CollectiveEnd{e, 0, 0, ""});
    f.step();
    f.expect_verdicts(3, Errc::ok);
    CHECK(f.state.stats().committed == 1);
    CHECK(f.state.stats().syncs_committed == 1);
    CHECK(f.state.stats().sync_bytes_fetched == 400);
    CHECK(f.state.stats().bytes_reduced == 0);
  }
  SECTION("members back after a restart are resumes, not joins; a refused resume is no kick") {
    Fixture f;
    CHECK(f.say(1, resume_hello(f, 1, 7, 12, {7, 8})) == 7);
    CHECK(f.say(2, resume_hello(f, 2, 8, 12, {7, 8})) == 8);
    CHECK(f.say(3, resume_hello(f, 3, 7, 12, {7, 8})) == 0);  // id 7 is connected
    CHECK(f.state.stats().resumes == 2);
    CHECK(f.state.stats().joins == 0);
    CHECK(f.state.stats().kicked == 0);
  }
}

TEST_CASE("master: an aborted collective is one info line naming group, epoch, number, call, size, result and why",
          "[master][stats]") {
  Fixture f;
  f.ring_of(2);
  const uint64_t e = f.state.epoch(0);
  LogCapture log("info");
  const std::string call = "(all_reduce(count 10, f32, sum, tag 0, quant none), 40 B)";
  SECTION("a vote where the other member began it") {
    f.state.on_message(1, begin(e, 0));
    f.state.on_message(2, TopologyVote{});
    f.step();
    const auto lines = log.lines("collective 0");
    REQUIRE(lines.size() == 1);
    CHECK_THAT(lines[0], Catch::StartsWith("info collective: group 0 epoch " + std::to_string(e) + " collective 0 " +
                                           call + " aborted, collective mismatch: calls out of order: "));
    CHECK(log.lines("out of order").size() == 1);
  }
  SECTION("a begin where the other member voted") {
    f.state.on_message(2, TopologyVote{});
    f.state.on_message(1, begin(e, 0));
    f.step();
    REQUIRE(log.lines("out of order").size() == 1);
    CHECK_THAT(log.lines("out of order")[0], Catch::Contains(call + " aborted, collective mismatch: "));
  }
  SECTION("a member lost") {
    f.state.on_message(1, begin(e, 0));
    f.state.on_disconnected(2, "connection reset");
    f.step();
    const auto lines = log.lines("aborted");
    REQUIRE(lines.size() == 1);
    CHECK_THAT(lines[0], Catch::Contains("collective 0 " + call + " aborted, peer lost: ") &&
                             Catch::Contains("was lost: connection reset"));
  }
}

TEST_CASE("master: at debug, a committed collective is one line with its size and phase times", "[master][stats]") {
  Fixture f;
  f.ring_of(2);
  const uint64_t e = f.state.epoch(0);
  LogCapture log("debug");
  f.state.advance_clock(1'000);
  f.state.on_message(1, begin(e, 0));
  f.state.advance_clock(1'005);
  f.state.on_message(2, begin(e, 0));
  f.state.advance_clock(1'100);
  f.state.on_message(1, CollectiveEnd{e, 0, 0, ""});
  f.state.advance_clock(1'120);
  f.state.on_message(2, CollectiveEnd{e, 0, 0, ""});
  f.step();
  f.expect_verdicts(2, Errc::ok);
  const auto lines = log.lines("committed;");
  REQUIRE(lines.size() == 1);
  CHECK(lines[0] == "debug collective: group 0 epoch " + std::to_string(e) +
                        " collective 0 (all_reduce(count 10, f32, sum, tag 0, quant none), 40 B) committed; begin to "
                        "go 5 ms, go to last end 115 ms, last end to commit 0 ms");
}

TEST_CASE("master: a shared-state revision whose last holder left is forgotten, so the members' next sync is not "
          "refused forever",
          "[master][resume][shared_state]") {
  // Seen in ferry-chaos: a newcomer synced its own revisions 0..4 on a restarted master before
  // an old member came back holding revision 77 and then died; every later sync failed with
  // "the group is at 77, the peers offer 5", a state no member had.
  Fixture f;
  LogCapture log("warn");
  const PeerId newcomer = f.join(1);
  f.all_ready();
  uint64_t e = f.state.epoch(0);
  f.state.on_message(1, SyncBegin{e, 0, 4, 0, {{"w", 10, 100, 0xA, 0}}});
  f.step();
  REQUIRE(f.sent<SyncPlan>().size() == 1);
  f.state.on_message(1, CollectiveEnd{e, 0, 0, ""});
  f.step();
  CHECK(f.state.shared_revision(0) == 4);
  Hello back = resume_hello(f, 2, 77, 12, {77});
  back.resume_revision = 78;  // it holds revision 77
  CHECK(f.say(2, back) == 77);
  CHECK(f.state.ring(0) == std::vector<PeerId>{77, newcomer});
  CHECK(f.state.shared_revision(0) == 77);
  f.state.on_disconnected(2, "connection reset");
  f.step();
  CHECK(f.state.shared_revision(0) == std::nullopt);
  REQUIRE(log.lines("lost its shared state at revision 77").size() == 1);
  f.state.on_message(1, TopologyVote{});
  f.step();
  e = f.all_ready();
  f.state.on_message(1, SyncBegin{e, 0, 5, 0, {{"w", 10, 100, 0xB, 0}}});
  f.step();
  CHECK(f.sent<CollectiveResult>().empty());
  REQUIRE(f.sent<SyncPlan>().size() == 1);
  f.state.on_message(1, CollectiveEnd{e, 0, 0, ""});
  f.step();
  f.expect_verdicts(1, Errc::ok);
  CHECK(f.state.shared_revision(0) == 5);
}

TEST_CASE("master: the last member of a group leaving ends it quietly, without a lost-state warning",
          "[master][shared_state]") {
  // Every run ends this way; the warning above is for members left behind without the state.
  Fixture f;
  LogCapture log("info");
  f.join(1);
  const uint64_t e = f.all_ready();
  f.state.on_message(1, SyncBegin{e, 0, 4, 0, {{"w", 10, 100, 0xA, 0}}});
  f.step();
  f.state.on_message(1, CollectiveEnd{e, 0, 0, ""});
  f.step();
  REQUIRE(f.state.shared_revision(0) == 4);
  f.state.on_disconnected(1, "closed by the peer");
  f.step();
  CHECK(f.state.shared_revision(0) == std::nullopt);
  CHECK(log.lines("warn").empty());
  CHECK(log.lines("group 0 ended at shared-state revision 4").size() == 1);
}
