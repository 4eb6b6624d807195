// Which ring order a group runs in, from its link matrix.
//
// A pipelined ring all-reduce moves at the speed of its slowest link, so the
// objective is the bottleneck: maximise the smallest bandwidth along the ring
// (PCCL minimises the sum of 1/bandwidth, which a ring's time does not
// follow). Among rings whose bottleneck is within `tolerance` of the best,
// the least total RTT wins (each all-reduce step waits one hop's RTT).
//
// Exact up to kExactRingSize members: the largest bandwidth threshold whose
// edges still hold a Hamiltonian cycle (a subset DP, O(2^n n^2) per test,
// binary search over the distinct bandwidths), then the least-RTT cycle
// (Held-Karp) over the edges within tolerance of it. Beyond: local search
// from the given order (moving one member, then a run of members, to wherever
// the ring's bottleneck rises, or holds with less RTT) until nothing improves
// or the time budget ends; it starts from the given order, so it is never
// worse than it.
//
// Pairs: `bandwidth` < 0 marks a pair that cannot connect (a ring must avoid
// it); 0 an unknown pair, taken as the slowest known one (neither preferred
// nor ruled out). Pure: no clock except the heuristic's budget.
#pragma once

#include <chrono>
#include <cstddef>
#include <optional>
#include <vector>

namespace ferry::master {

inline constexpr size_t kExactRingSize = 12;

struct RingProblem {
  size_t n = 0;
  std::vector<double> bandwidth;  // n*n, [from * n + to], bytes/s; < 0 unreachable, 0 unknown
  std::vector<double> rtt_ms;     // n*n
  // n*n, or empty: 1 where only a relay joins the pair (master/relay_choice.h; its
  // bandwidth and RTT already count the relay). Read only by relayed_hops().
  std::vector<uint8_t> relayed;
  double& bw(size_t from, size_t to) { return bandwidth[from * n + to]; }
  double bw(size_t from, size_t to) const { return bandwidth[from * n + to]; }
  double rtt(size_t from, size_t to) const { return rtt_ms[from * n + to]; }
  static RingProblem sized(size_t n);
};

struct RingChoice {
  std::vector<size_t> order;  // indices into the problem's members
  double bottleneck = 0;      // the smallest bandwidth along it; < 0: it uses an unreachable pair
  double total_rtt_ms = 0;
};

// How many of `order`'s links only a relay joins.
size_t relayed_hops(const RingProblem& problem, const std::vector<size_t>& order);

// The figures of `order` (unknown pairs as the slowest known).
RingChoice evaluate_ring(const RingProblem& problem, const std::vector<size_t>& order);

// The best ring as above; `start` is the order the heuristic starts from (and
// is never worse than). n < 2: the start as is.
RingChoice choose_ring(const RingProblem& problem, const std::vector<size_t>& start, double tolerance = 0.05,
                       std::chrono::milliseconds budget = std::chrono::milliseconds(500));

// When no ring avoids every unreachable pair: the fewest members to drop so
// that the rest have one (indices, ascending). Among equally small choices the
// one whose dropped members weigh least goes (`keep_weight`, one per member:
// what keeping it is worth). Exact up to kExactRingSize (a subset DP over
// every subset's Hamiltonian cycles); beyond, greedy: drop the member with
// the most unreachable pairs (the lightest on a tie) until the local search
// finds a ring. Empty when a ring already exists.
std::vector<size_t> fewest_to_drop(const RingProblem& problem, const std::vector<double>& keep_weight,
                                   std::chrono::milliseconds budget = std::chrono::milliseconds(500));

}  // namespace ferry::master
