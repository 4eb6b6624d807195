// What this peer measures of its ring link to the next peer, passively and
// off the chunk path:
//  - every all-reduce that commits tells its link how many bytes it sent and
//    how long its transfer took (go -> last chunk out): one call per collective;
//  - each connection's TCP_INFO (smoothed RTT, latest delivery rate,
//    retransmissions), read with one getsockopt per lane only when a report
//    is built (link_report.h: at most once a second).
// Shared-memory lanes have no TCP figures; they say so instead.
//
// Goodput is the rate collectives achieved: payload bytes over transfer time,
// which a ring pipeline holds to its slowest link and to the peers' CPU. The
// TCP figures say what the link itself did. Transfers under kMinRateBytes
// count in `bytes` but not in the rate: their time is round trips, not bandwidth.
//
// Threading: LinkTransfers from any thread (one mutex, taken once per collective).
#pragma once

#include <cstdint>
#include <mutex>
#include <optional>
#include <vector>

#include "wire/messages.h"

namespace ferry::peer {

inline constexpr uint64_t kMinRateBytes = 1 << 20;

// One connection's TCP_INFO figures.
struct TcpSample {
  uint32_t rtt_us = 0;
  uint64_t delivery_rate_bps = 0;  // bytes/s
  uint64_t total_retrans = 0;      // segments
  uint64_t segs_out = 0;
  uint64_t bytes_acked = 0;        // bytes the far side acknowledged
  uint32_t min_rtt_us = 0;         // the smallest RTT the connection has seen
  // Segments delivered (cumulatively acked or SACKed) times the MSS: unlike
  // bytes_acked it does not leap when a retransmission fills a hole.
  uint64_t delivered_bytes = 0;
};

// The socket's TCP_INFO; nullopt when `fd` is not a TCP socket or the call fails.
std::optional<TcpSample> read_tcp_info(int fd);

// One lane as sampled.
struct LaneSample {
  bool shared_memory = false;
  std::optional<TcpSample> tcp;  // none over shared memory, or once the lane closed
};

// The committed collectives' transfers over one link.
class LinkTransfers {
 public:
  void note(uint64_t bytes_sent, double transfer_s);

  struct Summary {
    uint64_t bytes = 0;        // all transfers so far
    uint64_t goodput_bps = 0;  // over the transfers since the last summary; else the last known rate
    bool fresh = false;        // some transfer since the last summary
  };
  // Starts a new window for the next goodput.
  Summary summarize();

 private:
  std::mutex mu_;
  uint64_t bytes_ = 0;                      // guarded by mu_
  uint64_t window_bytes_ = 0;               // guarded by mu_; rate-worthy transfers since the last summary
  double window_s_ = 0;                     // guarded by mu_
  bool fresh_ = false;                      // guarded by mu_
  uint64_t last_goodput_bps_ = 0;           // guarded by mu_
};

// The link's entry from `from` to `to`: the lanes' TCP figures folded into one
// (delivery rates add up, RTTs average, retransmissions per segment sent).
wire::LinkEntry link_entry(uint64_t from, uint64_t to, const LinkTransfers::Summary& transfers,
                           const std::vector<LaneSample>& lanes);

}  // namespace ferry::peer
