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
