// A peer of a ferry run: its session with the master, its p2p listener, the
// links of its current ring, and the collectives in flight.
//
// Threads:
//  - API calls (connect, update_topology, peers_pending, allreduce_async,
//    attributes) come from the caller's threads. The votes are serialized by
//    vote_mu_; everything else takes mu_ briefly.
//  - The master session, link set-up, lanes and reductions run on io_threads
//    threads of this communicator's io_context.
//  - Each p2p lane has a thread of its own (see ring_links.h); they never
//    wait for the io threads, so an io thread may join them.
//  - Lock order: vote_mu_ before mu_. Never hold mu_ while calling into an
//    AllreduceOp, LinkSetup or RingLinks: they call back into us.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>
#include <asio/steady_timer.hpp>
#include <asio/strand.hpp>

#include "net/endpoint.h"
#include "net/frame_connection.h"
#include "net/listener.h"
#include "net/socket_options.h"
#include "net/transport.h"
#include "peer/allreduce_op.h"
#include "peer/link_setup.h"
#include "peer/shared_state_sync.h"

namespace ferry::peer {

struct CommConfig {
  net::Endpoint master;
  uint32_t peer_group = 0;
  uint32_t connections = 4;
  std::string listen_host = "0.0.0.0";
  uint16_t port_min = 0, port_max = 0;
  std::string advertised_host;  // empty: as the master sees us
  uint16_t advertised_port = 0;  // 0: the bound port
  std::chrono::milliseconds timeout{60'000};
  std::chrono::milliseconds progress_timeout{20'000};
  std::chrono::milliseconds heartbeat_timeout{10'000};
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

class Communicator final : private OpHost {
 public:
  // Binds the p2p listener and starts the io threads. Throws Error.
  explicit Communicator(CommConfig config);
  ~Communicator() override;  // leaves the run; bounded
  Communicator(const Communicator&) = delete;
  Communicator& operator=(const Communicator&) = delete;

  void connect();
  void update_topology();
  uint32_t peers_pending();
  Attributes attributes() const;
  // Issues an all-reduce; the returned operation is waited with wait().
  std::shared_ptr<AllreduceOp> allreduce_async(const void* send, void* recv, size_t count, const AllreduceSpec& spec);
  // Issues a shared-state sync (hashing the tensors first); wait with wait().
  std::shared_ptr<SharedStateSync> sync_shared_state(SyncSpec spec);
  size_t ops_in_flight() const;

 private:
  enum class State { idle, connecting, pending, accepted, dead };

  // OpHost
  void send_end(uint64_t epoch, uint32_t seq, const Status& status) override;
  void op_finished(uint32_t seq) override;

  void on_master_message(wire::Message message);
  void on_master_closed(const Status& why);
  void on_topology(const wire::Topology& topology);
  void on_links_ready(const std::shared_ptr<LinkSetup>& setup, LinkSetup::Outcome outcome);
  void on_topology_done(const wire::TopologyDone& done);
  void on_inbound(asio::ip::tcp::socket socket);
  void on_auth_challenge(const wire::AuthChallenge& challenge);
  void on_welcome(const wire::Welcome& welcome);
  void on_link_hello(const wire::LinkHello& hello, const std::string& welcome_proof,
                     const std::shared_ptr<net::Stream>& stream);
  void on_fetch_hello(const wire::FetchHello& hello, const std::string& welcome_proof,
                      const std::shared_ptr<net::Stream>& stream);
  Status dial_holder(const wire::PeerAddress& holder, const wire::FetchHello& hello, std::shared_ptr<net::Stream>& out);
  // Registers `op` under the next seq and returns it; mu_ held.
  uint32_t take_seq();
  void die(const Status& why);
  void arm_watchdog();

  // Throws unless accepted (the check every collective starts with). mu_ held.
  void require_accepted(const char* call) const;
  // Waits on cv_ until pred or dead or the deadline; throws on the latter two. mu_ held via lock.
  template <class Pred>
  void wait_for(std::unique_lock<std::mutex>& lock, Pred pred, const std::string& what);
  std::shared_ptr<CollectiveOp> find_op(uint64_t epoch, uint32_t seq);

  const CommConfig config_;
  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  std::shared_ptr<net::Listener> listener_;
  asio::strand<asio::io_context::executor_type> watchdog_strand_;
  asio::steady_timer watchdog_;  // only on watchdog_strand_
  std::vector<std::thread> threads_;

  std::mutex vote_mu_;  // one vote (connect / topology / pending) at a time
  mutable std::mutex mu_;
  std::condition_variable cv_;
  // All below guarded by mu_.
  State state_ = State::idle;
  Status dead_reason_;
  std::shared_ptr<net::FrameConnection> master_;
  std::optional<wire::Hello> hello_;    // sent when the master's challenge arrives
  std::string master_nonce_;            // of that challenge
  uint64_t peer_id_ = 0;
  uint64_t epoch_ = 0;
  std::vector<wire::RingMember> ring_;
  uint32_t rank_ = 0, lanes_ = 0;
  wire::TopologyDone world_;  // sizes as of the last topology_done
  std::shared_ptr<RingLinks> links_;
  std::optional<wire::Topology> proposed_;
  std::shared_ptr<LinkSetup> setup_;
  std::shared_ptr<RingLinks> proposed_links_;
  uint64_t topology_done_count_ = 0;
  uint64_t pending_answers_ = 0;
  uint32_t last_pending_ = 0;
  uint32_t next_seq_ = 0;
  std::map<uint32_t, std::shared_ptr<CollectiveOp>> ops_;
  struct ParkedLink {
    wire::LinkHello hello;
    std::string welcome_proof;
    std::shared_ptr<net::Stream> stream;
    Clock::time_point since;
  };
  std::vector<ParkedLink> parked_links_;  // hellos for a ring we have not heard of yet
  bool master_closed_ = false;
  // Set by the master connection's first message (its challenge): a close before it means the connection never worked.
  std::atomic<bool> heard_from_master_{false};
};

}  // namespace ferry::peer
