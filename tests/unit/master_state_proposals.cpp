// The master's rules for proposals: members lost while proposing, verdicts on links that did not
// form, reroutes around unreachable pairs, evictions (master_proposals.cpp).
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

namespace {

// 1, 3 and 5 accept connections and relay; 2 and 4 accept nothing. Once 3 and 5 leave,
// 2 and 4 are neighbours in any ring of three: the master punches, the firewalls drop
// every SYN, and the proposal after that has 1 relay their link.
void propose_relayed_ring(Fixture& f) {
  Hello first = f.hello_of(1);
  first.relay_port = 9001;
  REQUIRE(f.say(1, first) != 0);
  f.all_ready();
  for (ConnId c : {2, 3, 4, 5}) {
    Hello h = f.hello_of(c);
    if (c % 2 == 0) {
      h.advertised_port = 0;
      h.dial_out_only = 1;
    } else {
      h.relay_port = static_cast<uint16_t>(9000 + c);
    }
    REQUIRE(f.say(c, h) != 0);
  }
  f.state.on_message(1, TopologyVote{});
  f.step();
  f.all_ready();
  REQUIRE(f.state.ring(0).size() == 5);
  CHECK((f.sent<Topology>().empty() || f.sent<Topology>()[0].second.relays.empty()));
  f.state.on_message(3, Leave{});
  f.step();
  for (ConnId c : {1, 2, 4, 5}) f.state.on_message(c, TopologyVote{});
  f.step();
  // 1 2 5 4 needs no relay: each pair has an end the other can dial.
  REQUIRE(proposed_ring(f).size() == 4);
  CHECK(f.sent<Topology>()[0].second.relays.empty());
  f.all_ready();
  f.state.on_message(5, Leave{});
  f.step();
  for (ConnId c : {1, 2, 4}) f.state.on_message(c, TopologyVote{});
  f.step();
  // First a punch, which the firewalls drop; then 1 relays the hop between 2 and 4.
  REQUIRE(proposed_ring(f).size() == 3);
  answer_as_network(f, {{1, 2}, {1, 4}, {2, 4}, {4, 2}});
  CHECK(f.last.closes.empty());
}

}  // namespace

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
  SECTION("a pending peer and an accepted one blame each other: nobody goes, the other end dials their link") {
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
    CHECK(dialer_of(f, 2, 3) != 2);  // 2's dial of 3 failed: 3 dials that link, or the ring avoids it
    f.all_ready();
    CHECK(f.state.ring(0).size() == 3);
    CHECK(f.state.link_matrix(0).empty());  // unreachable is not a measurement
  }
  SECTION("two accepted peers blame each other: they punch through, and when that fails too, the newer goes") {
    Fixture f;
    f.ring_of(2);
    uint64_t epoch = vote_in(f, 2, 1);
    f.answer(1, epoch, 2);
    f.answer(2, epoch, 1);
    f.step();
    CHECK(f.last.closes.empty());
    auto punched = f.sent<Topology>();
    REQUIRE_FALSE(punched.empty());
    CHECK(punched[0].second.receiver_dials == std::vector<uint8_t>{2, 2});  // LinkDial::both, each way
    f.answer(1, punched[0].second.epoch, 2);
    f.answer(2, punched[0].second.epoch, 1);
    f.step();
    REQUIRE(f.last.closes.size() == 1);
    CHECK(f.closed(2));
    CHECK(proposed_ring(f) == std::vector<uint64_t>{1});
  }
  SECTION("a joiner nobody can link with either way: both neighbours blame it, it goes, the others stay") {
    Fixture f;
    f.ring_of(3);
    f.join(4);
    vote_in(f, 3);
    // Its dials fail too (a joiner that dials out is kept: master_link_dialers.cpp).
    const std::set<std::pair<PeerId, PeerId>> blocked{{1, 4}, {2, 4}, {3, 4}, {4, 1}, {4, 2}, {4, 3}};
    answer_as_network(f, blocked);
    // Both its neighbours could not link with it, nor it with them.
    REQUIRE(f.last.closes.size() == 1);
    CHECK(f.closed(4));
    CHECK_THAT(f.kick_of(4).reason, Catch::Contains("both ring neighbours could not link with it"));
    CHECK(proposed_ring(f) == std::vector<uint64_t>{1, 2, 3});
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
    // Which way failed is unknown in a ring of two: both ways are avoided, and the pair tries a punch.
    REQUIRE(proposed_ring(f) == std::vector<uint64_t>{1, 2});
    answer_as_network(f, blocked);  // which fails (blocked is `closed` there)
    CHECK(f.last.closes.empty());
    CHECK(proposed_ring(f) == std::vector<uint64_t>{1});
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
    // 1 and 3 accept connections, 2 and 4 dial out only: ring 1 2 3 4. Once 3
    // leaves, 2 and 4 would be neighbours, which neither can dial.
    Fixture f;
    f.join(1);
    f.all_ready();
    for (ConnId c : {2, 3, 4}) {
      Hello h = f.hello_of(c);
      if (c != 3) {
        h.advertised_port = 0;
        h.dial_out_only = 1;
      }
      REQUIRE(f.say(c, h) != 0);
    }
    f.state.on_message(1, TopologyVote{});
    f.step();
    f.all_ready();
    REQUIRE(f.state.ring(0).size() == 4);
    f.state.on_message(3, Leave{});
    f.step();
    for (ConnId c : {1, 2, 4}) f.state.on_message(c, TopologyVote{});
    f.step();
    // First 2 and 4 try to punch through to each other; their firewalls drop every SYN.
    CHECK(f.last.closes.empty());
    REQUIRE(proposed_ring(f).size() == 3);
    answer_as_network(f, {{1, 2}, {1, 4}, {2, 4}, {4, 2}});
    REQUIRE(f.last.closes.size() == 1);
    CHECK(f.closed(4));
    CHECK_THAT(f.kick_of(4).reason, Catch::Contains("no ring of the group avoids every pair that cannot connect") &&
                                        Catch::Contains("leaving out peer 4 is the fewest"));
    CHECK(proposed_ring(f) == std::vector<uint64_t>{1, 2});
  }
  SECTION("where punching fails too, a member both ends can dial relays the link, and a failed relay is avoided") {
    Fixture f;
    propose_relayed_ring(f);
    auto relayed = f.sent<Topology>();
    REQUIRE(relayed.size() == 3);
    const Topology& t = relayed[0].second;
    size_t relayed_links = 0;
    for (size_t i = 0; i < t.ring.size(); ++i)
      if (t.link_dial(i) == LinkDial::relay) {
        ++relayed_links;
        CHECK(t.relay_of(i) == 1);
        std::set<uint64_t> ends{t.ring[i].peer_id, t.ring[(i + 1) % 3].peer_id};
        CHECK(ends == std::set<uint64_t>{2, 4});
      }
    CHECK(relayed_links == 1);
    CHECK(t.ring[0].relay_port == 9001);
    // 4 cannot reach the relay after all: the relayed link fails, and no other member can relay it.
    answer_as_network(f, {{1, 2}, {1, 4}, {2, 4}, {4, 2}, {4, 1}});
    REQUIRE(f.last.closes.size() == 1);
    CHECK(proposed_ring(f).size() == 2);
  }
  SECTION("a relayed ring commits, and /status names its relayed hop") {
    Fixture f;
    propose_relayed_ring(f);
    f.all_ready();
    const RunView view = f.state.view();
    REQUIRE(view.groups.size() == 1);
    REQUIRE(view.groups[0].relayed_hops.size() == 1);
    const auto& hop = view.groups[0].relayed_hops[0];
    CHECK(hop.relay == 1);
    CHECK(std::set<uint64_t>{hop.from, hop.to} == std::set<uint64_t>{2, 4});
  }
  SECTION("a joiner that cannot dial one accepted peer stays, that peer dialing their link") {
    Fixture f;
    f.ring_of(3);
    f.join(4);
    vote_in(f, 3);
    // Arrival order 1 2 3 4 has 4 dial 1: blocked.
    answer_as_network(f, {{4, 1}});
    for (auto& c : f.last.closes) INFO(c.reason);
    CHECK(f.last.closes.empty());
    CHECK(dialer_of(f, 4, 1) != 4);
    auto ring = answer_as_network(f, {{4, 1}});
    CHECK((!uses(ring, 4, 1) || ring.size() == 4));
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
  // Proposals answered until the ring stands, then its probes: the pairs whose
  // dial was tried, by a ring link (link_dialers.h) or by a probe.
  auto settle = [&](std::set<std::pair<PeerId, PeerId>> blocked) {
    std::set<std::pair<PeerId, PeerId>> tried;
    for (int guard = 0; guard < 8 && !f.sent<Topology>().empty(); ++guard) {
      for (PeerId from : {1, 2, 3})
        for (PeerId to : {1, 2, 3})
          if (from != to && dialer_of(f, from, to) == from && blocked.count({from, to})) tried.insert({from, to});
      answer_as_network(f, blocked);
    }
    auto asked = answer_probes(blocked);
    tried.insert(asked.begin(), asked.end());
    return tried;
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
  REQUIRE(vote());  // due: the ring is rebuilt, and a link or a probe dials the pair again
  CHECK(settle({{2, 3}}) == std::set<std::pair<PeerId, PeerId>>{{2, 3}});  // still blocked: marked again, for 2 s now
  now += 1500;
  f.state.advance_clock(now);
  CHECK_FALSE(vote());
  now += 600;
  f.state.advance_clock(now);
  REQUIRE(vote());
  answer_as_network(f, {});
  asked = answer_probes({});  // healed: measured, and its failures forgotten
  CHECK((asked == std::set<std::pair<PeerId, PeerId>>{{2, 3}} || dialer_of(f, 2, 3) == 2));
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
