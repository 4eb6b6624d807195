// Which pairs a proposal probes, and in which rounds (master/probe_plan.h).
#include <catch2/catch.hpp>

#include <map>
#include <set>

#include "master/probe_plan.h"

using namespace ferry::master;

TEST_CASE("probe plan: every unmeasured ordered pair once, no peer in two probes of a round", "[master][probe]") {
  for (std::vector<uint64_t> members : {std::vector<uint64_t>{4, 9, 2, 7, 5}, std::vector<uint64_t>{1, 2, 3, 4, 5, 6}}) {
    auto nothing = [](uint64_t, uint64_t) { return false; };
    auto rounds = plan_probes(members, nothing, 100);
    const size_t n = members.size();
    // A round holds at most n / 2 probes: at least n (n - 1) / (n / 2) rounds, and greedy
    // matching stays within one round per member of that.
    CHECK(rounds.size() >= n * (n - 1) / (n / 2));
    CHECK(rounds.size() <= n * (n - 1) / (n / 2) + n);
    std::set<std::pair<uint64_t, uint64_t>> seen;
    for (const auto& round : rounds) {
      std::map<uint64_t, int> busy;  // sending or receiving
      for (const ProbePair& p : round) {
        CHECK(p.from != p.to);
        CHECK(seen.insert({p.from, p.to}).second);
        CHECK(++busy[p.from] == 1);
        CHECK(++busy[p.to] == 1);
      }
    }
    CHECK(seen.size() == n * (n - 1));
  }
}

TEST_CASE("probe plan: measured pairs are skipped, empty rounds dropped, at most max_rounds", "[master][probe]") {
  std::vector<uint64_t> members{1, 2, 3, 4};
  // Only the newcomer 4's pairs are unknown.
  auto known = [](uint64_t from, uint64_t to) { return from != 4 && to != 4; };
  auto rounds = plan_probes(members, known, 100);
  REQUIRE(rounds.size() == 6);  // one of 4's probes per round: it sends or it receives
  for (const auto& round : rounds) {
    REQUIRE(round.size() == 1);
    CHECK((round[0].from == 4 || round[0].to == 4));
  }
  CHECK(plan_probes(members, known, 2).size() == 2);
  CHECK(plan_probes(members, [](uint64_t, uint64_t) { return true; }, 100).empty());
  CHECK(plan_probes({1}, known, 100).empty());
}
