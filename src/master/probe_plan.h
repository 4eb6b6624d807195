// Which links a proposal probes actively, and in which rounds.
//
// A probe measures what one ordered pair's path carries, so no other probe
// may touch either end while it runs: two probes that share a sender would
// split its uplink, two that share a receiver its downlink, and a sender that
// is also receiving another probe has that probe's queue in front of its own
// acknowledgements (measured on three-regions: euw1-b -> use1-b read 7.2 and
// 7.4 MB/s of 12.5 while use1-b probed euw1-b's 100 Mbit/s downlink, 11.9
// alone). So a round is a matching: each member is in at most one probe, as
// sender or receiver. Rounds are built greedily over the unmeasured pairs in
// cyclic-shift order (member i to i + k, for k = 1, 2, ...), which spreads
// each member's probes over the rounds; a complete group of N takes about
// 2(N - 1) rounds. Only pairs the matrix does not hold are probed (a
// newcomer's, or ones aged out). A parallel all-pairs probe would be faster
// and read each pair's share of contended links, which a ring never sees.
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
