// One fake peer of ferry-master-load: a real MasterSession (the dial, the
// challenge -> hello -> welcome handshake, heartbeats, the wire encoders) with
// answers made up where a real peer would do p2p work. The master cannot tell
// the difference from its side, so it does all of its real work:
//  - topology: a real peer dials its ring neighbours, then says topology_ready;
//    this one says ready at once (the master never dials peers, nor checks
//    that they dialled each other, so no listener is needed; the advertised
//    port is one nobody dials).
//  - probe_round: a real peer measures its links to the targets; this one
//    reports every one at the same plausible loopback figures, so no ring
//    order ever looks better than another and no vote re-orders.
//  - collective_go: a real peer runs the all-reduce; this one ends it at once.
//    After each verdict it begins the next collective by itself, as a
//    training loop does, until `rounds` collectives were begun. After a
//    commit it reports its link to its ring successor at most once a second,
//    as a real peer does (peer/communicator.cpp, kLinkReportInterval).
//
// Threading: the session's events run on its connection's strand; the driver
// (load_run.h) calls the public functions from its own thread. Counters go to
// the shared LoadTally.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>

#include <asio/any_io_executor.hpp>

#include "load_tally.h"
#include "peer/master_session.h"

namespace ferry::master_load {

class FakePeer final : public peer::MasterSession::Events {
 public:
  FakePeer(asio::any_io_executor executor, const net::Endpoint& master, uint32_t group, uint32_t index,
           LoadTally& tally);
  ~FakePeer() override;

  // Dials and says hello (blocks until the dial is done; the welcome comes later).
  void join();
  // Votes for a new topology (accepted peers only), as update_topology does.
  void vote();
  // Begins collectives 0 .. rounds-1 of the current epoch, one after another's verdict.
  void run_collectives(uint32_t rounds);
  void leave();

  uint32_t group() const { return group_; }
  bool accepted() const { return epoch_.load() != 0; }

  // MasterSession::Events
  void on_welcome(uint64_t peer_id) override;
  void on_topology(const wire::Topology& topology) override;
  void on_topology_done(const wire::TopologyDone& done) override;
  void on_pending_count(uint32_t) override {}
  void on_collective_go(const wire::CollectiveGo& go) override;
  void on_sync_plan(const wire::SyncPlan&) override {}
  void on_gather_go(const wire::GatherGo&) override {}  // it never begins one
  void on_collective_result(const wire::CollectiveResult& result) override;
  void on_collective_pending(const wire::CollectivePending&) override {}
  void on_call_refused(const wire::CallRefused&) override {}
  void on_link_matrix(wire::LinkMatrix&) override {}
  void on_probe_round(const wire::ProbeRound& round) override;
  void on_session_failed(const Status& why) override;
  void on_master_gone(const Status& why) override { on_session_failed(why); }

 private:
  void begin(uint32_t seq);
  void maybe_report_link();

  const uint32_t group_;
  const uint32_t index_;
  LoadTally& tally_;
  std::unique_ptr<peer::MasterSession> session_;
  std::atomic<uint64_t> id_{0};
  std::atomic<uint64_t> epoch_{0};   // of the last topology_done; 0 until accepted
  std::atomic<uint32_t> rounds_{0};  // collectives to begin in this epoch
  std::atomic<bool> left_{false};
  // Only on the session's strand:
  uint64_t successor_ = 0;                // in the last proposed ring; 0: none
  Clock::time_point last_link_report_{};  // kLinkReportInterval apart
};

}  // namespace ferry::master_load
