#include "topology.h"

#include <algorithm>
#include <cstdio>
#include <iterator>
#include <set>
#include <stdexcept>

#include "wan_units.h"

namespace ferry::wan {
namespace {

// Packets from an unshaped host are assumed to come at most at 1 Gbit/s: the single
// forwarder thread cannot move much more than that anyway, and what does not fit is counted
// and dropped.
constexpr double kUnshapedBps = 1e9;

double queue_seconds(uint64_t limit_bytes, uint64_t rate_bps) {
  return rate_bps ? static_cast<double>(limit_bytes) * 8.0 / static_cast<double>(rate_bps) : 0.0;
}

bool valid_name(const std::string& s) {
  return !s.empty() && s.size() <= 64 &&
         s.find_first_not_of("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789-_.") == std::string::npos;
}

}  // namespace

Topology Topology::uniform(const WanConfig& config) {
  config.validate();
  Topology t;
  t.source = "spec " + config.to_string();
  t.base = config;
  for (int i = 0; i < config.hosts; ++i) {
    // Appended, not "h" + to_string(i): gcc 12 -O3 warns falsely (-Wrestrict) on the latter.
    std::string name = "h";
    name += std::to_string(i);
    t.hosts.push_back(TopologyHost{std::move(name), "uniform", config.rate_bps, 0});
  }
  t.links.assign(static_cast<size_t>(config.hosts) * static_cast<size_t>(config.hosts),
                 TopologyLink{config.rtt_ms / 2.0, config.loss, 0, false});
  return t;
}

void Topology::validate() const {
  const std::string where = "topology " + source + ": ";
  if (hosts.empty() || hosts.size() > 254)
    throw std::invalid_argument(where + "needs 1..254 hosts (one /24), got " + std::to_string(hosts.size()));
  if (links.size() != hosts.size() * hosts.size())
    throw std::invalid_argument(where + "needs one link per ordered pair of hosts");
  try {
    WanConfig b = base;
    b.hosts = size();
    b.validate();
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(where + e.what());
  }
  std::set<std::string> names;
  for (const TopologyHost& h : hosts) {
    if (!valid_name(h.name))
      throw std::invalid_argument(where + "host name '" + h.name + "' must be 1..64 letters, digits, '-', '_', '.'");
    if (!names.insert(h.name).second) throw std::invalid_argument(where + "two hosts are named '" + h.name + "'");
    if (h.region.empty()) throw std::invalid_argument(where + "host '" + h.name + "' has no region");
    for (uint64_t r : {h.uplink_bps, h.downlink_bps})
      if (r != 0 && (r < 8'000 || r > 1'000'000'000'000))
        throw std::invalid_argument(where + "host '" + h.name + "': a rate must be 8kbit..1000gbit or none");
  }
  for (int s = 0; s < size(); ++s)
    for (int d = 0; d < size(); ++d) {
      if (s == d) continue;
      const TopologyLink& l = link(s, d);
      const std::string pair = where + "link " + hosts[s].name + " -> " + hosts[d].name + ": ";
      if (!(l.delay_ms >= 0 && l.delay_ms <= 30'000)) throw std::invalid_argument(pair + "delay must be 0..30s one way");
      if (!(l.loss >= 0 && l.loss <= 1)) throw std::invalid_argument(pair + "loss must be in [0, 1]");
      if (l.rate_bps != 0 && (l.rate_bps < 8'000 || l.rate_bps > 1'000'000'000'000))
        throw std::invalid_argument(pair + "rate must be 8kbit..1000gbit or none");
    }
}

const char* inbound_name(InboundPolicy p) {
  static constexpr const char* kNames[] = {"open", "closed", "stateful"};  // in the enum's order
  const auto i = static_cast<size_t>(p);
  return i < std::size(kNames) ? kNames[i] : "?";
}

int Topology::count_inbound(InboundPolicy p) const {
  return static_cast<int>(
      std::count_if(hosts.begin(), hosts.end(), [p](const TopologyHost& h) { return h.inbound == p; }));
}

int Topology::host_index(std::string_view name) const {
  for (int i = 0; i < size(); ++i)
    if (hosts[i].name == name) return i;
  return -1;
}

double Topology::max_rtt_ms(int host) const {
  double m = 0;
  for (int o = 0; o < size(); ++o)
    if (o != host) m = std::max(m, rtt_ms(host, o));
  return m;
}

uint64_t Topology::uplink_burst_bytes(int host) const {
  return base.burst_bytes ? base.burst_bytes : wan::uplink_burst_bytes(hosts[host].uplink_bps, base.gso);
}
uint64_t Topology::uplink_limit_bytes(int host) const {
  return base.limit_bytes ? base.limit_bytes : queue_limit_bytes(hosts[host].uplink_bps, max_rtt_ms(host));
}
uint64_t Topology::downlink_burst_bytes(int host) const {
  return wan::uplink_burst_bytes(hosts[host].downlink_bps, base.gso);
}
uint64_t Topology::downlink_limit_bytes(int host) const {
  return queue_limit_bytes(hosts[host].downlink_bps, max_rtt_ms(host));
}
uint64_t Topology::cap_burst_bytes(int src, int dst) const {
  return wan::uplink_burst_bytes(link(src, dst).rate_bps, base.gso);
}
uint64_t Topology::cap_limit_bytes(int src, int dst) const {
  return queue_limit_bytes(link(src, dst).rate_bps, rtt_ms(src, dst));
}

uint64_t Topology::packet_store_bytes() const {
  double send_Bps = 0;
  for (const TopologyHost& h : hosts) send_Bps += (h.uplink_bps ? static_cast<double>(h.uplink_bps) : kUnshapedBps) / 8.0;
  double hold_s = 0;
  for (int s = 0; s < size(); ++s)
    for (int d = 0; d < size(); ++d) {
      if (s == d) continue;
      const double wait = link(s, d).delay_ms / 1e3 +
                          queue_seconds(cap_limit_bytes(s, d), link(s, d).rate_bps) +
                          queue_seconds(downlink_limit_bytes(d), hosts[d].downlink_bps);
      hold_s = std::max(hold_s, wait);
    }
  const double bytes = 2.0 * send_Bps * hold_s + 4.0 * 1024 * 1024;
  return std::min<uint64_t>(static_cast<uint64_t>(bytes), uint64_t{1} << 30);
}

std::string Topology::describe() const {
  std::string out = "topology " + source + ": " + std::to_string(size()) + " hosts";
  std::string policies;  // "(2 closed, 1 stateful)": the hosts that are not open
  for (InboundPolicy p : {InboundPolicy::closed, InboundPolicy::stateful})
    if (const int n = count_inbound(p)) policies += (policies.empty() ? "" : ", ") + std::to_string(n) + " " + inbound_name(p);
  if (!policies.empty()) out += " (" + policies + ")";
  out += ", cc " + base.cc + "\n";
  char line[256];
  for (int i = 0; i < size(); ++i) {
    const char* ip = hosts[i].ip == IpFamilies::both ? ", IPv4 and IPv6" : hosts[i].ip == IpFamilies::v6 ? ", IPv6 only" : "";
    const InboundPolicy in = hosts[i].inbound;
    const std::string inbound = in == InboundPolicy::open ? "" : std::string(", inbound ") + inbound_name(in);
    std::snprintf(line, sizeof line, "  %-3d %-16s %-14s up %-9s down %s%s%s\n", i, hosts[i].name.c_str(),
                  hosts[i].region.c_str(), format_rate(hosts[i].uplink_bps).c_str(),
                  format_rate(hosts[i].downlink_bps).c_str(), ip, inbound.c_str());
    out += line;
  }
  for (int s = 0; s < size(); ++s)
    for (int d = s + 1; d < size(); ++d) {
      const TopologyLink& ab = link(s, d);
      const TopologyLink& ba = link(d, s);
      std::snprintf(line, sizeof line, "  %s <-> %s: rtt %s ms, loss %s%% / %s%%", hosts[s].name.c_str(),
                    hosts[d].name.c_str(), format_double(rtt_ms(s, d)).c_str(), format_double(ab.loss * 100).c_str(),
                    format_double(ba.loss * 100).c_str());
      out += line;
      if (ab.rate_bps || ba.rate_bps) out += ", cap " + format_rate(ab.rate_bps) + " / " + format_rate(ba.rate_bps);
      if (ab.blocked) out += ", " + hosts[s].name + " cannot connect to " + hosts[d].name;
      if (ba.blocked) out += ", " + hosts[d].name + " cannot connect to " + hosts[s].name;
      if (!can_address(s, d)) out += ", no address family in common";
      out += "\n";
    }
  return out;
}

}  // namespace ferry::wan
