// TokenBucket: a rate cap with a bounded queue, kept as virtual time (no timer per packet).
//
// `free_ns` is when the link would have sent everything admitted so far; a bucket that has
// been idle for burst_ns or longer is full. A packet arriving at `now` leaves at
// max(now, max(free_ns, now - burst_ns) + its transmission time): at once while the bucket
// holds enough, otherwise when it will. FIFO order holds because departures never go back in
// time for arrivals that do not. A packet that would wait longer than limit_ns (the queue's
// size in time: limit_bytes at the rate) is refused, as a full tail-drop queue refuses it.
// This is tbf's behaviour, computed at arrival rather than at dequeue.
#pragma once

#include <algorithm>
#include <cstdint>

namespace ferry::wan {

class TokenBucket {
 public:
  TokenBucket() = default;
  TokenBucket(uint64_t rate_bps, uint64_t burst_bytes, uint64_t limit_bytes)
      : rate_bps_(rate_bps), burst_ns_(ns_for(burst_bytes)), limit_ns_(ns_for(limit_bytes)) {}

  bool shaped() const { return rate_bps_ != 0; }

  // Sets `depart` and returns true, or returns false (and changes nothing) when the queue is
  // full. Unshaped: departs at once.
  bool admit(uint64_t now_ns, uint32_t wire_bytes, uint64_t& depart) {
    if (!rate_bps_) {
      depart = now_ns;
      return true;
    }
    const uint64_t start = std::max(free_ns_, now_ns > burst_ns_ ? now_ns - burst_ns_ : 0);
    const uint64_t finish = start + ns_for(wire_bytes);
    depart = std::max(now_ns, finish);
    if (depart - now_ns > limit_ns_) return false;
    free_ns_ = finish;
    return true;
  }

 private:
  uint64_t ns_for(uint64_t bytes) const {
    // In double: a limit of a fast link's BDP times 8e9 would overflow 64 bits.
    return rate_bps_ ? static_cast<uint64_t>(static_cast<double>(bytes) * 8e9 / static_cast<double>(rate_bps_)) : 0;
  }

  uint64_t rate_bps_ = 0;
  uint64_t burst_ns_ = 0;
  uint64_t limit_ns_ = 0;
  uint64_t free_ns_ = 0;
};

}  // namespace ferry::wan
