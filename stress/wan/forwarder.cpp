#include "forwarder.h"

#include <signal.h>
#include <sys/epoll.h>
#include <sys/signalfd.h>
#include <time.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <limits>
#include <system_error>
#include <utility>

#include "topology.h"

namespace ferry::wan {
namespace {

uint64_t mono_ns() {
  timespec ts;
  ::clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000u + static_cast<uint64_t>(ts.tv_nsec);
}

uint64_t splitmix64(uint64_t& x) {
  uint64_t z = (x += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

// epoll data: host index for a TUN, or one of these.
constexpr uint64_t kSignalTag = std::numeric_limits<uint64_t>::max();
constexpr uint64_t kParentTag = kSignalTag - 1;

// HostParams::inbound holds an InboundPolicy (only the enum is used: the forwarder does not
// link the topology code).
constexpr uint8_t kInboundClosed = static_cast<uint8_t>(InboundPolicy::closed);
constexpr uint8_t kInboundStateful = static_cast<uint8_t>(InboundPolicy::stateful);

[[noreturn]] void throw_errno(const char* what) { throw std::system_error(errno, std::generic_category(), what); }

}  // namespace

Forwarder::Forwarder(ForwarderOptions opts, WanShared* shared)
    : opts_(std::move(opts)),
      shared_(shared),
      hosts_(opts_.tun_fds.size()),
      link_params_(shared_links(shared)),
      caps_(hosts_ * hosts_),
      delay_ns_(hosts_ * hosts_),
      downlinks_(hosts_),
      inbound_(hosts_),
      flows_(hosts_),
      ring_(opts_.packet_store_bytes, opts_.max_frame),
      schedule_(ring_, hosts_ * hosts_ + hosts_),
      keep_(65536),
      frame_(opts_.max_frame) {
  uint64_t s = opts_.seed;
  for (uint64_t& r : rng_) r = splitmix64(s);
  for (size_t i = 0; i < hosts_ * hosts_; ++i) {
    const LinkParams& l = link_params_[i];
    delay_ns_[i] = l.delay_ns;
    caps_[i] = TokenBucket(l.cap_bps, l.cap_burst_bytes, l.cap_limit_bytes);
  }
  const HostParams* hp = shared_hosts(shared);
  for (size_t d = 0; d < hosts_; ++d) {
    downlinks_[d] = TokenBucket(hp[d].downlink_bps, hp[d].downlink_burst_bytes, hp[d].downlink_limit_bytes);
    inbound_[d] = static_cast<uint8_t>(hp[d].inbound);
    if (hp[d].inbound == kInboundStateful) flows_[d] = std::make_unique<FlowTable>(kStatefulFlows, kStatefulTimeoutNs);
  }

  epoll_fd_ = ::epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd_ < 0) throw_errno("epoll_create1");
  auto add = [this](int fd, uint64_t tag) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = tag;
    if (::epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev) != 0) throw_errno("epoll_ctl");
  };
  for (size_t i = 0; i < opts_.tun_fds.size(); ++i) add(opts_.tun_fds[i], i);

  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGHUP);
  if (::sigprocmask(SIG_BLOCK, &stop, nullptr) != 0) throw_errno("sigprocmask");
  signal_fd_ = ::signalfd(-1, &stop, SFD_NONBLOCK | SFD_CLOEXEC);
  if (signal_fd_ < 0) throw_errno("signalfd");
  add(signal_fd_, kSignalTag);
  if (opts_.parent_pidfd >= 0) add(opts_.parent_pidfd, kParentTag);
}

Forwarder::~Forwarder() {
  if (signal_fd_ >= 0) ::close(signal_fd_);
  if (epoll_fd_ >= 0) ::close(epoll_fd_);
}

// xoshiro256**: fast, good enough for Bernoulli drops, and the same sequence for a seed.
uint64_t Forwarder::next_random() {
  const uint64_t result = rotl(rng_[1] * 5, 7) * 9;
  const uint64_t t = rng_[1] << 17;
  rng_[2] ^= rng_[0];
  rng_[3] ^= rng_[1];
  rng_[1] ^= rng_[2];
  rng_[0] ^= rng_[3];
  rng_[2] ^= t;
  rng_[3] = rotl(rng_[3], 45);
  return result;
}

Forwarder::Route Forwarder::route_of(const uint8_t* p, size_t len) {
  Route r;
  if (len >= 20 && (p[0] >> 4) == 4) {
    const uint32_t dst_ip = (uint32_t{p[16]} << 24) | (uint32_t{p[17]} << 16) | (uint32_t{p[18]} << 8) | p[19];
    // 10.77.0.(i+1) -> i; .0 wraps to a huge value
    if ((dst_ip & 0xffffff00u) == kSubnet) r.dst = (dst_ip & 0xffu) - 1;
    if (p[9] == 6) r.tcp = (p[0] & 0x0fu) * 4u;
  } else if (len >= 40 && (p[0] >> 4) == 6) {
    // fd77::(i+1) -> i. Extension headers are not followed: a TCP segment behind one is
    // forwarded, just not recognised as a SYN for a blocked pair (nothing here sends any).
    if (std::memcmp(p + 24, kSubnet6, sizeof kSubnet6) == 0) r.dst = ((uint32_t{p[38]} << 8) | p[39]) - 1;
    if (p[6] == 6) r.tcp = 40;
  }
  return r;
}

Forwarder::Handshake Forwarder::handshake_of(const uint8_t* p, size_t len, size_t tcp) {
  Handshake hs;
  if (tcp == 0 || len < tcp + 14) return hs;
  const uint8_t flags = p[tcp + 13];
  hs.syn = flags & 0x02u;
  hs.ack = flags & 0x10u;
  hs.v6 = (p[0] >> 4) == 6;
  hs.sport = static_cast<uint16_t>((p[tcp] << 8) | p[tcp + 1]);
  hs.dport = static_cast<uint16_t>((p[tcp + 2] << 8) | p[tcp + 3]);
  return hs;
}

bool Forwarder::stateful_admits(PacketRing::Header* h) const {
  const auto* p = reinterpret_cast<const uint8_t*>(PacketRing::data(h) + kVnetHdrSize);
  const size_t len = h->len > kVnetHdrSize ? h->len - kVnetHdrSize : 0;
  const Handshake hs = handshake_of(p, len, route_of(p, len).tcp);
  // Seen from the destination: its port is the local one, the sender the remote end.
  return !hs.syn || flows_[h->dst]->admits(FlowTable::key(hs.v6, h->src, hs.dport, hs.sport), h->time_ns);
}

void Forwarder::read_from(int host, uint64_t now_ns) {
  const int fd = opts_.tun_fds[host];
  for (int n = 0; n < kReadBudget; ++n) {
    std::byte* slot = ring_.reserve();
    if (!slot) {
      // Full: read into the spare buffer and drop, so the TUN does not stall the sender.
      const ssize_t r = ::read(fd, frame_.data(), frame_.size());
      if (r <= 0) return;
      TcpGsoFrame g;
      const size_t segs = parse_tcp_gso(frame_.data(), static_cast<size_t>(r), g) ? g.segments : 1;
      ++c_.rx_frames;
      c_.rx_packets += segs;
      c_.rx_bytes += static_cast<uint64_t>(r);
      c_.drop_full += segs;
      continue;
    }
    const ssize_t r = ::read(fd, slot, opts_.max_frame);
    if (r <= 0) return;  // EAGAIN: drained; anything else: the device is gone, epoll says so
    const auto len = static_cast<uint32_t>(r);
    TcpGsoFrame g;
    const bool gso = parse_tcp_gso(slot, len, g);
    const size_t segs = gso ? g.segments : 1;
    ++c_.rx_frames;
    c_.rx_packets += segs;
    c_.rx_bytes += len;

    const auto* p = reinterpret_cast<const uint8_t*>(slot + kVnetHdrSize);
    const Route route = route_of(p, len > kVnetHdrSize ? len - kVnetHdrSize : 0);
    const uint32_t dst = route.dst;
    if (len >= opts_.max_frame || dst >= hosts_ || dst == static_cast<uint32_t>(host)) {
      c_.drop_no_route += segs;
      continue;
    }
    if (shared_->isolated[host].load(std::memory_order_relaxed) ||
        shared_->isolated[dst].load(std::memory_order_relaxed)) {
      c_.drop_isolated += segs;
      continue;
    }
    LinkParams& link = link_params_[static_cast<size_t>(host) * hosts_ + dst];
    // A connection attempt is TCP with SYN and without ACK. Everything else passes the
    // blocked and closed checks, so connections opened the other way work both ways.
    const Handshake hs = handshake_of(p, len - kVnetHdrSize, route.tcp);
    if (hs.syn && !hs.ack) {
      // Leaving a stateful host: its firewall remembers the flow, before anything can drop it.
      if (flows_[host]) flows_[host]->opened(FlowTable::key(hs.v6, dst, hs.sport, hs.dport), now_ns);
      if (link.blocked) {
        c_.drop_blocked += segs;
        continue;
      }
      if (inbound_[dst] == kInboundClosed) {
        c_.drop_closed += segs;
        continue;
      }
    }
    const uint64_t threshold = link.loss_threshold53.load(std::memory_order_relaxed);
    if (threshold && gso && segs > 1) {
      commit_gso_with_loss(slot, len, g, threshold, now_ns, host, static_cast<int>(dst));
      continue;
    }
    if (threshold && (next_random() >> 11) < threshold) {
      c_.drop_loss += segs;
      continue;
    }
    const size_t wire = gso ? g.payload + g.segments * g.headers : len - kVnetHdrSize;
    enqueue(len, static_cast<uint32_t>(wire), static_cast<uint16_t>(segs), now_ns, host, static_cast<int>(dst));
  }
}

void Forwarder::commit_gso_with_loss(std::byte* slot, uint32_t len, const TcpGsoFrame& g, uint64_t threshold,
                                     uint64_t now_ns, int src, int dst) {
  size_t lost = 0;
  for (size_t i = 0; i < g.segments; ++i) {
    keep_[i] = (next_random() >> 11) >= threshold;
    lost += !keep_[i];
  }
  c_.drop_loss += lost;
  if (lost == 0) {
    enqueue(len, static_cast<uint32_t>(g.payload + g.segments * g.headers), static_cast<uint16_t>(g.segments), now_ns,
            src, dst);
    return;
  }
  if (lost == g.segments) return;
  // Rebuild each run of kept segments as its own frame. The frame is copied out first: the
  // runs are written where it lies now.
  std::memcpy(frame_.data(), slot, len);
  ++c_.split_frames;
  size_t i = 0;
  while (i < g.segments) {
    if (!keep_[i]) {
      ++i;
      continue;
    }
    size_t j = i;
    while (j < g.segments && keep_[j]) ++j;
    std::byte* out = ring_.reserve();
    if (!out) {
      c_.drop_full += j - i;
    } else {
      const size_t n = split_run(frame_.data(), g, i, j, out);
      const size_t wire = n - kVnetHdrSize + (j - i - 1) * g.headers;
      enqueue(static_cast<uint32_t>(n), static_cast<uint32_t>(wire), static_cast<uint16_t>(j - i), now_ns, src, dst);
    }
    i = j;
  }
}

void Forwarder::enqueue(uint32_t len, uint32_t wire_bytes, uint16_t segments, uint64_t now_ns, int src, int dst) {
  const size_t pair = static_cast<size_t>(src) * hosts_ + static_cast<size_t>(dst);
  uint64_t depart = now_ns;
  if (!caps_[pair].admit(now_ns, wire_bytes, depart)) {
    c_.drop_queue += segments;
    return;  // never committed: the slot is reused by the next reserve()
  }
  const uint64_t pos = ring_.commit(len);
  PacketRing::Header* h = ring_.header(pos);
  h->time_ns = depart + delay_ns_[pair];
  h->wire_bytes = wire_bytes;
  h->src = static_cast<uint16_t>(src);
  h->dst = static_cast<uint16_t>(dst);
  h->segments = segments;
  schedule_.push(pair, pos);
}

void Forwarder::release_due(uint64_t now_ns) {
  const size_t downlink_base = hosts_ * hosts_;
  uint64_t pos = 0;
  size_t q = 0;
  while (schedule_.pop_due(now_ns, pos, q)) {
    PacketRing::Header* h = ring_.header(pos);
    TokenBucket& down = downlinks_[h->dst];
    // Arriving at a stateful host (at its release time): a SYN it did not ask for stops here.
    if (q < downlink_base && flows_[h->dst] && !stateful_admits(h)) {
      c_.drop_stateful += h->segments;
      ring_.release(pos);
      continue;
    }
    if (q < downlink_base && down.shaped()) {
      // Arrived at the destination's downlink at its release time (not now: this loop may
      // run late), which it leaves when the downlink's bucket allows.
      uint64_t depart = 0;
      if (!down.admit(h->time_ns, h->wire_bytes, depart)) {
        c_.drop_queue += h->segments;
        ring_.release(pos);
        continue;
      }
      // Behind packets still waiting there even when due already (this loop ran late):
      // writing it now would overtake them.
      if (depart > now_ns || !schedule_.empty(downlink_base + h->dst)) {
        h->time_ns = depart;
        schedule_.push(downlink_base + h->dst, pos);
        continue;
      }
    }
    write_out(pos);
  }
  ring_.reclaim();
}

void Forwarder::write_out(uint64_t pos) {
  PacketRing::Header* h = ring_.header(pos);
  const ssize_t w = ::write(opts_.tun_fds[h->dst], PacketRing::data(h), h->len);
  if (w == static_cast<ssize_t>(h->len)) {
    ++c_.tx_frames;
    c_.tx_packets += h->segments;
    c_.tx_bytes += h->len;
  } else {
    c_.write_errors += h->segments;
  }
  ring_.release(pos);
}

void Forwarder::publish() {
  auto& s = *shared_;
  constexpr auto relaxed = std::memory_order_relaxed;
  s.rx_frames.store(c_.rx_frames, relaxed);
  s.tx_frames.store(c_.tx_frames, relaxed);
  s.rx_packets.store(c_.rx_packets, relaxed);
  s.rx_bytes.store(c_.rx_bytes, relaxed);
  s.tx_packets.store(c_.tx_packets, relaxed);
  s.tx_bytes.store(c_.tx_bytes, relaxed);
  s.drop_loss.store(c_.drop_loss, relaxed);
  s.drop_isolated.store(c_.drop_isolated, relaxed);
  s.drop_blocked.store(c_.drop_blocked, relaxed);
  s.drop_closed.store(c_.drop_closed, relaxed);
  s.drop_stateful.store(c_.drop_stateful, relaxed);
  uint64_t evicted = 0;
  for (const auto& f : flows_)
    if (f) evicted += f->evicted();
  s.flows_evicted.store(evicted, relaxed);
  s.drop_queue.store(c_.drop_queue, relaxed);
  s.drop_full.store(c_.drop_full, relaxed);
  s.drop_no_route.store(c_.drop_no_route, relaxed);
  s.write_errors.store(c_.write_errors, relaxed);
  s.split_frames.store(c_.split_frames, relaxed);
  s.queue_peak_bytes.store(ring_.peak_bytes(), relaxed);
}

Forwarder::Exit Forwarder::run() {
  epoll_event events[64];
  for (;;) {
    uint64_t now = mono_ns();
    release_due(now);
    publish();

    timespec timeout{};
    timespec* wait = nullptr;  // nothing queued: sleep until a packet or a signal
    if (uint64_t next = 0; schedule_.next_time(next)) {
      const uint64_t dt = next > now ? next - now : 0;
      timeout.tv_sec = static_cast<time_t>(dt / 1'000'000'000u);
      timeout.tv_nsec = static_cast<long>(dt % 1'000'000'000u);
      wait = &timeout;
    }
    const int n = ::epoll_pwait2(epoll_fd_, events, 64, wait, nullptr);
    if (n < 0) {
      if (errno == EINTR) continue;
      throw_errno("epoll_pwait2");
    }
    now = mono_ns();
    for (int i = 0; i < n; ++i) {
      const uint64_t tag = events[i].data.u64;
      if (tag == kSignalTag || tag == kParentTag) {
        publish();
        return tag == kSignalTag ? Exit::kSignalled : Exit::kParentGone;
      }
      if (events[i].events & (EPOLLERR | EPOLLHUP)) {
        // A TUN fd does not hang up while we hold it; if it ever does, stop watching it.
        ::epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, opts_.tun_fds[tag], nullptr);
        continue;
      }
      read_from(static_cast<int>(tag), now);
    }
  }
}

}  // namespace ferry::wan
