// A peer of a ferry run: the API its caller sees, the state that API
// depends on (idle -> connecting -> pending -> accepted <-> reconnecting,
// and dead), the collectives in flight and their watchdog.
//
// Losing the master (not a kick) while accepted, with a reconnect window:
// collectives that ended ok here and await a verdict stay open (the master
// may have committed them; the next one settles it, master_state.h); every
// other one fails with peer_lost (retryable). The peer keeps its tensors,
// id and ring, and dials the master again with a back-off (50 ms doubling
// to 1 s) until the window closes, saying what it knew (hello.resume_*).
// Meanwhile collectives are issued failed (peer_lost, seen where the caller
// waits), and votes wait for the master to come back. A master that refuses the resume kicks the peer (it
// joins again as a newcomer); one that never comes back in the window is
// master_lost, as without a window.
//
// Its jobs live in their own parts:
//   master_session.h   the connection to the master (handshake, heartbeats, dispatch)
//   ring_membership.h  the ring proposed and committed, and its links' set-up
//   op_registry.h      the collectives in flight: numbering, life cycle, chunk routing
//   p2p_inbound.h      connections other peers open to us, and our dials to holders
//
// Threads:
//  - API calls (connect, update_topology, peers_pending, allreduce_async,
//    sync_shared_state, attributes) come from the caller's threads. The
//    votes are serialized by vote_mu_; everything else takes mu_ briefly.
//  - The master session, link set-up, lanes' routing and reductions run on
//    io_threads threads of this communicator's io_context; each p2p lane has
//    a thread of its own (ring_links.h).
//  - Lock order: vote_mu_, then mu_, then RingMembership's and OpRegistry's
//    own locks (each taken alone, never one inside the other). mu_ is held
//    while reading the ring (membership_.view) and issuing an op (ops_->issue)
//    so that an op's epoch, ring and number are one consistent snapshot, and
//    while committing a topology (membership_.commit, ops_->restart) for the
//    same reason; never while calling anything that calls back into us or
//    waits on another thread (sessions' sends, links' close/join, ops' calls).
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>
#include <asio/strand.hpp>

#include "net/listener.h"
#include "peer/allreduce_op.h"
#include "peer/link_probe.h"
#include "peer/master_session.h"
#include "peer/op_registry.h"
#include "peer/ring_membership.h"
#include "peer/shared_state_sync.h"

namespace ferry::peer {

struct CommConfig {
  net::Endpoint master;
  uint32_t peer_group = 0;
  uint32_t connections = 0;  // lanes per ring link; 0: adapted (lane_tuner.h), from kStartLanes
  std::string listen_host = "::";  // both families (net/listener.h)
  uint16_t port_min = 0, port_max = 0;
  std::string advertised_host;  // empty: listen_host when it is one address, else as the master sees us
  uint16_t advertised_port = 0;  // 0: the bound port
  std::chrono::milliseconds timeout{60'000};
  std::chrono::milliseconds progress_timeout{20'000};
  std::chrono::milliseconds heartbeat_timeout{10'000};
  std::chrono::milliseconds master_reconnect_timeout{300'000};  // 0: a lost master is the end
  std::chrono::milliseconds master_connect_timeout{60'000};     // connect dials a master not up yet this long; 0: once
  uint32_t io_threads = 2;
  size_t max_chunk_bytes = 256 << 10;  // measured: chunks that stay in L2 between copy, hash and reduce cost least CPU
  net::SocketTuning p2p_tuning;  // applied to every p2p socket, both directions
  bool shared_memory = true;     // ring lanes to a peer on this host go through shared memory (link_setup.h)
  std::shared_ptr<const RunSecret> secret;  // null: the run is not authenticated
  std::shared_ptr<net::Transport> transport;  // null: plain TCP
};

struct Attributes {
  int64_t global_world = 0, group_world = 0, num_groups = 0, largest_group = 0, rank = 0, peer_group = 0;
  int64_t peer_id = 0, epoch = 0;
  int64_t shared_memory_lanes = 0;
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
  void update_topology(bool optimize = false);
  // Votes until the group holds at least min_peers members: the master holds each vote
  // until enough newcomers wait (no polling). Throws Error(timeout) at the deadline
  // (`timeout`, else timeout_ms).
  void wait_for_world(uint32_t min_peers, std::optional<std::chrono::milliseconds> timeout);
  uint32_t peers_pending();
  Attributes attributes() const;
  // Issues an all-reduce; the returned operation is waited with wait().
  std::shared_ptr<AllreduceOp> allreduce_async(const void* send, void* recv, size_t count, const AllreduceSpec& spec);
  // Issues a shared-state sync (hashing the tensors first); wait with wait().
  std::shared_ptr<SharedStateSync> sync_shared_state(SyncSpec spec);
  size_t ops_in_flight() const;
  // The group's link matrix as the master holds it (master/link_matrix.h),
  // after this peer's own unreported measurements. Blocks up to config.timeout.
  std::vector<wire::LinkEntry> link_matrix();

 private:
  enum class State { idle, connecting, pending, accepted, reconnecting, dead };

  // The host neighbours are told to dial (hello.advertised_host; empty: the
  // master's view). Throws Error (invalid_argument) when that view would be
  // an IPv6 address and the listener takes IPv4 only.
  std::string advertised_host();

  // MasterSession::Events
  void on_welcome(uint64_t peer_id) override;
  void on_topology(const wire::Topology& topology) override;
  void on_topology_done(const wire::TopologyDone& done) override;
  void on_pending_count(uint32_t pending) override;
  void on_collective_go(const wire::CollectiveGo& go) override;
  void on_sync_plan(const wire::SyncPlan& plan) override;
  void on_collective_result(const wire::CollectiveResult& result) override;
  void on_collective_pending(const wire::CollectivePending& pending) override;
  void on_call_refused(const wire::CallRefused& refused) override;
  void on_link_matrix(wire::LinkMatrix& matrix) override;
  void on_probe_round(const wire::ProbeRound& round) override;
  void on_session_failed(const Status& why) override;

  // Master lost while accepted: keep the place, fail what cannot be committed, dial again (reconnect_loop).
  void begin_reconnect(const Status& why);
  void dial_master(std::unique_lock<std::mutex>& lock);
  void reconnect_loop(uint64_t loss);  // for the loss numbered `loss` (master_losses_)
  // The hello every dial of the master sends; with this peer's resume record once it was accepted. mu_ held.
  wire::Hello hello_message() const;
  // Why this peer's resume record would not fit a hello (then it cannot resume safely), if so. mu_ held.
  std::optional<std::string> resume_too_large() const;
  std::vector<wire::SeqRange> awaited_ranges(uint64_t epoch) const;
  // Waits while the master is being reconnected; throws if the peer died meanwhile. mu_ held via lock.
  void wait_for_master(std::unique_lock<std::mutex>& lock);

  void on_fetch_hello(const wire::FetchHello& hello, const std::string& welcome_proof,
                      const std::shared_ptr<net::Stream>& stream);
  void die(const Status& why);
  // Tells the master what this peer measured of its link to the next peer:
  // after a committed collective at most once per kLinkReportInterval, or
  // now (`now`) before a matrix query; only when a transfer happened since the last report.
  void report_links(bool now);
  // Body of each io thread: runs io_ until it stops; a handler's exception fails the communicator.
  void serve_io();
  void arm_watchdog();
  OpDeadlines op_deadlines() const;

  // Throws unless accepted (the check every collective starts with). mu_ held.
  void require_accepted(const char* call) const;
  // While the master is being dialed again: the retryable failure a call gets. mu_ held.
  // Collectives are issued and fail at once with it, so callers meet it where they wait.
  std::optional<Status> master_away(const char* call) const;
  // Waits on cv_ until pred or dead or the deadline (`limit`, else timeout_ms); throws on the
  // latter two. mu_ held via lock.
  template <class Pred>
  void wait_for(std::unique_lock<std::mutex>& lock, Pred pred, const std::string& what,
                std::optional<std::chrono::milliseconds> limit = std::nullopt);
  // Sends one topology vote and waits up to `limit` for the topology it decides. False when
  // the master was lost meanwhile: vote again with the one that comes back. vote_mu_ and mu_ held.
  bool cast_vote(std::unique_lock<std::mutex>& lock, wire::TopologyVote ballot, std::chrono::milliseconds limit,
                 const char* call);

  const CommConfig config_;  // with the transport resolved (never null)
  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  // Declared before the parts that hold a reference to it: it outlives them.
  const std::shared_ptr<OpRegistry> ops_;
  const LinkOptions link_options_;  // config_'s p2p settings
  MasterSession session_;
  RingMembership membership_;
  LinkProber prober_;  // answers through session_: declared after it, so it goes first
  std::shared_ptr<net::Listener> listener_;
  asio::strand<asio::io_context::executor_type> watchdog_strand_;
  asio::steady_timer watchdog_;  // only on watchdog_strand_
  std::vector<std::thread> threads_;

  std::mutex vote_mu_;  // one vote (connect / topology / pending) at a time
  // state_ == dead, read without mu_: ops report their ends from their own locks.
  std::atomic<bool> dead_{false};
  mutable std::mutex mu_;
  std::condition_variable cv_;
  // All below guarded by mu_.
  State state_ = State::idle;
  Status dead_reason_;
  uint64_t peer_id_ = 0;
  uint64_t topology_done_count_ = 0;
  uint64_t pending_answers_ = 0;
  uint32_t last_pending_ = 0;
  uint64_t refusals_ = 0;    // votes and pending queries the master refused (calls out of order)
  Status last_refusal_;
  uint64_t link_queries_ = 0;               // matrix queries sent (their request ids)
  uint64_t link_answered_ = 0;              // the request the last matrix answered
  std::vector<wire::LinkEntry> link_matrix_;  // that answer
  std::string advertised_;                  // the hello's advertised host, fixed at connect
  uint64_t master_losses_ = 0;              // masters lost so far: a vote sent to a lost one is sent again
  Status lost_master_;                      // why the last one was lost
  Clock::time_point reconnect_deadline_{};  // while reconnecting
  uint64_t failed_redials_ = 0;             // redials whose session failed before the welcome
  std::optional<uint64_t> revision_;        // of the last shared-state sync committed here
  uint64_t commits_epoch_ = 0;               // the epoch of recent_commits_
  std::set<uint32_t> recent_commits_;        // its last kRecentCommits collectives seen committed
  std::thread reconnector_;                 // runs reconnect_loop; joined by the destructor
  std::mutex report_mu_;                    // taken alone; held while a report is built and queued
  Clock::time_point last_link_report_{};    // guarded by report_mu_
};

}  // namespace ferry::peer
