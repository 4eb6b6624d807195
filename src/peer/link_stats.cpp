#include "peer/link_stats.h"

#include <linux/tcp.h>  // the kernel's tcp_info: glibc's lacks the delivery rate and segment counts
#include <netinet/in.h>
#include <sys/socket.h>

#include <algorithm>

namespace ferry::peer {

std::optional<TcpSample> read_tcp_info(int fd) {
  tcp_info info{};
  socklen_t length = sizeof info;
  if (fd < 0 || ::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &length) != 0) return std::nullopt;
  // Older kernels return a shorter struct: fields past `length` stay zero, which reads as "unknown".
  TcpSample s;
  s.rtt_us = info.tcpi_rtt;
  s.delivery_rate_bps = info.tcpi_delivery_rate;
  s.total_retrans = info.tcpi_total_retrans;
  s.segs_out = info.tcpi_segs_out;
  s.bytes_acked = info.tcpi_bytes_acked;
  s.min_rtt_us = info.tcpi_min_rtt;
  s.delivered_bytes = static_cast<uint64_t>(info.tcpi_delivered) * info.tcpi_snd_mss;
  return s;
}

void LinkTransfers::note(uint64_t bytes_sent, double transfer_s) {
  std::lock_guard lock(mu_);
  bytes_ += bytes_sent;
  fresh_ = true;
  if (bytes_sent < kMinRateBytes || transfer_s <= 0) return;
  window_bytes_ += bytes_sent;
  window_s_ += transfer_s;
}

LinkTransfers::Summary LinkTransfers::summarize() {
  std::lock_guard lock(mu_);
  if (window_s_ > 0) last_goodput_bps_ = static_cast<uint64_t>(static_cast<double>(window_bytes_) / window_s_);
  Summary s{bytes_, last_goodput_bps_, fresh_};
  window_bytes_ = 0;
  window_s_ = 0;
  fresh_ = false;
  return s;
}

wire::LinkEntry link_entry(uint64_t from, uint64_t to, const LinkTransfers::Summary& transfers,
                           const std::vector<LaneSample>& lanes) {
  wire::LinkEntry e;
  e.from_peer = from;
  e.to_peer = to;
  e.goodput_bps = transfers.goodput_bps;
  e.bytes = transfers.bytes;
  e.shared_memory = !lanes.empty() && std::all_of(lanes.begin(), lanes.end(), [](const LaneSample& l) {
    return l.shared_memory;
  });
  uint64_t rtt_sum = 0, rtt_count = 0, retrans = 0, segs = 0;
  for (const LaneSample& lane : lanes) {
    if (lane.shared_memory || !lane.tcp) continue;
    e.delivery_rate_bps += lane.tcp->delivery_rate_bps;
    if (lane.tcp->rtt_us > 0) {
      rtt_sum += lane.tcp->rtt_us;
      ++rtt_count;
    }
    retrans += lane.tcp->total_retrans;
    segs += lane.tcp->segs_out;
  }
  if (rtt_count > 0) e.rtt_us = static_cast<uint32_t>(rtt_sum / rtt_count);
  if (segs > 0) e.retrans_ppm = static_cast<uint32_t>(std::min<uint64_t>(retrans * 1'000'000 / segs, 1'000'000));
  return e;
}

}  // namespace ferry::peer
