// What the master counts and logs of its verdicts (master_stats.h, the collective's outcome lines).
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
