#include "master/probe_plan.h"

namespace ferry::master {

std::vector<ProbeRoundPlan> plan_probes(const std::vector<uint64_t>& members,
                                        const std::function<bool(uint64_t from, uint64_t to)>& measured,
                                        size_t max_rounds) {
  std::vector<ProbeRoundPlan> rounds;
  size_t n = members.size();
  for (size_t shift = 1; shift < n && rounds.size() < max_rounds; ++shift) {
    ProbeRoundPlan round;
    for (size_t i = 0; i < n; ++i) {
      uint64_t from = members[i], to = members[(i + shift) % n];
      if (!measured(from, to)) round.push_back({from, to});
    }
    if (!round.empty()) rounds.push_back(std::move(round));
  }
  return rounds;
}

}  // namespace ferry::master
