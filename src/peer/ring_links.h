// The p2p links of one committed ring: `lanes` connections out to the next
// peer, fed from one shared SendQueue, and as many in from the previous one
// (each served by a thread of its own). Incoming chunks go to the collectives
// of the communicator's OpRegistry that run on these links.
// A link that fails takes the whole set down (a half-working ring would only
// stall) and tells every collective on it; the next ferry_update_topology
// builds fresh links.
//
// A TCP link may grow its lanes while it runs (lane_tuner.h): each committed
// all-reduce feeds the tuner, further lanes are dialled (the previous peer
// takes them through add_in_lane), and lanes beyond the count in use idle, open. Any lane may carry any chunk, so neither the ring nor
// the results change with the count.
//
// Threading: close() from any thread, lane threads included. join() waits for
// the lane threads and must not be called from one of them: the Communicator
// calls it when it lets a set of links go.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "peer/in_lane.h"
#include "peer/lane_tuner.h"
#include "peer/link_options.h"
#include "peer/link_stats.h"
#include "peer/op_registry.h"
#include "peer/out_lane.h"

namespace ferry::peer {

// How many of the streams RingLinks::start() gets run over shared memory, out and in.
struct SharedMemoryLanes {
  uint32_t out = 0, in = 0;
};

// How a link may grow past the lanes it starts with. Off (cap at most the
// starting lanes, or no dial) for a pinned count and over shared memory.
struct LaneGrowth {
  uint32_t cap = 0;
  bool bbr_allowed = false;  // the lanes may switch to bbr (lane_tuner.h)
  SettledLink resume;        // where the last links to the same peer settled
  // Dials out-lane `lane` to the next peer; `done` gets the handshaken stream, or why not.
  using Done = std::function<void(Status, std::shared_ptr<net::Stream>)>;
  std::function<void(uint32_t lane, Done done)> dial;
};

class RingLinks : public std::enable_shared_from_this<RingLinks> {
 public:
  // `ops`: where incoming chunks find their collectives (weak: links may outlive their communicator).
  RingLinks(uint64_t epoch, uint32_t lanes, std::weak_ptr<OpRegistry> ops, SharedMemoryLanes shared_memory = {},
            LaneGrowth growth = {});
  ~RingLinks();

  // Takes the handshaken streams (empty for a world of one), switches them to
  // blocking mode and starts the lane threads. A lane that cannot get its
  // eventfd or thread (a full descriptor table, a thread limit) closes the
  // whole set and is the failure returned (Errc::system); nothing throws.
  [[nodiscard]] Status start(std::vector<std::shared_ptr<net::Stream>> out,
                             std::vector<std::shared_ptr<net::Stream>> in);
  uint64_t epoch() const { return epoch_; }
  // The lanes it started with, each way.
  uint32_t lanes() const { return lanes_; }
  // Out-lanes carrying chunks now (grows and shrinks with the tuner).
  uint32_t lanes_in_use() const;
  // Where the tuner settled, for the next links to the same peer (none: it never grew).
  SettledLink settled();
  // A further lane from the previous peer (its lane >= lanes()), handshaken.
  // False once closed, or for a lane it already has: the caller closes the stream.
  bool add_in_lane(uint32_t lane, std::shared_ptr<net::Stream> stream);
  // Whether add_in_lane would take `lane` now.
  bool accepts_in_lane(uint32_t lane) const;
  uint32_t shared_memory_lanes() const { return shared_memory_.out + shared_memory_.in; }
  // Queues a chunk for the next peer; whichever lane is free first writes it.
  // With `checksum_pending` that lane computes header.checksum just before
  // writing: step-0 chunks are then hashed by the lanes in parallel instead
  // of one after another by the thread that starts the operation.
  void send(const wire::ChunkHeader& header, const uint8_t* payload, std::shared_ptr<ChunkConsumer> owner,
            bool checksum_pending);

  // A committed all-reduce's part on the link to the next peer (link_stats.h);
  // once per collective. Feeds the lane tuner, which may dial or idle lanes.
  void note_transfer(uint64_t bytes_sent, double transfer_s);
  // The link from `self` to `next` as measured so far, or nullopt when no
  // transfer used it since the last call (nothing new to tell). Samples each
  // lane's TCP_INFO: call it at report time, never per chunk.
  std::optional<wire::LinkEntry> measure(uint64_t self, uint64_t next);

  // Closes every lane and tells every registered collective. Idempotent.
  void close(const Status& why);
  void join();
  // The reason the links closed, or ok while they work.
  Status failure() const;

 private:
  void start_lanes(std::vector<std::shared_ptr<net::Stream>> out, std::vector<std::shared_ptr<net::Stream>> in);
  std::shared_ptr<OutLane> make_out_lane(std::shared_ptr<net::Stream> stream, uint32_t lane);
  std::shared_ptr<InLane> make_in_lane(std::shared_ptr<net::Stream> stream, uint32_t lane);
  // Dials up to what the tuner wants; sets the lanes in use. Under tune_mu_.
  void apply(uint32_t wanted);
  void out_lane_dialled(uint32_t lane, Status st, std::shared_ptr<net::Stream> stream);
  // Sets the lanes' congestion control to the tuner's choice. Under tune_mu_.
  void apply_congestion(const std::vector<std::shared_ptr<OutLane>>& lanes);
  std::vector<std::shared_ptr<OutLane>> out_lanes() const;
  std::vector<std::shared_ptr<InLane>> in_lanes() const;

  const uint64_t epoch_;
  const uint32_t lanes_;
  const SharedMemoryLanes shared_memory_;
  const std::weak_ptr<OpRegistry> ops_;
  const LaneGrowth growth_;
  // Set by close() before it tells ops_; shared with the lanes' lookups, which outlive nothing here.
  const std::shared_ptr<std::atomic<bool>> closed_ = std::make_shared<std::atomic<bool>>(false);
  std::shared_ptr<SendQueue> sends_ = std::make_shared<SendQueue>();
  // Out-lanes numbered at or above it idle; shared with the lanes.
  const std::shared_ptr<std::atomic<uint32_t>> in_use_ = std::make_shared<std::atomic<uint32_t>>(0);
  LinkTransfers transfers_;  // locks itself
  mutable std::mutex mu_;
  std::vector<std::shared_ptr<OutLane>> out_;  // guarded by mu_; only grows
  std::vector<std::shared_ptr<InLane>> in_;    // guarded by mu_; only grows
  std::vector<std::shared_ptr<net::Stream>> standby_;  // open but unused out streams; guarded by mu_
  Status failure_;  // guarded by mu_

  // The tuner's state; never on the chunk path (once per collective, once per dial).
  std::mutex tune_mu_;
  std::optional<LaneTuner> tuner_;   // guarded by tune_mu_; none: the count is fixed
  uint32_t dialling_ = 0;            // guarded by tune_mu_; lanes dialled, not up yet
  std::string own_congestion_;       // guarded by tune_mu_; the lanes' before a switch to bbr
};

}  // namespace ferry::peer
