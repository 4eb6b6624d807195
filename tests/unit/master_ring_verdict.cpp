// ring_verdict alone (master/ring_verdict.h): when silence seals a pending member's fate.
#include <catch2/catch.hpp>

#include "master/ring_verdict.h"

using namespace ferry;
using namespace ferry::master;

namespace {

VerdictMember member(uint64_t id, bool accepted, uint64_t blames = 0, bool answered = true) {
  VerdictMember m{id, accepted, std::nullopt};
  if (answered)
    m.answer = wire::TopologyReady{7, blames ? static_cast<uint32_t>(Errc::timeout) : 0u, blames,
                                   blames ? "links not up" : ""};
  return m;
}

}  // namespace

TEST_CASE("ring verdict: a joiner blamed by a joiner is heard while it may still blame back", "[master][verdict]") {
  // Ring 1 -> 2 -> 3 -> 4 -> 1 of hosts that drop inbound SYNs (1 and 3) and open ones:
  // 2 and 4 could not dial 3 and 1. 1 blames 4 at its silent deadline; 3, at the same
  // deadline, has not answered yet. Its answer (blaming 2) makes 2 -> 3 a failed link.
  std::vector<VerdictMember> m{member(1, true, 4), member(2, false, 3), member(3, false, 0, false),
                               member(4, false, 1)};
  m[2].hear_if_blamed = true;
  CHECK_FALSE(ring_verdict(m, true).has_value());  // waits for 3
  m[2] = member(3, false, 2);
  auto verdict = ring_verdict(m, true);
  REQUIRE(verdict.has_value());
  CHECK(verdict->culprits.empty());
  CHECK(verdict->failed_links.size() == 2);  // 2 -> 3 and 4 -> 1, each from its dialer
  // Past its grace, the silent joiner goes.
  m[2] = member(3, false, 0, false);
  auto sealed = ring_verdict(m, true);
  REQUIRE(sealed.has_value());
  REQUIRE(sealed->culprits.size() == 1);
  CHECK(sealed->culprits[0].id == 3);
}

TEST_CASE("ring verdict: a failed link its receiver dialed is named from the receiver", "[master][verdict][dialers]") {
  std::vector<VerdictMember> m{member(1, true, 2), member(2, true, 1), member(3, true)};
  m[0].next_dials = true;  // 2 dials the link 1 -> 2
  auto verdict = ring_verdict(m, true);
  REQUIRE(verdict.has_value());
  REQUIRE(verdict->failed_links.size() == 1);
  CHECK(verdict->failed_links[0].from == 2);
  CHECK(verdict->failed_links[0].to == 1);
}

TEST_CASE("ring verdict: a joiner whose two punched links failed is routed around, not evicted",
          "[master][verdict][punch]") {
  // Ring 1 2 3 4 5; 3, 4 and 5 accept nothing and are pending, so 3 -> 4 and 4 -> 5 were
  // punched, and both failed (closed hosts drop every SYN). 3 and 5 blame 4; 4 can name
  // only one of them.
  std::vector<VerdictMember> m{member(1, true), member(2, true), member(3, false, 4), member(4, false, 3),
                               member(5, false, 4)};
  m[2].next_mutual = true;
  m[3].next_mutual = true;
  auto verdict = ring_verdict(m, true);
  REQUIRE(verdict.has_value());
  CHECK(verdict->culprits.empty());
  REQUIRE(verdict->failed_links.size() == 2);
  CHECK(verdict->failed_links[0].from == 3);
  CHECK(verdict->failed_links[0].to == 4);
  CHECK(verdict->failed_links[1].from == 4);
  CHECK(verdict->failed_links[1].to == 5);
  // The same with dialed links: 4 is blamed by both neighbours and goes.
  m[2].next_mutual = m[3].next_mutual = false;
  auto dialed = ring_verdict(m, true);
  REQUIRE(dialed.has_value());
  REQUIRE(dialed->culprits.size() == 1);
  CHECK(dialed->culprits[0].id == 4);
  // Without reroutes left, the pair's failure is settled by eviction as before.
  m[2].next_mutual = m[3].next_mutual = true;
  auto settled = ring_verdict(m, false);
  REQUIRE(settled.has_value());
  CHECK_FALSE(settled->culprits.empty());
}
