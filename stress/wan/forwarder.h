// Forwarder: the userspace delay line between the emulated hosts' TUN devices.
//
// One thread, one epoll set: every host's TUN fd (level-triggered), a signalfd (SIGTERM,
// SIGINT, SIGHUP: stop) and a pidfd of the process that started it (it exits with its
// parent, so a crashed test leaves no forwarder behind). Each wake-up reads up to kReadBudget
// packets per ready TUN straight into the PacketRing, then writes every packet whose release
// time has come to its destination's TUN, then sleeps until the next release (epoll_pwait2,
// nanosecond timeout) or the next packet.
//
// A packet's path: its pair's token bucket (the pair's rate cap, if any) and delay decide
// when it reaches the destination; there the destination's token bucket (its downlink, if
// shaped) decides when it is written. One ReleaseSchedule queue per ordered pair and one per
// destination keep each of those stages FIFO (topology.h says where each figure acts).
//
// Per frame: one read, a look at the IP header, one RNG draw per wire packet, one write; no
// allocation. A frame is one packet, or with offload a TCP GSO frame standing for up to ~44
// (tcp_gso.h). Writing to a TUN runs the destination's receive path (IP, TCP, waking the
// reader; and for ACKs the sender's transmit path) in this thread, so the forwarder's system
// time includes much of the hosts' TCP stacks; see README.md for figures.
//
// Drop rules, applied at ingress: not IP, or not to 10.77.0.x / fd77::x of another host; either end
// isolated; a SYN in a blocked direction; a SYN towards a closed host; random loss per wire packet (the pair's
// probability from WanShared, so the library can change it live); packet ring full; the
// pair's cap queue full. After the delay, as it arrives at its destination: a SYN or SYN-ACK
// towards a stateful host on no flow that host opened (FlowTable; its SYNs out are recorded
// at ingress, where they leave it), then the downlink's queue full. A drop is only counted.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "flow_table.h"
#include "packet_ring.h"
#include "release_schedule.h"
#include "tcp_gso.h"
#include "token_bucket.h"
#include "wan_shared.h"

namespace ferry::wan {

struct ForwarderOptions {
  std::vector<int> tun_fds;   // index = host; the shared page describes as many hosts
  uint64_t seed = 1;
  size_t packet_store_bytes = 0;
  size_t max_frame = 65536 + 256;  // read size: virtio_net_hdr + a 64 KiB GSO frame
  int parent_pidfd = -1;      // -1: do not watch a parent
  bool offload = true;        // TUN devices give and take TCP GSO frames
};

class Forwarder {
 public:
  // `shared` with its link and host tables (wan_shared.h), for opts.tun_fds.size() hosts.
  Forwarder(ForwarderOptions opts, WanShared* shared);
  ~Forwarder();
  Forwarder(const Forwarder&) = delete;
  Forwarder& operator=(const Forwarder&) = delete;

  enum class Exit { kSignalled, kParentGone };
  // Runs until a stop signal arrives or the parent exits, and says which. Throws
  // std::system_error when epoll itself fails.
  Exit run();

 private:
  static constexpr int kReadBudget = 64;

  // The destination host of an IP packet (~0u when none of ours) and where its TCP header
  // starts (0 when it is not TCP).
  struct Route {
    uint32_t dst = ~0u;
    size_t tcp = 0;
  };
  static Route route_of(const uint8_t* packet, size_t len);
  // What the TCP header at `tcp` (from route_of) says about the handshake; all false/0 when
  // the packet is not TCP or too short.
  struct Handshake {
    bool syn = false, ack = false, v6 = false;
    uint16_t sport = 0, dport = 0;
  };
  static Handshake handshake_of(const uint8_t* packet, size_t len, size_t tcp);
  // Whether the stateful host h->dst asked for this packet (anything but a SYN it did not).
  bool stateful_admits(PacketRing::Header* h) const;
  void read_from(int host, uint64_t now_ns);
  // Applies per-packet loss to a GSO frame sitting at `slot`; enqueues what survives.
  void commit_gso_with_loss(std::byte* slot, uint32_t len, const TcpGsoFrame& g, uint64_t threshold,
                            uint64_t now_ns, int src, int dst);
  // Stores the frame at the last reserve() and queues it on its pair (cap, then delay).
  void enqueue(uint32_t len, uint32_t wire_bytes, uint16_t segments, uint64_t now_ns, int src, int dst);
  void release_due(uint64_t now_ns);
  void write_out(uint64_t pos);
  void publish();
  uint64_t next_random();

  ForwarderOptions opts_;
  WanShared* shared_;
  size_t hosts_;
  LinkParams* link_params_;          // shared: loss is read live from here
  std::vector<TokenBucket> caps_;    // per ordered pair [src * hosts + dst]
  std::vector<uint64_t> delay_ns_;   // per ordered pair
  std::vector<TokenBucket> downlinks_;  // per destination
  std::vector<uint8_t> inbound_;        // per host: InboundPolicy (topology.h)
  std::vector<std::unique_ptr<FlowTable>> flows_;  // per host: its outbound flows when stateful, else null
  PacketRing ring_;
  // Queues 0 .. hosts²-1: pairs (cap and delay); hosts² + d: destination d's downlink.
  ReleaseSchedule schedule_;
  int epoll_fd_ = -1;
  int signal_fd_ = -1;
  uint64_t rng_[4];
  std::vector<uint8_t> keep_;     // per-segment verdicts of one GSO frame
  std::vector<std::byte> frame_;  // copy of a GSO frame being split

  // Counters kept locally and published once per wake-up (the shared page is read by
  // another process; touching it per packet would bounce its cache line for nothing).
  struct Counters {
    uint64_t rx_frames = 0, tx_frames = 0;
    uint64_t rx_packets = 0, rx_bytes = 0, tx_packets = 0, tx_bytes = 0;
    uint64_t drop_loss = 0, drop_isolated = 0, drop_blocked = 0, drop_queue = 0, drop_full = 0, drop_no_route = 0;
    uint64_t drop_closed = 0, drop_stateful = 0;
    uint64_t write_errors = 0;
    uint64_t split_frames = 0;
  } c_;
};

}  // namespace ferry::wan
