// Topology: an emulated network with geography. Hosts have a region, an uplink and a
// downlink; every ordered pair of hosts has its own one-way delay, loss, optional rate cap,
// and may be blocked (the firewall drops that direction's SYNs); every host has an inbound
// policy (open, closed, stateful: who may open connections to it).
//
// Two ways in: Topology::uniform(WanConfig) (the `rtt=50ms,...` spec: every pair alike) and
// Topology::load(path) (a JSON file; the format is in topology_json.cpp and README.md, and
// stress/wan/topologies/ has examples). WanNetwork::start() takes either.
//
// Where each figure acts (stress/wan/README.md, "Where each figure acts"):
//   uplink    tbf on the host's TUN egress, in the host's kernel (as with a spec);
//   rate cap  a token bucket per ordered pair in the forwarder, before the delay;
//   delay     the forwarder's per-pair queues;
//   downlink  a token bucket per destination in the forwarder, after the delay;
//   loss      one draw per wire packet at the forwarder's ingress, per ordered pair.
//   inbound   closed: at the forwarder's ingress; stateful: as a packet arrives at the host.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "wan_config.h"

namespace ferry::wan {

// The address families a host has (JSON "ip": "v4", "v6" or "both"). A host without a
// family cannot send to or receive from that family's addresses at all, as on a site
// whose provider gives it only one: two hosts with no family in common cannot connect.
enum class IpFamilies { v4, v6, both };

// Which connections from other hosts a host admits (JSON "inbound"). Checked by the
// forwarder on TCP handshake packets only; every connection that gets established carries
// data both ways, and a host's own dials out always leave.
//   open      every one (the default; as before).
//   closed    none: every SYN without ACK towards the host is dropped (an outbound-only
//             security group, a NAT that changes ports, a pod with no exposed port). Its
//             own dials work, since their SYN-ACKs come back.
//   stateful  only those it asked for: a SYN or SYN-ACK towards the host is admitted when
//             the host sent a SYN on the same 5-tuple (reversed) within the last 120 s
//             (flow_table.h), checked as the packet arrives at the host, after the delay.
//             A plain dial from outside fails; its own dials work; and a TCP simultaneous
//             open (both ends connect to each other from known ports) gets through, as
//             through a stateful firewall or a port-preserving NAT.
enum class InboundPolicy : uint8_t { open = 0, closed = 1, stateful = 2 };
const char* inbound_name(InboundPolicy p);  // "open", "closed", "stateful"

struct TopologyHost {
  std::string name;           // unique: letters, digits, '-', '_', '.'
  std::string region;         // hosts of one region share the region's figures
  uint64_t uplink_bps = 0;    // 0 = unshaped
  uint64_t downlink_bps = 0;  // 0 = unshaped
  IpFamilies ip = IpFamilies::v4;
  InboundPolicy inbound = InboundPolicy::open;
  bool has_v4() const { return ip != IpFamilies::v6; }
  bool has_v6() const { return ip != IpFamilies::v4; }
  bool operator==(const TopologyHost&) const = default;
};

// One direction of one pair of hosts.
struct TopologyLink {
  double delay_ms = 25.0;  // one way; a pair's RTT is the sum of its two directions
  double loss = 0.0;       // fraction of wire packets dropped in this direction, [0, 1]
  uint64_t rate_bps = 0;   // cap on this direction; 0 = only the hosts' links limit it
  bool blocked = false;    // SYNs (without ACK) in this direction are dropped
  bool operator==(const TopologyLink&) const = default;
};

struct Topology {
  std::string source;  // the file, or "spec <text>": for messages and FERRY_WAN_TOPOLOGY
  // Settings of the whole network (cc, seed, gso, burst and limit overrides); hosts is
  // hosts.size(); rtt, loss and rate hold the file's defaults.
  WanConfig base;
  std::vector<TopologyHost> hosts;
  std::vector<TopologyLink> links;  // hosts.size()² entries, [src * hosts + dst]; diagonal unused

  // Every pair gets rtt/2 each way and the same loss; every host the spec's rate as uplink.
  static Topology uniform(const WanConfig& config);
  // Reads and validates a JSON topology. Throws std::invalid_argument naming the file and the
  // key, host, region or pair at fault (and the line and column of a syntax error).
  static Topology load(const std::string& path);
  static Topology parse_json(std::string_view text, const std::string& source);

  // Throws std::invalid_argument when a field is out of range.
  void validate() const;

  int size() const { return static_cast<int>(hosts.size()); }
  const TopologyLink& link(int src, int dst) const { return links[static_cast<size_t>(src * size() + dst)]; }
  TopologyLink& link(int src, int dst) { return links[static_cast<size_t>(src * size() + dst)]; }
  int host_index(std::string_view name) const;  // -1 when there is none
  double rtt_ms(int a, int b) const { return link(a, b).delay_ms + link(b, a).delay_ms; }
  double max_rtt_ms(int host) const;  // over the host's pairs
  // Whether a and b share an address family (else nothing they send each other arrives).
  bool can_address(int a, int b) const {
    return (hosts[a].has_v4() && hosts[b].has_v4()) || (hosts[a].has_v6() && hosts[b].has_v6());
  }

  // Queue sizes (see WanConfig for why these): the host's tbf, and the forwarder's buckets.
  uint64_t uplink_burst_bytes(int host) const;
  uint64_t uplink_limit_bytes(int host) const;
  uint64_t downlink_burst_bytes(int host) const;
  uint64_t downlink_limit_bytes(int host) const;
  uint64_t cap_burst_bytes(int src, int dst) const;
  uint64_t cap_limit_bytes(int src, int dst) const;
  // Bytes the forwarder preallocates for packets in flight: what all hosts can send while
  // the slowest packet waits (delay plus full cap and downlink queues), twice over, plus
  // 4 MiB; at most 1 GiB. For a uniform network: 2 x hosts x rate x rtt/2 + 4 MiB.
  uint64_t packet_store_bytes() const;

  // How many hosts have this inbound policy.
  int count_inbound(InboundPolicy p) const;

  // A few lines for humans: hosts (with their inbound policy unless open), then the RTT of
  // every pair. The first line counts the closed and stateful hosts, if any.
  std::string describe() const;

  bool operator==(const Topology&) const = default;
};

}  // namespace ferry::wan
