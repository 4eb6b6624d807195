// FlowTable: the connections one `stateful` host opened outward, as its firewall or NAT
// remembers them (topology.h, InboundPolicy::stateful).
//
// A flow is a TCP 5-tuple seen from the host: its own address and port, the remote address
// and port. In the emulated network a host has exactly one address per family and every
// remote address is another host's, so the tuple is packed into 64 bits: the family, the
// remote host's index, the local port and the remote port (key()). The forwarder records a
// flow when the host sends a SYN (opened(); a retransmission refreshes it) and admits an
// inbound SYN or SYN-ACK only when admits() finds the reverse of it, fresh.
//
// Timeout: kStatefulTimeoutNs, 120 s after the last outbound SYN: Linux conntrack's
// nf_conntrack_tcp_timeout_syn_sent, the default of the netfilter firewalls and home
// routers most stateful boxes are (RFC 5382 asks a NAT to keep a half-open mapping at least
// 4 minutes; real ones often keep less, and a hole puncher must not rely on more).
//
// Bounded and allocation-free after construction: `capacity` entries in buckets of kWays,
// a flow lives in the bucket of its key's hash. A new flow takes a free or expired way of
// its bucket, else replaces the way that expires first (counted in evicted()), as a full
// NAT table forgets its oldest half-open mappings. Single-threaded, like the forwarder.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ferry::wan {

inline constexpr uint64_t kStatefulTimeoutNs = 120'000'000'000ull;
inline constexpr size_t kStatefulFlows = 4096;  // per stateful host: ~64 KiB

class FlowTable {
 public:
  static constexpr size_t kWays = 8;

  // capacity >= 1 (rounded up to a power-of-two number of buckets of kWays), timeout_ns >= 1.
  // Throws std::invalid_argument otherwise.
  FlowTable(size_t capacity, uint64_t timeout_ns);

  // The flow from this host's `local_port` to host `remote_host`'s `remote_port`, in IPv6
  // when `v6` (else IPv4).
  static uint64_t key(bool v6, uint32_t remote_host, uint16_t local_port, uint16_t remote_port) {
    return (uint64_t{v6} << 48) | (uint64_t{remote_host & 0xffffu} << 32) | (uint64_t{local_port} << 16) | remote_port;
  }

  // The host sent a SYN on this flow at now_ns: it is admitted until now_ns + timeout.
  void opened(uint64_t key, uint64_t now_ns);
  // Whether a SYN or SYN-ACK arriving at now_ns on this flow (seen from the host) is one it
  // asked for.
  bool admits(uint64_t key, uint64_t now_ns) const;

  size_t capacity() const { return slots_.size(); }
  uint64_t timeout_ns() const { return timeout_ns_; }
  uint64_t evicted() const { return evicted_; }  // live flows forgotten to make room

 private:
  struct Slot {
    uint64_t key = 0;
    uint64_t expires_ns = 0;  // 0: free
  };
  size_t bucket_of(uint64_t key) const;

  std::vector<Slot> slots_;
  size_t bucket_mask_;
  uint64_t timeout_ns_;
  uint64_t evicted_ = 0;
};

}  // namespace ferry::wan
