// What the run's emulated WAN lets a ring link carry: the figures the default
// deadline (bench_args.h) and the --json record take from --wan or --wan-topology.
//
// With a topology the master orders the ring, so any pair of the run's hosts may
// end up on it: the rate is the smallest of the used hosts' uplinks and downlinks
// and of the caps of every ordered pair among them, and the loss-limited floor
// comes from the pair whose RTT and loss give one TCP stream the least (Mathis).
#pragma once

#include <optional>
#include <string>

#include "bench_args.h"
#include "topology.h"  // stress/wan

namespace ferry::bench {

struct WanLinkBudget {
  double rate_bps = 0;    // the link rate, bits/s; 0: nothing shapes it
  std::string rate_from;  // which figure it is: "--wan rate", "uplink of site-a", "cap site-b -> site-c"
  double rtt_ms = 0;      // of the pair that limits one lossy stream the most
  double loss = 0;        // its loss; 0 when no used pair loses packets
};

// The budget of hosts 0..hosts_used-1 of `topology` (at most all of them).
WanLinkBudget topology_link_budget(const wan::Topology& topology, int hosts_used);

// std::nullopt on loopback. Reads --wan-topology's file (parse_bench_args has validated it).
std::optional<WanLinkBudget> wan_link_budget(const BenchArgs& args);

// One TCP stream's rate at that loss and RTT, bytes/s (Mathis et al.: MSS/RTT * 1.22/sqrt(p));
// infinity without loss.
double loss_limited_stream_Bps(double rtt_ms, double loss);

}  // namespace ferry::bench
