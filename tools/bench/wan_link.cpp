#include "wan_link.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "wan_config.h"  // stress/wan

namespace ferry::bench {

namespace {

constexpr double kMss = 1448.0;

// Keeps the smallest non-zero rate and says where it came from.
void consider_rate(WanLinkBudget& budget, std::uint64_t bps, const std::string& what) {
  if (bps == 0) return;
  if (budget.rate_bps == 0 || static_cast<double>(bps) < budget.rate_bps) {
    budget.rate_bps = static_cast<double>(bps);
    budget.rate_from = what;
  }
}

}  // namespace

double loss_limited_stream_Bps(double rtt_ms, double loss) {
  if (loss <= 0 || rtt_ms <= 0) return std::numeric_limits<double>::infinity();
  return kMss / (rtt_ms / 1000) * 1.22 / std::sqrt(loss);
}

WanLinkBudget topology_link_budget(const wan::Topology& topology, int hosts_used) {
  WanLinkBudget budget;
  double worst_stream = std::numeric_limits<double>::infinity();
  hosts_used = std::min(hosts_used, topology.size());
  for (int s = 0; s < hosts_used; ++s) {
    const wan::TopologyHost& host = topology.hosts[static_cast<std::size_t>(s)];
    consider_rate(budget, host.uplink_bps, "uplink of " + host.name);
    consider_rate(budget, host.downlink_bps, "downlink of " + host.name);
    for (int d = 0; d < hosts_used; ++d) {
      if (d == s) continue;
      const wan::TopologyLink& link = topology.link(s, d);
      const std::string& to = topology.hosts[static_cast<std::size_t>(d)].name;
      consider_rate(budget, link.rate_bps, "cap " + host.name + " -> " + to);
      const double stream = loss_limited_stream_Bps(topology.rtt_ms(s, d), link.loss);
      if (stream < worst_stream) {
        worst_stream = stream;
        budget.rtt_ms = topology.rtt_ms(s, d);
        budget.loss = link.loss;
      }
    }
  }
  return budget;
}

std::optional<WanLinkBudget> wan_link_budget(const BenchArgs& args) {
  if (!args.wan_topology.empty()) return topology_link_budget(wan::Topology::load(args.wan_topology), args.peers);
  if (args.wan.empty()) return std::nullopt;
  const wan::WanConfig link = wan::WanConfig::parse(args.wan);
  WanLinkBudget budget;
  consider_rate(budget, link.rate_bps, "--wan rate");
  budget.rtt_ms = link.rtt_ms;
  budget.loss = link.loss;
  return budget;
}

}  // namespace ferry::bench
