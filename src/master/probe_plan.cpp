#include "master/probe_plan.h"

#include <set>

namespace ferry::master {

std::vector<ProbeRoundPlan> plan_probes(const std::vector<uint64_t>& members,
                                        const std::function<bool(uint64_t from, uint64_t to)>& measured,
                                        size_t max_rounds) {
  std::vector<ProbePair> wanted;
  const size_t n = members.size();
  for (size_t shift = 1; shift < n; ++shift)
    for (size_t i = 0; i < n; ++i) {
      uint64_t from = members[i], to = members[(i + shift) % n];
      if (!measured(from, to)) wanted.push_back({from, to});
    }
  std::vector<ProbeRoundPlan> rounds;
  while (!wanted.empty() && rounds.size() < max_rounds) {
    ProbeRoundPlan round;
    std::set<uint64_t> busy;
    std::vector<ProbePair> later;
    for (const ProbePair& p : wanted) {
      if (busy.count(p.from) || busy.count(p.to)) {
        later.push_back(p);
        continue;
      }
      busy.insert(p.from);
      busy.insert(p.to);
      round.push_back(p);
    }
    rounds.push_back(std::move(round));
    wanted = std::move(later);
  }
  return rounds;
}

}  // namespace ferry::master
