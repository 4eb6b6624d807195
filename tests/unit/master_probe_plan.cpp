// Which pairs a proposal probes, and in which rounds (master/probe_plan.h).
#include <catch2/catch.hpp>

#include <map>
#include <set>

#include "master/probe_plan.h"

using namespace ferry::master;

TEST_CASE("probe plan: every unmeasured ordered pair once, no peer sending or receiving twice in a round",
          "[master][probe]") {
  std::vector<uint64_t> members{4, 9, 2, 7, 5};
  auto nothing = [](uint64_t, uint64_t) { return false; };
  auto rounds = plan_probes(members, nothing, 100);
  CHECK(rounds.size() == members.size() - 1);
  std::set<std::pair<uint64_t, uint64_t>> seen;
  for (const auto& round : rounds) {
    std::map<uint64_t, int> sends, receives;
    for (const ProbePair& p : round) {
      CHECK(p.from != p.to);
      CHECK(seen.insert({p.from, p.to}).second);
      CHECK(++sends[p.from] == 1);
      CHECK(++receives[p.to] == 1);
    }
  }
  CHECK(seen.size() == members.size() * (members.size() - 1));
}

TEST_CASE("probe plan: measured pairs are skipped, empty rounds dropped, at most max_rounds", "[master][probe]") {
  std::vector<uint64_t> members{1, 2, 3, 4};
  // Only the newcomer 4's pairs are unknown.
  auto known = [](uint64_t from, uint64_t to) { return from != 4 && to != 4; };
  auto rounds = plan_probes(members, known, 100);
  REQUIRE(rounds.size() == 3);
  size_t pairs = 0;
  for (const auto& round : rounds) {
    CHECK(round.size() == 2);  // 4 sends to one, one sends to 4
    for (const ProbePair& p : round) CHECK((p.from == 4 || p.to == 4));
    pairs += round.size();
  }
  CHECK(pairs == 6);
  CHECK(plan_probes(members, known, 2).size() == 2);
  CHECK(plan_probes(members, [](uint64_t, uint64_t) { return true; }, 100).empty());
  CHECK(plan_probes({1}, known, 100).empty());
}
