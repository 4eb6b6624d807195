// Which member relays a link neither end can dial nor punch (master/relay_choice.h).
#include <catch2/catch.hpp>

#include <map>
#include <set>
#include <tuple>
#include <utility>
#include <vector>

#include "master/relay_choice.h"
#include "wire/messages.h"

using namespace ferry;
using namespace ferry::master;

namespace {

// Peers in `closed` accept nothing; `refusing` relay nothing; `capacity` per ordered pair (else 0: unknown).
struct Net {
  std::set<uint64_t> closed{}, refusing{};
  std::map<std::pair<uint64_t, uint64_t>, double> capacity{};
  std::set<std::tuple<uint64_t, uint64_t, uint64_t>> failed{};
  RelayReach reach() const {
    return {.can_dial = [this](uint64_t, uint64_t to) { return !closed.count(to); },
            .relays = [this](uint64_t r) { return !closed.count(r) && !refusing.count(r); },
            .failed = [this](uint64_t a, uint64_t b, uint64_t r) { return failed.count({a, b, r}) > 0; },
            .capacity = [this](uint64_t from, uint64_t to) {
              auto it = capacity.find({from, to});
              return it == capacity.end() ? 0.0 : it->second;
            }};
  }
};

constexpr uint8_t kRelay = static_cast<uint8_t>(wire::LinkDial::relay);

}  // namespace

TEST_CASE("relay choice: only links no end can dial are relayed, by a member both ends can dial", "[master][relay]") {
  Net net{.closed = {2, 3, 5}};
  // Ring 1 2 3 4 5: only 2 -> 3 joins two closed peers (5 -> 1 and 3 -> 4 are dialed by their senders).
  const std::vector<uint64_t> ring{1, 2, 3, 4, 5};
  std::vector<uint8_t> dials = assign_dialers(ring, net.reach().can_dial);
  auto relays = assign_relays(ring, dials, net.reach());
  REQUIRE(relays.size() == 5);
  CHECK(dials[1] == kRelay);
  CHECK((relays[1] == 1 || relays[1] == 4));
  for (size_t i : {0u, 2u, 3u, 4u}) {
    CHECK(dials[i] != kRelay);
    CHECK(relays[i] == 0);
  }
  // Nothing to relay: empty, dials untouched.
  std::vector<uint8_t> none;
  CHECK(assign_relays({1, 4, 2}, none, Net{}.reach()).empty());
  CHECK(none.empty());
}

TEST_CASE("relay choice: the relay with fewest hops first, then the most capacity, refusals and failures skipped",
          "[master][relay]") {
  // Ring 1 2 3 4 5 6 with 2, 3, 5, 6 closed: links 2 -> 3 and 5 -> 6 need relays; 1 and 4 can.
  Net net{.closed = {2, 3, 5, 6}};
  const std::vector<uint64_t> ring{1, 2, 3, 4, 5, 6};
  net.capacity[{2, 1}] = 100;
  net.capacity[{1, 3}] = 100;
  net.capacity[{2, 4}] = 50;
  net.capacity[{4, 3}] = 50;
  std::vector<uint8_t> dials = assign_dialers(ring, net.reach().can_dial);
  auto relays = assign_relays(ring, dials, net.reach());
  REQUIRE(relays.size() == 6);
  CHECK(relays[1] == 1);  // more capacity through 1
  CHECK(relays[4] == 4);  // 1 already relays a hop: 4 is less loaded
  CHECK(relayed_capacity(2, 3, ring, net.reach()) == Approx(50));  // half the worse leg through 1
  // 1 refuses: 4 relays both.
  net.refusing = {1};
  dials = assign_dialers(ring, net.reach().can_dial);
  relays = assign_relays(ring, dials, net.reach());
  CHECK(relays[1] == 4);
  CHECK(relays[4] == 4);
  // 4 failed for 2 -> 3 as well: that link has no relay and keeps its (doomed) dial.
  net.failed.insert({2, 3, 4});
  dials = assign_dialers(ring, net.reach().can_dial);
  relays = assign_relays(ring, dials, net.reach());
  CHECK(dials[1] != kRelay);
  CHECK(relays[1] == 0);
  CHECK(relays[4] == 4);
  CHECK_FALSE(relayed_capacity(2, 3, ring, net.reach()).has_value());
}
