// Who dials each ring link (master/link_dialers.h): the sender when it can,
// else the receiver; peers that accept nothing (dial_out_only) and pairs whose
// dial failed, on the master's state machine.
#include <catch2/catch.hpp>

#include <algorithm>
#include <map>
#include <set>
#include <utility>
#include <vector>

#include "master/link_dialers.h"
#include "master_state_fixture.h"

using namespace ferry;
using namespace ferry::master;
using namespace ferry::wire;
using namespace ferry::master::testing;

namespace {

// Joins conn as a peer that takes no connection.
PeerId join_dial_out_only(Fixture& f, ConnId conn) {
  Hello h = f.hello_of(conn);
  h.advertised_port = 0;
  h.dial_out_only = 1;
  PeerId id = f.say(conn, h);
  REQUIRE(id != 0);
  return id;
}

// Every link of `t` has a dialer that may reach the other end.
bool every_dialer_can_reach(const Topology& t, const std::set<PeerId>& closed) {
  const size_t n = t.ring.size();
  for (size_t i = 0; i < n; ++i) {
    PeerId from = t.ring[i].peer_id, to = t.ring[(i + 1) % n].peer_id;
    PeerId acceptor = t.receiver_dials_link(i) ? from : to;
    if (closed.count(acceptor)) return false;
  }
  return true;
}

// 1 accepts connections and is the ring; 2 and 3 dial out only and join: the proposal of three.
Topology propose_one_open_two_closed(Fixture& f) {
  f.join(1);
  f.all_ready();
  join_dial_out_only(f, 2);
  join_dial_out_only(f, 3);
  f.state.on_message(1, TopologyVote{});
  f.step();
  auto proposals = f.sent<Topology>();
  REQUIRE_FALSE(proposals.empty());
  REQUIRE(proposals[0].second.ring.size() == 3);
  return proposals[0].second;
}

}  // namespace

TEST_CASE("link dialers: the sender where it can, else the receiver, else the sender", "[master][dialers]") {
  const std::set<std::pair<uint64_t, uint64_t>> blocked{{1, 2}, {3, 1}, {1, 3}};
  CanDial can_dial = [&](uint64_t from, uint64_t to) { return blocked.count({from, to}) == 0; };
  // 1 -> 2 is blocked (2 dials), 2 -> 3 open, 3 -> 1 blocked both ways (3 dials and fails).
  CHECK(assign_dialers({1, 2, 3}, can_dial) == std::vector<uint8_t>{1, 0, 0});
  CHECK(assign_dialers({2, 3}, can_dial).empty());  // every sender dials: the short form
  CHECK(assign_dialers({1}, can_dial).empty());
  CHECK(linkable(1, 2, can_dial));
  CHECK_FALSE(linkable(1, 3, can_dial));
}

TEST_CASE("master: dial-out-only peers get every link dialed from their side and are never neighbours",
          "[master][dialers]") {
  Fixture f;
  f.join(1);
  f.all_ready();
  join_dial_out_only(f, 2);
  f.join(3);
  join_dial_out_only(f, 4);
  f.state.on_message(1, TopologyVote{});
  f.step();
  auto proposals = f.sent<Topology>();
  REQUIRE(proposals.size() == 4);
  const Topology& t = proposals[0].second;
  REQUIRE(t.ring.size() == 4);
  CHECK(every_dialer_can_reach(t, {2, 4}));
  auto ring = proposed_ring(f);
  for (PeerId closed : {2, 4})
    for (PeerId other : {2, 4}) CHECK_FALSE(uses(ring, closed, other));
  // Two links into dial-out-only peers: their receivers dial them.
  CHECK(std::count(t.receiver_dials.begin(), t.receiver_dials.end(), 1) == 2);
  for (auto& [conn, topology] : proposals) CHECK(topology.receiver_dials == t.receiver_dials);  // one view
  f.all_ready();
  CHECK(f.state.ring(0).size() == 4);
  CHECK(f.last.closes.empty());
}

TEST_CASE("master: a dial-out-only peer advertises no port, and one that listens must", "[master][dialers][misuse]") {
  Fixture f;
  Hello h = f.hello_of(1);
  h.dial_out_only = 1;  // but advertises 5001
  CHECK(f.say(1, h) == 0);
  CHECK(f.kick_of(1).reason == "a dial-out-only peer advertises no p2p port");
  Hello g = f.hello_of(2);
  g.advertised_port = 0;
  CHECK(f.say(2, g) == 0);
  CHECK(f.kick_of(2).reason == "advertised p2p port is 0");
}

TEST_CASE("link dialers: a pair neither end can dial punches where it may", "[master][dialers][punch]") {
  const std::set<std::pair<uint64_t, uint64_t>> blocked{{1, 2}, {2, 1}, {2, 3}};
  CanDial can_dial = [&](uint64_t from, uint64_t to) { return blocked.count({from, to}) == 0; };
  CanDial can_punch = [](uint64_t a, uint64_t b) { return a + b != 5; };  // not 2 with 3
  // 1 -> 2 and 2 -> 1 blocked: punched both ways; 2 -> 3 blocked one way: 3 dials; 3 -> 1 open.
  CHECK(assign_dialers({1, 2, 3}, can_dial, can_punch) == std::vector<uint8_t>{2, 1, 0});
  CHECK(assign_dialers({1, 2}, can_dial, can_punch) == std::vector<uint8_t>{2, 2});
  CHECK(assign_dialers({1, 2}, can_dial) == std::vector<uint8_t>{});  // no punching: the sender, which fails
  const std::set<std::pair<uint64_t, uint64_t>> both{{2, 3}, {3, 2}};
  CanDial closed_pair = [&](uint64_t from, uint64_t to) { return both.count({from, to}) == 0; };
  CHECK(assign_dialers({2, 3}, closed_pair, can_punch) == std::vector<uint8_t>{});  // may not punch: the sender
}

TEST_CASE("master: two dial-out-only peers and one that listens: all three, the two punch through to each other",
          "[master][dialers][punch]") {
  Fixture f;
  const Topology t = propose_one_open_two_closed(f);
  // No ring of dialed links holds the three: the link between 2 and 3 is punched, the others dialed by 2 and 3.
  for (size_t i = 0; i < 3; ++i) {
    PeerId from = t.ring[i].peer_id, to = t.ring[(i + 1) % 3].peer_id;
    if (from != 1 && to != 1)
      CHECK(t.link_dial(i) == LinkDial::both);
    else
      CHECK(t.link_dial(i) == (to == 1 ? LinkDial::sender : LinkDial::receiver));
  }
  f.all_ready();
  CHECK(f.state.ring(0).size() == 3);
  CHECK(f.last.closes.empty());
}

TEST_CASE("master: a punch that fails (closed hosts) is not asked again: one of the two waits, nobody is evicted",
          "[master][dialers][punch]") {
  Fixture f;
  const Topology t = propose_one_open_two_closed(f);
  // Both ends of the punched link time out and blame each other; the dialed links formed.
  for (size_t i = 0; i < 3; ++i) {
    PeerId self = t.ring[i].peer_id, next = t.ring[(i + 1) % 3].peer_id, prev = t.ring[(i + 2) % 3].peer_id;
    PeerId blamed = t.link_dial(i) == LinkDial::both ? next : t.link_dial((i + 2) % 3) == LinkDial::both ? prev : 0;
    f.answer(static_cast<ConnId>(self), t.epoch, blamed);
  }
  f.step();
  auto ring = proposed_ring(f);
  CHECK(ring.size() == 2);  // 1 and one of them: no ring of three avoids the pair that cannot punch
  auto next = f.sent<Topology>();
  REQUIRE_FALSE(next.empty());
  CHECK(std::none_of(next[0].second.receiver_dials.begin(), next[0].second.receiver_dials.end(),
                     [](uint8_t d) { return d == static_cast<uint8_t>(LinkDial::both); }));
  CHECK(f.last.closes.empty());
  f.all_ready();
  CHECK(f.state.ring(0).size() == 2);
}

TEST_CASE("master: a group of dial-out-only peers alone (each behind a stateful NAT) punches every link",
          "[master][dialers][punch]") {
  Fixture f;
  join_dial_out_only(f, 1);
  f.all_ready();
  for (ConnId c = 2; c <= 4; ++c) join_dial_out_only(f, c);
  f.state.on_message(1, TopologyVote{});
  f.step();
  auto proposals = f.sent<Topology>();
  REQUIRE_FALSE(proposals.empty());
  const Topology& t = proposals[0].second;
  REQUIRE(t.ring.size() == 4);
  for (size_t i = 0; i < 4; ++i) CHECK(t.link_dial(i) == LinkDial::both);
  f.all_ready();
  CHECK(f.state.ring(0).size() == 4);
  CHECK(f.last.closes.empty());
}

TEST_CASE("master: a link whose dial failed is dialed by its receiver next time, and the joiner stays",
          "[master][dialers]") {
  Fixture f;
  f.ring_of(3);
  f.join(4);
  vote_in(f, 3);
  // Nobody can dial 4 (a firewall drops its inbound SYNs), but 4 dials out.
  const std::set<std::pair<PeerId, PeerId>> blocked{{1, 4}, {2, 4}, {3, 4}};
  int rounds = 0;
  while (f.state.ring(0).size() < 4 && f.last.closes.empty() && rounds < 10) {
    answer_as_network(f, blocked);
    ++rounds;
  }
  CHECK(rounds == 2);  // one failed dial, then 4 dials its predecessor's link itself
  CHECK(f.last.closes.empty());
  CHECK(f.state.ring(0).size() == 4);
}

TEST_CASE("master: the pairs of a dial-out-only peer are probed too, each probe into it dialed by it",
          "[master][dialers][probe]") {
  Fixture f;
  f.answer_probes = false;
  f.join(1);
  f.all_ready();
  join_dial_out_only(f, 2);
  f.join(3);
  f.state.on_message(1, TopologyVote{});
  f.step();
  const uint64_t epoch = f.sent<Topology>().at(0).second.epoch;
  for (ConnId c = 1; c <= 3; ++c) f.state.on_message(c, TopologyReady{epoch, 0, 0, ""});
  std::set<std::pair<PeerId, PeerId>> probed;
  for (uint32_t round = 0; round < 10; ++round) {
    f.step();
    auto rounds = f.sent<ProbeRound>();
    if (rounds.empty()) break;
    std::map<PeerId, ProbeRound> by_peer;
    for (auto& [conn, r] : rounds) by_peer[static_cast<PeerId>(conn)] = r;  // conn n joined as peer n
    for (auto& [self, r] : by_peer) {
      std::vector<LinkEntry> links;
      for (size_t i = 0; i < r.targets.size(); ++i) {
        const PeerId to = r.targets[i].peer_id;
        probed.insert({self, to});
        // Into 2 its prober cannot dial: 2 dials, and hears whom in its own round.
        CHECK(r.target_dials_prober(i) == (to == 2));
        if (to == 2) {
          REQUIRE(by_peer[2].dial_sources.size() == 1);
          CHECK(by_peer[2].dial_sources[0].peer_id == self);
          CHECK(by_peer[2].dial_sources[0].port == 5000 + self);
        }
        links.push_back({self, to, 0, 25'000'000, 0, 1000, 0, 0, 0, 8});
      }
      if (self != 2) CHECK(r.dial_sources.empty());
      f.state.on_message(self, ProbeDone{epoch, round, links, {}});
    }
  }
  CHECK(probed.size() == 6);  // every ordered pair, 1 -> 2 and 3 -> 2 among them
}
