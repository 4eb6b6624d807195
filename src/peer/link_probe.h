// Active link probes (master/probe_plan.h): while a proposal's links are up
// and before it commits, the master asks this peer, round by round, to
// measure its path to a target and to let a source measure its path here.
//
// Prober side: kProbeLanes TCP connections to the target (on bbr where the
// link options allow it, as a growing ring link would be: lane_tuner.h),
// each writing zeros as fast as the path takes them, for 16 RTTs (at least
// 100 ms, at most kMaxProbeTime). The rate is TCP_INFO's delivered segments (acked or SACKed), summed
// over the connections and sampled every 10 ms: the best over any span of
// 2 RTTs (at least 40 ms) after the first such span, so slow start's ramp
// and bunched acks fade out. On loopback or a LAN a probe takes 0.1 s, so
// the 14 rounds of an 8-peer group take ~1.5 s; at a 230 ms RTT one takes
// 2.3 s: there the time goes to slow start, which a shorter probe would
// mistake for the path's rate (accuracy wins; docs/design.md, "Knowing the links", gives the totals).
// The entry's RTT is the smallest the connections saw (the path's, without
// the queue the probe itself builds).
// A target that cannot be dialled or refuses the handshake is reported
// unreachable. A target on this host (its welcome says so) is not probed:
// that pair's ring link goes through shared memory.
//
// Acceptor side: a probe_hello to this peer is welcomed and what follows is
// dropped until the prober closes, or kMaxProbeTime plus the dial timeout
// passes; at most kMaxInboundProbeStreams at once (more are refused), so an
// authenticated but misbehaving peer costs bounded memory and time.
//
// Threading: start_round() from any thread; a round runs on the prober's own
// thread and answers through `report` once; a new round waits for the last.
// accept() on the stream's strand. stop() (or the destructor) ends a round
// in flight within ~20 ms and joins it.
#pragma once

#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <mutex>
#include <thread>
#include <vector>

#include <asio/any_io_executor.hpp>

#include "net/stream.h"
#include "peer/link_options.h"
#include "wire/messages.h"

namespace ferry::peer {

inline constexpr uint32_t kProbeLanes = 8;
inline constexpr std::chrono::milliseconds kMaxProbeTime{3'000};
inline constexpr size_t kMaxInboundProbeStreams = 4 * kProbeLanes;

// Bytes delivered so far, read at one moment of a probe.
struct ProbeSample {
  std::chrono::steady_clock::time_point at;
  uint64_t delivered = 0;
};
// A probe's rate in bytes/s from its samples (oldest first) and its start: the
// best over any span of `span` after the first such span; where the samples are
// too sparse for one (a starved thread oversleeps its 10 ms), the mean rate from
// the start to the last sample, rather than none. 0 only when nothing moved.
double probe_rate(const std::vector<ProbeSample>& samples, std::chrono::steady_clock::time_point started,
                  std::chrono::steady_clock::duration span);

class LinkProber {
 public:
  using Report = std::function<void(wire::ProbeDone)>;
  LinkProber(asio::any_io_executor executor, LinkOptions options, Report report);
  ~LinkProber();
  LinkProber(const LinkProber&) = delete;
  LinkProber& operator=(const LinkProber&) = delete;

  // Probes `round`'s targets as peer `self`, then reports.
  void start_round(const wire::ProbeRound& round, uint64_t self);
  // A probe_hello another peer sent us (its proof already checked).
  void accept(const wire::ProbeHello& hello, const std::string& welcome_proof, const std::shared_ptr<net::Stream>& stream);
  void stop();

 private:
  void run_round(wire::ProbeRound round, uint64_t self);
  // One target: its entry, or nullopt when it could not be reached (why in `failure`).
  std::optional<wire::LinkEntry> probe(const wire::ProbeRound& round, uint64_t self, const wire::RingMember& target,
                                       Status& failure);

  const asio::any_io_executor executor_;
  const LinkOptions options_;
  const Report report_;
  std::atomic<bool> stopping_{false};
  std::shared_ptr<std::atomic<size_t>> inbound_ = std::make_shared<std::atomic<size_t>>(0);
  std::mutex mu_;      // guards round_ (start_round against stop)
  std::thread round_;
};

}  // namespace ferry::peer
