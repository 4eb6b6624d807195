// The page the library and ferry-wan-forwarder share (a memfd both map).
//
// Control flows library -> forwarder (loss, isolation), counters flow back. Every field is a
// lock-free std::atomic, which is address-free and therefore valid across processes; relaxed
// order everywhere because no field guards another. The forwarder reads the control fields
// once per packet (a plain load on x86), so a change takes effect on the next packet.
#pragma once

#include <atomic>
#include <cmath>
#include <cstdint>

namespace ferry::wan {

inline constexpr uint32_t kSharedMagic = 0x46574e31;  // "FWN1"
inline constexpr int kMaxHosts = 254;
// Host i has address 10.77.0.(i+1)/24 on its TUN. Every network lives in its own namespaces,
// so two networks (or two users) reuse the same subnet without meeting.
inline constexpr uint32_t kSubnet = (10u << 24) | (77u << 16);  // 10.77.0.0/24, host order
inline constexpr const char* kSubnetText = "10.77.0.0/24";
inline constexpr const char* kTunName = "wan0";

struct WanShared {
  uint32_t magic;
  uint32_t hosts;

  // --- control: written by the library ---
  // A packet is dropped when (rng >> 11) < loss_threshold53, i.e. with probability
  // loss_threshold53 / 2^53; 2^53 drops everything.
  std::atomic<uint64_t> loss_threshold53;
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
  std::atomic<uint64_t> drop_full;       // delay line full (should stay 0)
  std::atomic<uint64_t> drop_no_route;   // not IPv4 to 10.77.0.x of a live host
  std::atomic<uint64_t> write_errors;    // destination TUN refused the packet
  std::atomic<uint64_t> split_frames;    // GSO frames cut into runs around lost segments
  std::atomic<uint64_t> queue_peak_bytes;
};
static_assert(std::atomic<uint64_t>::is_always_lock_free);
static_assert(std::atomic<uint8_t>::is_always_lock_free);

inline uint64_t loss_to_threshold53(double loss) {
  if (!(loss > 0)) return 0;
  if (loss >= 1) return uint64_t{1} << 53;
  return static_cast<uint64_t>(std::ldexp(loss, 53));
}

}  // namespace ferry::wan
