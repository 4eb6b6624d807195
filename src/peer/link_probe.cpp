#include "peer/link_probe.h"

#include <algorithm>
#include <array>
#include <condition_variable>
#include <vector>

#include <asio/dispatch.hpp>
#include <asio/steady_timer.hpp>

#include "core/log.h"
#include "net/dialer.h"
#include "net/frame_io.h"
#include "net/host_identity.h"
#include "net/socket_options.h"
#include "peer/dial_candidates.h"
#include "peer/link_stats.h"
#include "peer/p2p_handshake.h"

namespace ferry::peer {
namespace {

using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

// A dial that never answers (a firewall dropping SYNs) costs at most this.
constexpr milliseconds kProbeDialTimeout{3'000};
// Floors of a probe's length and of its rate's span, for paths whose RTT is
// too short to set them: on loopback or a LAN TCP settles within a few ms, and
// 10 samples per span still smooth bunched acks (0.25 s and 0.1 s cost every
// admission ~1.5 s for 3 peers and ~0.2 s per pair, for the same figures).
constexpr milliseconds kMinProbeLength{100};
constexpr milliseconds kMinRateSpan{40};
constexpr size_t kDrainBytes = 64 << 10;
constexpr uint32_t kUnsentPerProbeLane = 128 << 10;

const std::array<asio::const_buffer, 1>& zeros() {
  static const std::vector<uint8_t> bytes(256 << 10);
  static const std::array<asio::const_buffer, 1> buffers{asio::buffer(bytes)};
  return buffers;
}

void close_on_strand(const std::shared_ptr<net::Stream>& stream) {
  asio::dispatch(stream->executor(), [stream] { stream->close(); });
}

// Writes zeros until an error or `stop`; on the stream's strand.
void pump(std::shared_ptr<net::Stream> stream, std::shared_ptr<std::atomic<bool>> stop) {
  stream->write_all(zeros(), [stream, stop](std::error_code ec, size_t) {
    if (!ec && !stop->load()) pump(stream, stop);
  });
}

// The acceptor's half of one probe connection: reads and drops until the
// prober closes or the deadline passes.
struct Drain {
  std::shared_ptr<net::Stream> stream;
  std::shared_ptr<std::atomic<size_t>> open;
  asio::steady_timer deadline;
  std::vector<uint8_t> buffer = std::vector<uint8_t>(kDrainBytes);
  Drain(std::shared_ptr<net::Stream> s, std::shared_ptr<std::atomic<size_t>> o)
      : stream(std::move(s)), open(std::move(o)), deadline(stream->executor()) {}
  ~Drain() { --*open; }
};

void drain(std::shared_ptr<Drain> d) {
  d->stream->read_exact(asio::buffer(d->buffer), [d](std::error_code ec, size_t) {
    if (!ec) return drain(d);
    d->deadline.cancel();
    d->stream->close();
  });
}

// Drains until the prober closes, or for as long as a probe may take.
void drain_probe(std::shared_ptr<Drain> d) {
  d->deadline.expires_after(kMaxProbeTime + kProbeDialTimeout);
  d->deadline.async_wait([stream = d->stream](std::error_code ec) {
    if (!ec) stream->close();
  });
  drain(d);
}

}  // namespace

// The streams of one probe as they are dialled (or dialed in) and handshaken.
struct ProbeStreams {
  std::mutex mu;
  std::condition_variable cv;
  size_t answered = 0;  // guarded by mu, as the rest
  std::vector<std::shared_ptr<net::Stream>> streams;
  bool same_host = false;
  bool abandoned = false;  // the prober stopped waiting: late streams close at once
  Status failure = Status::success();

  void finish(Status st, std::shared_ptr<net::Stream> stream, bool shm) {
    std::lock_guard lock(mu);
    ++answered;
    if (st.ok() && abandoned) {
      close_on_strand(stream);
    } else if (st.ok()) {
      streams.push_back(std::move(stream));
      same_host = same_host || shm;
    } else if (failure.ok()) {
      failure = st;
    }
    cv.notify_all();
  }
};

namespace {

// Dials `to` and says `hello`. `greeted` runs once: a welcomed stream (and whether the far
// end is on this host), or why there is none (a stream that got that far is closed).
using Greeted = std::function<void(Status, std::shared_ptr<net::Stream>, bool same_host)>;
void dial_probe_lane(asio::any_io_executor executor, const LinkOptions& options, const wire::RingMember& to,
                     const wire::ProbeHello& hello, milliseconds timeout, Greeted greeted) {
  net::dial(
      std::move(executor), dial_candidates(to), timeout, options.transport,
      [hello, secret = options.secret, timeout, greeted](Status st, std::shared_ptr<net::Stream> stream) {
        if (!st.ok()) return greeted(st, nullptr, false);
        asio::dispatch(stream->executor(), [hello, secret, timeout, stream, greeted] {
          dialer_handshake(stream, hello, secret, timeout, [stream, greeted](Status hst, bool same_host) {
            if (!hst.ok()) stream->close();
            greeted(hst, hst.ok() ? stream : nullptr, same_host);
          });
        });
      },
      options.tuning);
}

uint64_t delivered(const std::vector<int>& fds) {
  uint64_t sum = 0;
  for (int fd : fds)
    if (auto s = read_tcp_info(fd)) sum += s->delivered_bytes;
  return sum;
}

}  // namespace

LinkProber::LinkProber(asio::any_io_executor executor, LinkOptions options, Report report)
    : executor_(std::move(executor)), options_(std::move(options)), report_(std::move(report)) {}

LinkProber::~LinkProber() { stop(); }

void LinkProber::stop() {
  stopping_ = true;
  std::thread round;
  {
    std::lock_guard lock(mu_);
    round = std::move(round_);
  }
  if (round.joinable()) round.join();
}

void LinkProber::start_round(const wire::ProbeRound& round, uint64_t self) {
  std::lock_guard lock(mu_);
  if (stopping_) return;
  // The master sends a round only once every answer to the last one is in:
  // the last round's thread is finishing, if not done.
  if (round_.joinable()) round_.join();
  round_ = std::thread([this, round, self] { run_round(round, self); });
}

void LinkProber::run_round(wire::ProbeRound round, uint64_t self) {
  wire::ProbeDone done;
  done.epoch = round.epoch;
  done.round = round.round;
  for (const wire::RingMember& source : round.dial_sources) dial_source(round, self, source);
  for (const wire::RingMember& target : round.targets) {
    if (stopping_) return;
    Status failure = Status::success();
    if (auto entry = probe(round, self, target, failure)) {
      done.links.push_back(*entry);
    } else if (!stopping_) {
      log().info("probe: peer {} cannot reach peer {} at {}:{}: {}", self, target.peer_id, target.host, target.port,
                 failure.message);
      done.unreachable.push_back(target.peer_id);
    }
  }
  if (!stopping_) report_(std::move(done));
}

std::optional<wire::LinkEntry> LinkProber::probe(const wire::ProbeRound& round, uint64_t self,
                                                 const wire::RingMember& target, Status& failure) {
  wire::ProbeHello hello;
  hello.from_peer = self;
  hello.to_peer = target.peer_id;
  hello.epoch = round.epoch;
  hello.round = round.round;
  if (options_.same_host.enabled) hello.host_key = net::same_host_key();
  milliseconds timeout = std::min(options_.timeout, kProbeDialTimeout);

  auto dialing = std::make_shared<ProbeStreams>();
  const size_t index = static_cast<size_t>(&target - round.targets.data());
  const bool target_dials = round.target_dials_prober(index);
  if (target_dials) await_target(round, target.peer_id, dialing);
  for (uint32_t i = 0; i < kProbeLanes && !target_dials; ++i)
    dial_probe_lane(executor_, options_, target, hello, timeout,
                    [dialing](Status st, std::shared_ptr<net::Stream> stream, bool shm) {
                      dialing->finish(st, std::move(stream), shm);
                    });
  std::vector<std::shared_ptr<net::Stream>> streams;
  bool same_host;
  {
    std::unique_lock lock(dialing->mu);
    // The dial and the handshake each end by `timeout`; the slack covers the hand-over (and,
    // for a target that dials, the master's round reaching it later than us).
    auto deadline = Clock::now() + 2 * timeout + milliseconds(target_dials ? 1500 : 500);
    // In slices: stop() does not notify this condition.
    while (dialing->answered < kProbeLanes && !stopping_ && Clock::now() < deadline)
      dialing->cv.wait_for(lock, milliseconds(20));
    dialing->abandoned = true;
    streams = dialing->streams;
    same_host = dialing->same_host;
    failure = dialing->failure;
    if (dialing->answered < kProbeLanes && failure.ok())
      failure = Status::failure(Errc::timeout, "probe connections not up in time");
  }
  if (target_dials) stop_awaiting();
  auto close_all = [&] {
    for (auto& s : streams) close_on_strand(s);
  };
  if (same_host) {
    close_all();
    wire::LinkEntry entry;
    entry.from_peer = self;
    entry.to_peer = target.peer_id;
    entry.shared_memory = 1;
    return entry;
  }
  if (streams.empty() || stopping_) {
    close_all();
    return std::nullopt;
  }

  std::vector<int> fds;
  for (auto& s : streams) {
    fds.push_back(s->native_handle());
    if (options_.bbr_allowed) (void)net::set_congestion_control(fds.back(), "bbr");
    // What is queued when the window closes must not drain into the next
    // round's probe on this uplink: little waits unsent, and the close resets.
    (void)net::limit_unsent(fds.back(), kUnsentPerProbeLane);
    (void)net::reset_on_close(fds.back());
  }
  uint32_t rtt_us = 0;
  for (int fd : fds)
    if (auto s = read_tcp_info(fd)) {
      uint32_t r = s->min_rtt_us ? s->min_rtt_us : s->rtt_us;
      if (r && (rtt_us == 0 || r < rtt_us)) rtt_us = r;
    }
  auto rtt = std::chrono::microseconds(rtt_us);
  auto length = std::clamp<Clock::duration>(16 * rtt, kMinProbeLength, kMaxProbeTime);

  auto stop = std::make_shared<std::atomic<bool>>(false);
  for (auto& s : streams) asio::dispatch(s->executor(), [s, stop] { pump(s, stop); });
  // Bytes delivered every 10 ms; the rate is the best over any span of 2 RTTs
  // after the first 2 (slow start's ramp and ack bunching both fade there).
  std::vector<ProbeSample> samples;
  auto started = Clock::now();
  auto until = started + length;
  while (!stopping_ && Clock::now() < until) {
    std::this_thread::sleep_for(milliseconds(10));
    samples.push_back({Clock::now(), delivered(fds)});
  }
  double best = probe_rate(samples, started, std::max<Clock::duration>(2 * rtt, kMinRateSpan));
  uint64_t delivered_total = samples.empty() ? 0 : samples.back().delivered;
  std::vector<LaneSample> lanes;
  for (int fd : fds) lanes.push_back({false, read_tcp_info(fd)});
  stop->store(true);
  close_all();
  if (stopping_) return std::nullopt;

  LinkTransfers::Summary transfer;
  transfer.bytes = delivered_total;
  transfer.goodput_bps = static_cast<uint64_t>(best);
  transfer.fresh = true;
  wire::LinkEntry entry = link_entry(self, target.peer_id, transfer, lanes);
  entry.connections = static_cast<uint32_t>(fds.size());
  // The path's RTT, not the queue the probe itself built on it.
  if (rtt_us) entry.rtt_us = rtt_us;
  log().debug("probe: peer {} -> peer {}: {:.1f} MB/s over {} connections (rtt {} us, {} ms)", self,
              target.peer_id, static_cast<double>(entry.goodput_bps) / 1e6, fds.size(), rtt_us,
              std::chrono::duration_cast<milliseconds>(length).count());
  return entry;
}

void LinkProber::accept(const wire::ProbeHello& hello, const std::string& welcome_proof,
                        const std::shared_ptr<net::Stream>& stream) {
  if (hello.target_dialed) {
    Dialed dialed{hello, welcome_proof, stream};
    std::shared_ptr<ProbeStreams> streams;
    {
      std::lock_guard lock(awaited_mu_);
      const bool ours = awaited_ && awaited_->epoch == hello.epoch && awaited_->round == hello.round &&
                        awaited_->target == hello.to_peer;
      if (ours) {
        streams = awaited_->streams;
      } else if (!stopping_ && early_.size() < kMaxInboundProbeStreams) {
        // Its round reached the target before ours reached us: kept until our probe of it begins.
        early_.push_back(std::move(dialed));
        return;
      }
    }
    if (!streams) return stream->close();
    return welcome_target(std::move(dialed), streams);
  }
  bool same_host = options_.same_host.enabled && !hello.host_key.empty() && hello.host_key == net::same_host_key();
  bool room = !stopping_ && inbound_->load() < kMaxInboundProbeStreams;
  if (room && !same_host) ++*inbound_;
  wire::LinkWelcome welcome{.code = room ? 0u : static_cast<uint32_t>(Errc::system),
                            .reason = room ? "" : "too many probe connections at once",
                            .proof = welcome_proof,
                            .shm = static_cast<uint8_t>(same_host ? 1 : 0)};
  auto drained = room && !same_host ? std::make_shared<Drain>(stream, inbound_) : nullptr;
  net::write_one_message(stream, welcome, [stream, drained](Status st) {
    if (!st.ok() || !drained) return stream->close();
    drain_probe(drained);
  });
}

void LinkProber::await_target(const wire::ProbeRound& round, uint64_t target,
                              const std::shared_ptr<ProbeStreams>& streams) {
  std::vector<Dialed> early, stale;
  {
    std::lock_guard lock(awaited_mu_);
    awaited_ = Awaited{round.epoch, round.round, target, streams};
    for (auto& d : early_)
      (d.hello.epoch == round.epoch && d.hello.round == round.round && d.hello.to_peer == target ? early : stale)
          .push_back(std::move(d));
    early_.clear();
  }
  for (auto& d : stale) close_on_strand(d.stream);  // from a probe that is over
  for (auto& d : early) welcome_target(std::move(d), streams);
}

void LinkProber::stop_awaiting() {
  std::lock_guard lock(awaited_mu_);
  awaited_.reset();
}

void LinkProber::welcome_target(Dialed dialed, const std::shared_ptr<ProbeStreams>& streams) {
  const bool same_host =
      options_.same_host.enabled && !dialed.hello.host_key.empty() && dialed.hello.host_key == net::same_host_key();
  wire::LinkWelcome welcome{.proof = dialed.welcome_proof, .shm = static_cast<uint8_t>(same_host ? 1 : 0)};
  auto stream = dialed.stream;
  asio::dispatch(stream->executor(), [stream, welcome, streams, same_host] {
    net::write_one_message(stream, welcome, [stream, streams, same_host](Status st) {
      if (!st.ok()) stream->close();
      streams->finish(st, st.ok() ? stream : nullptr, same_host);
    });
  });
}

void LinkProber::dial_source(const wire::ProbeRound& round, uint64_t self, const wire::RingMember& source) {
  wire::ProbeHello hello{.from_peer = source.peer_id, .to_peer = self, .epoch = round.epoch, .round = round.round,
                         .target_dialed = 1};
  if (options_.same_host.enabled) hello.host_key = net::same_host_key();
  const milliseconds timeout = std::min(options_.timeout, kProbeDialTimeout);
  for (uint32_t i = 0; i < kProbeLanes; ++i)
    // No `this`: a dial may end after the prober (the counter is shared).
    dial_probe_lane(executor_, options_, source, hello, timeout,
                    [prober = source.peer_id, inbound = inbound_](Status st, std::shared_ptr<net::Stream> stream,
                                                                    bool same_host) {
                      if (!st.ok()) return log().debug("probe: cannot reach prober {}: {}", prober, st.message);
                      // On one host the prober measures nothing (the ring link goes through shared memory).
                      if (same_host) return stream->close();
                      ++*inbound;
                      drain_probe(std::make_shared<Drain>(stream, inbound));
                    });
}

double probe_rate(const std::vector<ProbeSample>& samples, Clock::time_point started, Clock::duration span) {
  double best = 0;
  for (size_t i = 0, j = 0; i < samples.size(); ++i) {
    if (samples[i].at < started + span) continue;
    j = std::max(j, i);
    while (j < samples.size() && samples[j].at - samples[i].at < span) ++j;
    if (j == samples.size()) break;
    double seconds = std::chrono::duration<double>(samples[j].at - samples[i].at).count();
    best = std::max(best, static_cast<double>(samples[j].delivered - samples[i].delivered) / seconds);
  }
  if (best > 0 || samples.empty() || samples.back().at <= started) return best;
  // Too few samples for a span (seen in CI under load: a pair reported 0 B/s).
  return static_cast<double>(samples.back().delivered) /
         std::chrono::duration<double>(samples.back().at - started).count();
}

}  // namespace ferry::peer
