// The shared-state election alone: who wins, who fetches from whom, and the rules' errors.
#include <catch2/catch.hpp>

#include <set>

#include "master/shared_state_election.h"

using namespace ferry;
using namespace ferry::master;
using wire::SyncStrategy;

namespace {

SyncCandidate candidate(uint64_t id, uint64_t revision, SyncStrategy strategy,
                        std::vector<std::pair<std::string, uint64_t>> tensors, bool may_differ = false) {
  SyncCandidate c;
  c.peer_id = id;
  c.address = {id, "10.0.0." + std::to_string(id), static_cast<uint16_t>(5000 + id), {}};
  c.begin.revision = revision;
  c.begin.strategy = static_cast<uint8_t>(strategy);
  for (auto& [name, hash] : tensors) c.begin.tensors.push_back({name, 10, 100, hash, may_differ});
  return c;
}

// Who accepts connections: every peer but `closed`; a punch gets through between any two
// peers but those in `unpunchable`.
SyncReach reach(std::set<uint64_t> closed = {}, std::set<std::pair<uint64_t, uint64_t>> unpunchable = {}) {
  return {.can_dial = [closed](uint64_t, uint64_t to) { return !closed.count(to); },
          .can_punch = [unpunchable](uint64_t a, uint64_t b) {
            return !unpunchable.count({a, b}) && !unpunchable.count({b, a});
          }};
}

}  // namespace

TEST_CASE("election: the most common bytes win, the others fetch them from every holder", "[election]") {
  auto out = elect_shared_state({candidate(1, 5, SyncStrategy::enforce_popular, {{"w", 0xA}, {"b", 0xB}}),
                                 candidate(2, 5, SyncStrategy::enforce_popular, {{"b", 0xB}, {"w", 0xA}}),
                                 candidate(3, 5, SyncStrategy::enforce_popular, {{"w", 0xC}, {"b", 0xB}})},
                                false, 0, reach());
  REQUIRE(out.status.ok());
  CHECK(out.revision == 5);
  CHECK(out.plans[1].fetches.empty());
  CHECK(out.plans[2].fetches.empty());
  REQUIRE(out.plans[3].fetches.size() == 1);
  CHECK(out.plans[3].fetches[0].tensor == 1);  // name order: "b" is 0, "w" is 1
  CHECK(out.plans[3].fetches[0].hash == 0xA);
  CHECK(out.plans[3].fetches[0].holders == std::vector<uint64_t>{1, 2});
  CHECK(out.plans[3].addresses.size() == 2);
  CHECK(out.plans[1].serve_to == std::vector<uint64_t>{3});
  CHECK(out.plans[3].serve_to.empty());
}

TEST_CASE("election: ties go to the lowest peer id, receive-only and stale peers do not vote", "[election]") {
  auto out = elect_shared_state({candidate(4, 2, SyncStrategy::enforce_popular, {{"w", 0x4}}),
                                 candidate(3, 2, SyncStrategy::enforce_popular, {{"w", 0x3}}),
                                 candidate(5, 1, SyncStrategy::enforce_popular, {{"w", 0x5}}),   // behind
                                 candidate(6, 9, SyncStrategy::receive_only, {{"w", 0x5}})},
                                true, 1, reach());
  REQUIRE(out.status.ok());
  CHECK(out.revision == 2);
  CHECK(out.plans[4].fetches.at(0).hash == 0x3);
  CHECK(out.plans[5].fetches.at(0).holders == std::vector<uint64_t>{3});
  CHECK(out.plans[6].fetches.size() == 1);
}

TEST_CASE("election: send-only wins, a conflicting send-only peer is kicked", "[election]") {
  auto win = elect_shared_state({candidate(1, 1, SyncStrategy::enforce_popular, {{"w", 0x1}}),
                                 candidate(2, 1, SyncStrategy::enforce_popular, {{"w", 0x1}}),
                                 candidate(3, 1, SyncStrategy::send_only, {{"w", 0x3}})},
                                false, 0, reach());
  REQUIRE(win.status.ok());
  CHECK(win.plans[1].fetches.at(0).hash == 0x3);
  CHECK(win.plans[3].fetches.empty());

  auto clash = elect_shared_state({candidate(1, 1, SyncStrategy::send_only, {{"w", 0x1}}),
                                   candidate(2, 1, SyncStrategy::send_only, {{"w", 0x2}})},
                                  false, 0, reach());
  CHECK_FALSE(clash.status.ok());
  CHECK(clash.kick == std::vector<uint64_t>{2});
}

TEST_CASE("election: layout differences, the revision rule and all-receive-only are errors", "[election]") {
  auto layout = elect_shared_state({candidate(1, 1, SyncStrategy::enforce_popular, {{"w", 1}}),
                                    candidate(2, 1, SyncStrategy::enforce_popular, {{"v", 1}})},
                                   false, 0, reach());
  CHECK(layout.status.code == Errc::mismatch);
  auto jump = elect_shared_state({candidate(1, 9, SyncStrategy::enforce_popular, {{"w", 1}})}, true, 5, reach());
  CHECK(jump.status.code == Errc::invalid_usage);
  auto nobody = elect_shared_state({candidate(1, 1, SyncStrategy::receive_only, {{"w", 1}})}, false, 0, reach());
  CHECK(nobody.status.code == Errc::invalid_usage);
  auto dup = elect_shared_state({candidate(1, 1, SyncStrategy::enforce_popular, {{"w", 1}, {"w", 2}})}, false, 0, reach());
  CHECK(dup.status.code == Errc::invalid_argument);
}

TEST_CASE("election: tensors that may differ are never compared or moved", "[election]") {
  auto out = elect_shared_state({candidate(1, 1, SyncStrategy::enforce_popular, {{"rng", 1}}, true),
                                 candidate(2, 1, SyncStrategy::enforce_popular, {{"rng", 2}}, true)},
                                false, 0, reach());
  REQUIRE(out.status.ok());
  CHECK(out.plans[1].fetches.empty());
  CHECK(out.plans[2].fetches.empty());
}

TEST_CASE("election: each fetch is opened by whichever end can dial, punched only when no holder is reachable",
          "[election][dialers]") {
  // 1 holds and accepts nothing; 2 holds and is open; 3 and 4 fetch, 4 accepts nothing either.
  auto out = elect_shared_state({candidate(1, 3, SyncStrategy::enforce_popular, {{"w", 0xA}}),
                                 candidate(2, 3, SyncStrategy::enforce_popular, {{"w", 0xA}}),
                                 candidate(3, 3, SyncStrategy::receive_only, {{"w", 0x0}}),
                                 candidate(4, 3, SyncStrategy::receive_only, {{"w", 0x0}})},
                                false, 0, reach({1, 4}));
  REQUIRE(out.status.ok());
  // 3 dials 2, and 1 dials 3: both holders serve it.
  CHECK(out.plans[3].fetches.at(0).holders == std::vector<uint64_t>{1, 2});
  CHECK(out.plans[3].holder_dials ==
        std::vector<uint8_t>{static_cast<uint8_t>(wire::FetchDial::holder), static_cast<uint8_t>(wire::FetchDial::fetcher)});
  // 4 dials 2; a punch with 1 is not needed, so not tried.
  CHECK(out.plans[4].fetches.at(0).holders == std::vector<uint64_t>{2});
  CHECK(out.plans[4].holder_dials == std::vector<uint8_t>{static_cast<uint8_t>(wire::FetchDial::fetcher)});
  CHECK(out.plans[2].serve_to == std::vector<uint64_t>{3, 4});
  CHECK(out.plans[2].serve_dials.empty());
  CHECK(out.plans[1].serve_to.empty());
  REQUIRE(out.plans[1].serve_dials.size() == 1);
  CHECK(out.plans[1].serve_dials[0].fetcher.peer_id == 3);
  CHECK(out.plans[1].serve_dials[0].dial == static_cast<uint8_t>(wire::FetchDial::holder));
  CHECK(out.plans[1].serve_dials[0].connections == 1);  // 3 asked for none (0: one)

  // Held only by 1, fetched by 4: neither accepts, so they punch, with as many connections as 4 opens per holder.
  auto b4 = candidate(4, 3, SyncStrategy::receive_only, {{"w", 0x0}});
  b4.begin.connections = 6;
  auto punched = elect_shared_state({candidate(1, 3, SyncStrategy::enforce_popular, {{"w", 0xA}}), b4}, false, 0,
                                    reach({1, 4}));
  REQUIRE(punched.status.ok());
  CHECK(punched.plans[4].holder_dials == std::vector<uint8_t>{static_cast<uint8_t>(wire::FetchDial::both)});
  REQUIRE(punched.plans[1].serve_dials.size() == 1);
  CHECK(punched.plans[1].serve_dials[0].dial == static_cast<uint8_t>(wire::FetchDial::both));
  CHECK(punched.plans[1].serve_dials[0].connections == 6);

  // A punch between them failed lately: nobody can fetch, the sync aborts with who and what.
  auto none = elect_shared_state({candidate(1, 3, SyncStrategy::enforce_popular, {{"w", 0xA}}), b4}, false, 0,
                                 reach({1, 4}, {{4, 1}}));
  CHECK(none.status.code == Errc::connect);
  CHECK(none.status.message.find("'w' is held only by peers that peer 4 cannot connect to") != std::string::npos);
}
