// Which links a proposal probes actively, and in which rounds.
//
// A probe measures what one ordered pair's path carries. Two probes that
// share a sender would split its uplink, and two that share a receiver its
// downlink, and each would read half the truth; so a round pairs every member
// with at most one target and one source: round k sends member i to member
// i + k (mod N), a cyclic shift, and N - 1 rounds cover every ordered pair.
// Only pairs the matrix does not hold are probed (a newcomer's, or ones aged
// out); rounds left with none are skipped. Sequential rounds cost time, but a
// parallel all-pairs probe reads each pair's share of a contended uplink,
// which is the figure a ring (one out-link per peer) never sees.
//
// At most max_rounds rounds per proposal: the rest wait for a later one, so a
// large group's vote stays bounded (link_probe.h bounds each round's time).
#pragma once

#include <cstdint>
#include <functional>
#include <utility>
#include <vector>

namespace ferry::master {

struct ProbePair {
  uint64_t from = 0;
  uint64_t to = 0;
  bool operator==(const ProbePair&) const = default;
};
using ProbeRoundPlan = std::vector<ProbePair>;

std::vector<ProbeRoundPlan> plan_probes(const std::vector<uint64_t>& members,
                                        const std::function<bool(uint64_t from, uint64_t to)>& measured,
                                        size_t max_rounds);

}  // namespace ferry::master
