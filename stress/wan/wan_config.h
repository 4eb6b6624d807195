// WanConfig: what one emulated wide-area network looks like, and its text form.
//
// The uniform network: every pair of hosts has the same RTT and loss, every host the same
// uplink. Topology (topology.h) describes the general case; Topology::uniform(config) is this
// one in that form, which is how WanNetwork runs it. The text form is what humans type (`ferry-wan run --spec ...`, `ferry-bench --wan ...`):
//
//   rtt=50ms,loss=0.1%,rate=200mbit,cc=cubic,seed=1,hosts=3
//
// Every key is optional; the defaults are the ANCHORS network (50 ms, no loss, 200 Mbit/s,
// cubic). Units: rtt takes us|ms|s (a bare number is ms); loss takes a percentage ("0.1%")
// or a fraction ("0.001"); rate takes bit|kbit|mbit|gbit (tc's spelling; "mbps" is refused
// because tc reads it as megabytes) or 0 / "none" for no shaping. burst and limit take
// bytes with an optional k|m suffix and override the derived tbf sizes. gso=on|off (default
// on) lets the TUNs carry 64 KiB TCP segmentation-offload frames, as NICs do; off forces every
// frame to one MTU-sized packet, at ~20x the forwarder's CPU.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace ferry::wan {

struct WanConfig {
  int hosts = 2;                 // 1..254; host i is 10.77.0.(i+1)
  double rtt_ms = 50.0;          // round trip between any two hosts; each packet waits rtt/2
  double loss = 0.0;             // fraction of packets dropped, uniformly at random, [0, 1]
  uint64_t rate_bps = 200'000'000;  // uplink of every host (tbf on its TUN egress); 0 = unshaped
  std::string cc = "cubic";      // congestion control set per route: cubic | bbr | reno | ...
  uint64_t seed = 1;             // loss RNG seed
  uint64_t burst_bytes = 0;      // tbf bucket; 0 = derived (tbf_burst_bytes())
  uint64_t limit_bytes = 0;      // tbf queue; 0 = derived (tbf_limit_bytes())
  bool gso = true;               // TUNs carry TCP GSO frames (loss stays per wire packet); see tcp_gso.h

  // Parses the text form on top of the defaults. Throws std::invalid_argument naming the
  // offending key and what it accepts.
  static WanConfig parse(std::string_view spec);
  // Canonical text form; parse(to_string()) gives back an equal config.
  std::string to_string() const;
  // Throws std::invalid_argument when a field is out of range.
  void validate() const;

  // tbf sizes actually used (see README.md for why these).
  uint64_t tbf_burst_bytes() const;
  uint64_t tbf_limit_bytes() const;
  bool operator==(const WanConfig&) const = default;
};

// tbf bucket for an uplink: 1 ms of line rate, at least 64 KiB with gso (16 KiB without).
uint64_t uplink_burst_bytes(uint64_t rate_bps, bool gso);
// A bottleneck's queue: one bandwidth-delay product at max(rtt, 10 ms), at least 64 KiB.
uint64_t queue_limit_bytes(uint64_t rate_bps, double rtt_ms);

}  // namespace ferry::wan
