// WanNetwork: N emulated hosts joined by a lossy, long-delay, rate-capped network.
//
//   auto net = ferry::wan::WanNetwork::start(ferry::wan::WanConfig::parse("hosts=3,rtt=50ms,loss=0.1%"));
//   auto geo = ferry::wan::WanNetwork::start(ferry::wan::Topology::load("three-regions.json"));
//   std::vector<std::string> cmd = net.exec_prefix(0);   // {"ip","netns","exec","fw…h0"}
//   cmd.insert(cmd.end(), {"ferry-master", "--listen", net.hosts()[0].ip + ":7000"});
//   ...                                                    // spawn it; likewise peers on 1, 2
//   net.stop();                                            // or let the destructor do it
//
// Each host is a network namespace with one TUN device (wan0, 10.77.0.(i+1)/24, MTU 1500) and
// loopback; a host the topology gives IPv6 has fd77::(i+1)/64 there too (or only that). The hosts' TUNs are all held by one ferry-wan-forwarder process, which delays
// each packet by its pair's one-way delay, drops its pair's fraction `loss`, applies the
// pair's rate cap, the destination's downlink, blocked pairs and the hosts' inbound policies (topology.h); tbf on each
// TUN's egress caps the host's uplink; the route to 10.77.0.0/24 carries `congctl <cc>`, so
// every TCP socket between hosts uses that congestion control unless it sets TCP_CONGESTION
// itself. A WanConfig is the uniform topology (Topology::uniform).
//
// Needs root (namespaces, TUN, tc); start() says so in its error otherwise.
//
// Threads: start() and stop() from any one thread at a time; hosts(), exec_prefix(),
// set_loss(), isolate() and stats() may be called from any thread while the network runs
// (the control page is atomic; nothing else changes after start()).
#pragma once

#include <sys/types.h>

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "netns.h"
#include "topology.h"
#include "wan_config.h"

namespace ferry::wan {

struct Host {
  int index = 0;
  std::string netns;  // fw<pid>n<k>h<i>; enter with ScopedNetns or `ip netns exec`
  std::string ip;     // ip4 when it has one, else ip6: the address to give others
  std::string ip4;    // 10.77.0.(index+1), or "" on a host the topology gives IPv6 only
  std::string ip6;    // fd77::(index+1), or "" on a host without IPv6 (the default)
  std::string tun;    // wan0
  std::string name;   // the topology's name for it (h<i> for a spec)
  std::string region;
};

struct WanStats {
  // Packets are wire packets (a GSO frame counts as its segments); frames are the reads and
  // writes the forwarder made.
  uint64_t rx_frames = 0, tx_frames = 0;
  uint64_t rx_packets = 0, rx_bytes = 0;  // taken from the hosts' TUNs
  uint64_t tx_packets = 0, tx_bytes = 0;  // delivered after the delay
  uint64_t drop_loss = 0, drop_isolated = 0, drop_full = 0, drop_no_route = 0, write_errors = 0;
  uint64_t drop_blocked = 0;              // SYNs of a blocked direction
  uint64_t drop_closed = 0;               // SYNs towards a host whose inbound policy is closed
  uint64_t drop_stateful = 0;             // SYNs / SYN-ACKs towards a stateful host that it did not ask for
  uint64_t flows_evicted = 0;             // live flows a stateful host's full flow table forgot
  uint64_t drop_queue = 0;                // a pair cap's or a downlink's queue was full
  uint64_t split_frames = 0;              // GSO frames cut around lost segments
  uint64_t queue_peak_bytes = 0;          // most bytes ever held in the packet ring
  double forwarder_user_s = 0, forwarder_sys_s = 0;  // CPU the forwarder has used so far
};

class WanNetwork {
 public:
  // Removes stale namespaces of crashed runs first (remove_stale_netns()), then builds the
  // network. Throws std::runtime_error when not root ("needs root: network namespaces ..."),
  // when the congestion control is not available (after trying `modprobe tcp_<cc>`), when
  // ferry-wan-forwarder cannot be found, or when a setup command fails; everything half-built
  // is removed before it throws.
  static WanNetwork start(const WanConfig& config);
  // The same from a topology; also throws std::invalid_argument when it does not validate.
  static WanNetwork start(const Topology& topology);

  WanNetwork(WanNetwork&&) noexcept;
  WanNetwork& operator=(WanNetwork&&) noexcept;
  ~WanNetwork();  // stop()

  // The spec it was started from; for a topology, its settings (cc, seed, gso, hosts) and
  // its defaults (rtt, loss, uplink), which not every pair need have.
  const WanConfig& config() const;
  const Topology& topology() const;
  const std::vector<Host>& hosts() const;
  // {"ip", "netns", "exec", <netns of host>}: prepend to a command to run it on that host.
  std::vector<std::string> exec_prefix(int host) const;
  // FERRY_WAN_HOSTS=<n>, FERRY_WAN_NETNS="<ns0> <ns1> ...", FERRY_WAN_IPS="<ip0> ...",
  // FERRY_WAN_NETNS_<i>, FERRY_WAN_IP_<i> (the host's `ip`), FERRY_WAN_IP4_<i> and FERRY_WAN_IP6_<i>
  // (each "" when the host lacks that family), FERRY_WAN_NAME_<i>, FERRY_WAN_REGION_<i>,
  // FERRY_WAN_INBOUND_<i> (open, closed or stateful), and
  // FERRY_WAN_SPEC=<config().to_string()> when started from a spec, else
  // FERRY_WAN_TOPOLOGY=<topology().source> (the file).
  std::vector<std::pair<std::string, std::string>> environment() const;

  // Live faults for ferry-chaos; they act on the next packet.
  void set_loss(double loss);            // [0, 1], every pair (a topology's own losses are replaced)
  void set_link_loss(int from, int to, double loss);  // one direction of one pair
  void isolate(int host, bool isolated);  // drop everything from and to the host

  WanStats stats() const;  // after stop(): the last figures
  pid_t forwarder_pid() const;
  bool forwarder_running() const;

  // Idempotent. Stops every process still running inside the hosts (SIGTERM, SIGKILL after
  // 0.5 s), stops the forwarder, deletes the namespaces. Never throws.
  void stop();

  // Path of ferry-wan-forwarder: $FERRY_WAN_FORWARDER, else next to the running executable,
  // else where the build put it.
  static std::string forwarder_path();

 private:
  struct Impl;
  explicit WanNetwork(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace ferry::wan
