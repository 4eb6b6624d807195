// A peer of a ferry run: the API its caller sees, its io threads, the
// collectives it issues and their watchdog. Where the peer stands
// (idle -> connecting -> pending -> accepted <-> reconnecting, and dead) is a
// PeerState its parts share.
//
// Losing the master (not a kick) while accepted, with a reconnect window, the
// peer keeps its place and dials the master again (master_redial.h):
// collectives are issued failed meanwhile (peer_lost, seen where the caller
// waits), and votes wait for the master to come back.
//
// Its jobs live in their own parts (the collectives it issues: communicator.cpp
// the all-reduce, communicator_gather.cpp the all-gather, communicator_sync.cpp
// the shared-state sync and serving other peers' syncs):
//   peer_state.h       where the peer stands, and the lock its parts share
//   master_session.h   the connection to the master (handshake, heartbeats, dispatch)
//   master_redial.h    the dials of the master, first and after a loss; the decision on a lost session
//   resume_record.h    what a redial tells a master started again
//   master_calls.h     votes, queries and their answers
//   ring_membership.h  the ring proposed and committed, its links' set-up and reports
//   op_registry.h      the collectives in flight: numbering, life cycle, chunk routing
//   p2p_inbound.h      connections other peers open to us
//   fetch_connect.h    shared-state fetch connections, opened from whichever end can
//   status_label.h     the line the master shows beside this peer (fire and forget)
//
// Threads:
//  - API calls (connect, update_topology, peers_pending, allreduce_async,
//    sync_shared_state, attributes) come from the caller's threads. The
//    votes are serialized by state_.votes; everything else takes state_.mu briefly.
//  - The master session, link set-up, lanes' routing and reductions run on
//    io_threads threads of this communicator's io_context; each p2p lane has
//    a thread of its own (ring_links.h); a redial has its own (master_redial.h).
//  - Lock order: state_.votes, then state_.mu, then RingMembership's and
//    OpRegistry's own locks (each taken alone, never one inside the other).
//    state_.mu is held across another object's lock in two places only, each
//    a snapshot that must be consistent: an issue (allreduce_async,
//    all_gather_async, sync_shared_state: membership_.view, then ops_->issue), so that an op's
//    epoch, ring and number belong together, and a commit (on_topology_done:
//    membership_.commit, ops_->restart), for the same reason. Neither calls
//    back into us nor waits on another thread. state_.mu is never held across
//    a send to the master, a link's or op's call, or a wait on another thread.
#pragma once

#include <chrono>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>
#include <asio/strand.hpp>

#include "net/listener.h"
#include "peer/admission_notices.h"
#include "peer/allreduce_op.h"
#include "peer/comm_config.h"
#include "peer/gather_op.h"
#include "peer/link_probe.h"
#include "peer/master_calls.h"
#include "peer/master_redial.h"
#include "peer/op_registry.h"
#include "peer/peer_state.h"
#include "peer/relay_service.h"
#include "peer/resume_record.h"
#include "peer/ring_membership.h"
#include "peer/shared_state_sync.h"
#include "peer/status_label.h"

namespace ferry::peer {

struct Attributes {
  int64_t global_world = 0, group_world = 0, num_groups = 0, largest_group = 0, rank = 0, peer_group = 0;
  int64_t peer_id = 0, epoch = 0;
  int64_t shared_memory_lanes = 0;
  int64_t next_link_relay = 0;  // FERRY_ATTR_NEXT_LINK_RELAY
  int64_t relayed_bytes = 0;    // FERRY_ATTR_RELAYED_BYTES
  std::vector<uint64_t> ring;  // member ids in ring order
};

class Communicator final : private MasterSession::Events {
 public:
  // Binds the p2p listener and starts the io threads. Throws Error.
  explicit Communicator(CommConfig config);
  // Leaves the run. Bounded: up to 2 s for a redial of a lost master in
  // flight, up to 2 s for collectives in flight to finish and the master to
  // hear the goodbye, then up to 0.5 s for queued closes.
  ~Communicator() override;
  // Leaves the run now, from any thread, while other threads may be blocked
  // in calls on this communicator: the peer dies with invalid_usage (every
  // waiter wakes and throws; ops in flight fail) and the master hears the
  // goodbye. Blocks only while the ring's lane threads stop (milliseconds).
  // The destructor still has to run, once the blocked calls have returned.
  void abort();
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  void connect();
  // `optimize`: ask the master to re-measure every link and take the best ring order.
  void update_topology(bool optimize = false) { calls_.update_topology(optimize); }
  // Votes until the group holds at least min_peers members: the master holds each vote
  // until enough newcomers wait (no polling). Throws Error(timeout) at the deadline
  // (`timeout`, else timeout_ms).
  void wait_for_world(uint32_t min_peers, std::optional<std::chrono::milliseconds> timeout) {
    calls_.wait_for_world(min_peers, timeout);
  }
  uint32_t peers_pending() { return calls_.peers_pending(); }
  Attributes attributes() const;
  // Issues an all-reduce; the returned operation is waited with wait().
  std::shared_ptr<AllreduceOp> allreduce_async(const void* send, void* recv, size_t count, const AllreduceSpec& spec);
  // Issues an all-gather of this peer's `bytes` (communicator_gather.cpp); wait with wait(),
  // after which `result` holds every member's bytes (or nothing, on failure).
  std::shared_ptr<GatherOp> all_gather_async(const void* send, size_t bytes, uint64_t tag,
                                             std::shared_ptr<GatheredBytes> result);
  // Issues a shared-state sync (hashing the tensors first); wait with wait().
  std::shared_ptr<SharedStateSync> sync_shared_state(SyncSpec spec);
  size_t ops_in_flight() const { return ops_->size(); }
  // The group's link matrix as the master holds it (master/link_matrix.h),
  // after this peer's own unreported measurements. Blocks up to config.timeout.
  std::vector<wire::LinkEntry> link_matrix() { return calls_.link_matrix(); }
  // The line the master shows beside this peer (status_label.h). Any thread, any time; does not
  // block. Throws Error(invalid_argument) for a label the master would refuse.
  void set_label(std::string label) { label_.set(std::move(label)); }

 private:
  using Phase = PeerState::Phase;

  // The hello every dial of the master sends; with this peer's resume record once it was accepted.
  wire::Hello hello_message();
  // The ring and the collectives awaiting a verdict now, for the resume record.
  ResumeRecord::Snapshot resume_snapshot();

  // MasterSession::Events
  void on_welcome(uint64_t peer_id) override;
  void on_topology(const wire::Topology& topology) override;
  void on_topology_done(const wire::TopologyDone& done) override;
  void on_pending_count(uint32_t pending) override { calls_.on_pending_count(pending); }
  void on_collective_go(const wire::CollectiveGo& go) override;
  void on_sync_plan(const wire::SyncPlan& plan) override;
  void on_gather_go(const wire::GatherGo& go) override;
  void on_collective_result(const wire::CollectiveResult& result) override;
  void on_collective_pending(const wire::CollectivePending& pending) override;
  void on_call_refused(const wire::CallRefused& refused) override { calls_.on_call_refused(refused); }
  void on_link_matrix(wire::LinkMatrix& matrix) override { calls_.on_link_matrix(matrix); }
  void on_probe_round(const wire::ProbeRound& round) override;
  void on_session_failed(const Status& why) override {
    label_.on_session_lost();
    redial_.on_session_failed(why);
  }
  void on_master_gone(const Status& why) override { die(why); }

  FetchConnector fetch_connector();
  void on_fetch_hello(const wire::FetchHello& hello, const std::string& welcome_proof,
                      const std::shared_ptr<net::Stream>& stream);
  void die(const Status& why);
  // Body of each io thread: runs io_ until it stops; a handler's exception fails the communicator.
  void serve_io();
  // The p2p listener, where neighbours, probers and fetchers dial in (none when dial_out_only).
  void start_listener(uint64_t fd_limit);
  void arm_watchdog();
  // Sends an issued op's begin (or fails it: the master is away), then lets its end go.
  void begin_issued(CollectiveOp& op, const std::optional<Status>& no_master, const std::function<void()>& send_begin);
  OpDeadlines op_deadlines() const { return {config_.timeout, config_.progress_timeout, config_.timeout}; }

  const CommConfig config_;  // with the transport resolved (never null)
  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  PeerState state_;
  // Declared before the parts that hold a reference to it: it outlives them.
  const std::shared_ptr<OpRegistry> ops_;
  const LinkOptions link_options_;  // config_'s p2p settings
  MasterSession session_;
  RingMembership membership_;
  LinkProber prober_;  // answers through session_: declared after it, so it goes first
  MasterRedial redial_;
  MasterCalls calls_;
  StatusLabel label_;  // sends through session_: declared after it
  std::shared_ptr<net::Listener> listener_;  // null: dial_out_only
  std::shared_ptr<RelayService> relay_;      // null: dial_out_only, or it refuses to relay
  asio::strand<asio::io_context::executor_type> watchdog_strand_;
  asio::steady_timer watchdog_;  // only on watchdog_strand_
  std::vector<std::thread> threads_;
  PendingNewcomerNotice pending_notice_;  // thread-safe itself

  // Guarded by state_.mu:
  std::string advertised_;  // the hello's advertised host, fixed at connect
  ResumeRecord resume_;     // what a redial tells the next master
};

}  // namespace ferry::peer
