// What the master knows of the links and what it does with it: link reports, the matrix, probe
// rounds, ring order (master_links.cpp, master_proposals.cpp).
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

TEST_CASE("master: members silent in a later probe round are each kicked naming that round and not the next proposal's",
          "[master][probe]") {
  MasterLimits limits;
  limits.probe_round_timeout_ms = 1000;
  Fixture f(limits);
  f.state.advance_clock(10);
  const uint64_t epoch = f.three_probing();
  auto rounds = f.sent<ProbeRound>();
  REQUIRE_FALSE(rounds.empty());
  REQUIRE(rounds[0].second.round == 0);
  for (auto& [conn, r] : rounds) f.state.on_message(conn, ProbeDone{epoch, 0, {}, {}});
  f.step();
  rounds = f.sent<ProbeRound>();
  REQUIRE(rounds.size() >= 2);  // three members: a second round, with two or more probers in it
  REQUIRE(rounds[0].second.round == 1);
  f.state.on_tick(2000);
  f.step();
  for (auto& [conn, r] : rounds) {
    REQUIRE(f.closed(conn));
    CHECK(f.kick_of(conn).reason.find("did not answer probe round 1 ") != std::string::npos);
  }
}
