// This peer's place in its group's ring: the ring the master proposed and
// the links being set up for it, the ring committed and its links, and the
// link hellos that arrived before their ring's proposal (parked).
//
//   propose(topology)  -> links are set up (LinkSetup); when they are, the
//                         master hears topology_ready
//   commit(done)       -> the proposal becomes the ring (installed), or the
//                         same ring gets a new epoch (renewed)
//   report_links(now)  -> the master hears what the committed links measured
//
// Threading: every call from any thread; mu_ guards the state below it.
// mu_ is held across LinkSetup::offer_inbound and RingLinks' queries and a
// world of one's start (none of them calls back, nor blocks), never across
// LinkSetup::start/cancel or RingLinks::close/join, which call back or wait
// for lane threads. report_mu_ is taken alone, never with mu_, and is held
// across a report's measurement (RingLinks::measure) and its send (queued on
// the master's connection, no call back): a measurement taken is then on the
// wire before any later report or query (report_links).
#pragma once

#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <unordered_map>
#include <vector>

#include "peer/link_setup.h"
#include "peer/ring_links.h"

namespace ferry::peer {

class RingMembership {
 public:
  // How topology_ready reaches the master.
  using SendReady = std::function<void(const wire::TopologyReady&)>;
  // How link reports reach the master.
  using SendReport = std::function<void(const wire::LinkReport&)>;

  RingMembership(asio::any_io_executor executor, LinkOptions options, SendReady send_ready, SendReport send_report);
  ~RingMembership();

  // This peer's id, from the master's welcome; hellos before it are parked.
  void set_self(uint64_t peer_id);
  // The master proposed a ring: drops the old links (nothing is in flight
  // during a vote) and sets up the new ones. Fails (protocol) for a ring this
  // peer cannot use.
  Status propose(const wire::Topology& topology);

  enum class Commit {
    installed,  // the proposal is the ring now
    renewed,    // the same ring, links and all, under a newer epoch
    repeated,   // the ring's own epoch again: sizes refreshed
    stale,      // for a proposal this peer never finished: a newer one follows
  };
  Commit commit(const wire::TopologyDone& done);

  // A link hello from a ring neighbour (handshake checked): handed to the
  // set-up it belongs to, to the committed links as a further lane (their
  // sender grows them), parked for a ring not proposed yet, or refused.
  void offer_link(const wire::LinkHello& hello, const std::string& welcome_proof,
                  const std::shared_ptr<net::Stream>& stream);

  struct View {
    bool has_ring = false;
    uint64_t epoch = 0;
    std::vector<wire::RingMember> ring;
    uint32_t rank = 0, lanes = 0;
    uint64_t next_relay = 0;  // the member relaying this peer's link to the next one; 0: direct
    wire::TopologyDone world;  // sizes as of the last commit
    std::shared_ptr<RingLinks> links;
  };
  View view() const;

  // Tells the master what this peer measured of its link to the next peer:
  // after a committed collective at most once per kLinkReportInterval, or
  // now (`now`) before a matrix query; only when a transfer happened since
  // the last report.
  void report_links(bool now);
  // Whether the committed links failed (a vote says so: the master then rebuilds the ring).
  bool links_broken() const;

  // No further set-ups; cancels the one under way, closes every link set. join() then waits for their lanes.
  void close(const Status& why);
  void join();

 private:
  void on_links_ready(const std::shared_ptr<LinkSetup>& setup, LinkSetup::Outcome outcome);
  // The committed links' settled count, kept by their next peer (under mu_),
  // so a rebuilt ring's link to the same peer starts there (lane_tuner.h).
  void remember_settled();
  SettledLink settled_to(const wire::Topology& topology) const;
  // A hello for one more lane of the committed links (the previous peer's link grows). Under mu_.
  bool is_further_lane(const wire::LinkHello& hello) const;
  // Not for a set-up nor a further lane: parked for a ring not proposed yet,
  // or refused. Its check for a set-up and its parking are one critical
  // section: a proposal arriving between them would drop a valid hello (and
  // get its sender kicked).
  void refuse_or_park(const wire::LinkHello& hello, const std::string& welcome_proof,
                      const std::shared_ptr<net::Stream>& stream);
  static void welcome_further_lane(const std::shared_ptr<RingLinks>& links, uint32_t lane,
                                   const std::string& welcome_proof, const std::shared_ptr<net::Stream>& stream);

  struct ParkedLink {
    wire::LinkHello hello;
    std::string welcome_proof;
    std::shared_ptr<net::Stream> stream;
    Clock::time_point since;
  };

  asio::any_io_executor executor_;
  const LinkOptions options_;
  const SendReady send_ready_;
  const SendReport send_report_;

  std::mutex report_mu_;                  // taken alone; held while a report is built and queued
  Clock::time_point last_link_report_{};  // guarded by report_mu_

  mutable std::mutex mu_;
  bool closed_ = false;                         // guarded by mu_
  uint64_t self_ = 0;                           // guarded by mu_; 0 before the welcome
  View committed_;                              // guarded by mu_
  std::optional<wire::Topology> proposed_;      // guarded by mu_
  std::shared_ptr<LinkSetup> setup_;            // guarded by mu_; of proposed_
  std::shared_ptr<RingLinks> proposed_links_;   // guarded by mu_; setup_'s result
  std::vector<ParkedLink> parked_links_;        // guarded by mu_
  std::unordered_map<uint64_t, SettledLink> settled_;  // guarded by mu_; by next peer
  bool last_settled_bbr_ = false;                      // guarded by mu_
  // Link sets close() closed, for join(): guarded by mu_.
  std::vector<std::shared_ptr<RingLinks>> closing_;
};

}  // namespace ferry::peer
