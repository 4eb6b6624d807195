#include "master/probe_plan.h"

namespace ferry::master {

// Pairs are kept as member positions and rounds mark who is busy in a flat
// table: a 256-member newcomer vote weighs 65,280 unmeasured pairs per round,
// which a std::set of busy ids per pair made ~4 % of the whole admission's
// master CPU (ferry-master-load). The rounds are the same.
std::vector<ProbeRoundPlan> plan_probes(const std::vector<uint64_t>& members,
                                        const std::function<bool(uint64_t from, uint64_t to)>& measured,
                                        size_t max_rounds) {
  struct Positions {
    size_t from, to;
  };
  std::vector<Positions> wanted;
  const size_t n = members.size();
  for (size_t shift = 1; shift < n; ++shift)
    for (size_t i = 0; i < n; ++i)
      if (!measured(members[i], members[(i + shift) % n])) wanted.push_back({i, (i + shift) % n});
  std::vector<ProbeRoundPlan> rounds;
  std::vector<bool> busy(n);
  while (!wanted.empty() && rounds.size() < max_rounds) {
    ProbeRoundPlan round;
    std::fill(busy.begin(), busy.end(), false);
    std::vector<Positions> later;
    for (const Positions& p : wanted) {
      if (busy[p.from] || busy[p.to]) {
        later.push_back(p);
        continue;
      }
      busy[p.from] = busy[p.to] = true;
      round.push_back({members[p.from], members[p.to]});
    }
    rounds.push_back(std::move(round));
    wanted = std::move(later);
  }
  return rounds;
}

}  // namespace ferry::master
