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
// A target that accepts no connection (a dial-out-only peer) dials the prober
// instead (ProbeRound::target_dials, dial_sources): the prober measures over
// the connections it is given as over its own. A target that cannot be
// dialled, refuses the handshake or does not dial in time is reported
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
#include <optional>
#include <string>
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

struct ProbeStreams;  // one probe's connections as they come up (link_probe.cpp)

class LinkProber {
 public:
  using Report = std::function<void(wire::ProbeDone)>;
  LinkProber(asio::any_io_executor executor, LinkOptions options, Report report);
  ~LinkProber();
  LinkProber(const LinkProber&) = delete;
  LinkProber& operator=(const LinkProber&) = delete;

  // Probes `round`'s targets as peer `self`, then reports.
  void start_round(const wire::ProbeRound& round, uint64_t self);
  // A probe_hello another peer sent us (its proof already checked): a prober's, or a
  // target's that dialed us for our probe of it.
  void accept(const wire::ProbeHello& hello, const std::string& welcome_proof, const std::shared_ptr<net::Stream>& stream);
  void stop();

 private:
  // A connection a target opened for our probe of it, handshake read.
  struct Dialed {
    wire::ProbeHello hello;
    std::string welcome_proof;
    std::shared_ptr<net::Stream> stream;
  };
  // The probe a target dials in for: its connections go to `streams`.
  struct Awaited {
    uint64_t epoch = 0;
    uint32_t round = 0;
    uint64_t target = 0;
    std::shared_ptr<ProbeStreams> streams;
  };
  void welcome_target(Dialed dialed, const std::shared_ptr<ProbeStreams>& streams);
  // From now until stop_awaiting(), `target`'s connections for this probe go to `streams`.
  void await_target(const wire::ProbeRound& round, uint64_t target, const std::shared_ptr<ProbeStreams>& streams);
  void stop_awaiting();
  // Opens kProbeLanes connections to a source that probes us, and drops what it sends.
  void dial_source(const wire::ProbeRound& round, uint64_t self, const wire::RingMember& source);
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
  std::mutex awaited_mu_;
  std::optional<Awaited> awaited_;  // guarded by awaited_mu_
  std::vector<Dialed> early_;       // target connections before their probe began; guarded by awaited_mu_
};

}  // namespace ferry::peer
