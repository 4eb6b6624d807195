// The memory the library and ferry-wan-forwarder share (a memfd both map).
//
// Layout: WanShared, then one LinkParams per ordered pair of hosts ([src * hosts + dst]),
// then one HostParams per host (shared_links(), shared_hosts()). The library writes the
// topology there before it spawns the forwarder, which copies the fixed figures once; loss
// and isolation stay live (library -> forwarder), counters flow back. Live fields are
// lock-free std::atomics, which are address-free and therefore valid across processes;
// relaxed order everywhere because no field guards another. The forwarder reads the control
// fields once per packet (a plain load on x86), so a change takes effect on the next packet.
#pragma once

#include <atomic>
#include <cmath>
#include <cstddef>
#include <cstdint>

namespace ferry::wan {

inline constexpr uint32_t kSharedMagic = 0x46574e33;  // "FWN3": with inbound policies
inline constexpr int kMaxHosts = 254;
// Host i has address 10.77.0.(i+1)/24 on its TUN. Every network lives in its own namespaces,
// so two networks (or two users) reuse the same subnet without meeting.
inline constexpr uint32_t kSubnet = (10u << 24) | (77u << 16);  // 10.77.0.0/24, host order
inline constexpr const char* kSubnetText = "10.77.0.0/24";
// And fd77::(i+1)/64 when the topology gives it IPv6 (topology.h, IpFamilies): a unique
// local prefix, never routed beyond the network's namespaces.
inline constexpr uint8_t kSubnet6[14] = {0xfd, 0x77, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0};
inline constexpr const char* kSubnet6Text = "fd77::/64";
inline constexpr const char* kTunName = "wan0";

struct WanShared {
  uint32_t magic;
  uint32_t hosts;

  // --- control: written by the library ---
  // Non-zero: every packet from or to host i is dropped (a black hole / partition).
  std::atomic<uint8_t> isolated[kMaxHosts];

  // --- counters: written by the forwarder ---
  // Packets are wire packets (a GSO frame counts as its segments); frames are reads/writes.
  std::atomic<uint64_t> rx_frames;
  std::atomic<uint64_t> tx_frames;
  std::atomic<uint64_t> rx_packets;      // read from a TUN
  std::atomic<uint64_t> rx_bytes;
  std::atomic<uint64_t> tx_packets;      // written to the destination TUN after the delay
  std::atomic<uint64_t> tx_bytes;
  std::atomic<uint64_t> drop_loss;       // random loss
  std::atomic<uint64_t> drop_isolated;   // isolate()d host
  std::atomic<uint64_t> drop_blocked;    // SYNs of a blocked direction
  std::atomic<uint64_t> drop_closed;     // SYNs towards a host whose inbound policy is closed
  std::atomic<uint64_t> drop_stateful;   // SYNs and SYN-ACKs towards a stateful host that it did not ask for
  std::atomic<uint64_t> flows_evicted;   // live flows a stateful host's full table forgot
  std::atomic<uint64_t> drop_queue;      // a pair cap's or a downlink's queue was full
  std::atomic<uint64_t> drop_full;       // packet ring full (should stay 0)
  std::atomic<uint64_t> drop_no_route;   // not to 10.77.0.x or fd77::x of a live host
  std::atomic<uint64_t> write_errors;    // destination TUN refused the packet
  std::atomic<uint64_t> split_frames;    // GSO frames cut into runs around lost segments
  std::atomic<uint64_t> queue_peak_bytes;
};

// One direction of one pair. Fixed before the forwarder starts, except loss.
struct LinkParams {
  uint64_t delay_ns;
  uint64_t cap_bps;      // 0: no cap
  uint64_t cap_burst_bytes;
  uint64_t cap_limit_bytes;
  // A packet is dropped when (rng >> 11) < loss_threshold53, i.e. with probability
  // loss_threshold53 / 2^53; 2^53 drops everything.
  std::atomic<uint64_t> loss_threshold53;
  uint64_t blocked;      // non-zero: SYNs without ACK in this direction are dropped
};

// Fixed before the forwarder starts.
struct HostParams {
  uint64_t downlink_bps;  // 0: unshaped
  uint64_t downlink_burst_bytes;
  uint64_t downlink_limit_bytes;
  uint64_t inbound;       // InboundPolicy (topology.h): 0 open, 1 closed, 2 stateful
};

inline size_t shared_bytes(size_t hosts) {
  return sizeof(WanShared) + hosts * hosts * sizeof(LinkParams) + hosts * sizeof(HostParams);
}
inline LinkParams* shared_links(WanShared* s) {
  return reinterpret_cast<LinkParams*>(reinterpret_cast<std::byte*>(s) + sizeof(WanShared));
}
inline HostParams* shared_hosts(WanShared* s) {
  return reinterpret_cast<HostParams*>(shared_links(s) + size_t{s->hosts} * s->hosts);
}
static_assert(sizeof(WanShared) % alignof(LinkParams) == 0 && sizeof(LinkParams) % alignof(HostParams) == 0);
static_assert(std::atomic<uint64_t>::is_always_lock_free);
static_assert(std::atomic<uint8_t>::is_always_lock_free);

inline uint64_t loss_to_threshold53(double loss) {
  if (!(loss > 0)) return 0;
  if (loss >= 1) return uint64_t{1} << 53;
  return static_cast<uint64_t>(std::ldexp(loss, 53));
}

}  // namespace ferry::wan
