// The p2p links of one committed ring: `lanes` connections out to the next
// peer, fed from one shared SendQueue, and as many in from the previous one
// (each served by a thread of its own). Incoming chunks go to the collectives
// of the communicator's OpRegistry that run on these links.
// A link that fails takes the whole set down (a half-working ring would only
// stall) and tells every collective on it; the next ferry_update_topology
// builds fresh links.
//
// Threading: close() from any thread, lane threads included. join() waits for
// the lane threads and must not be called from one of them: the Communicator
// calls it when it lets a set of links go.
#pragma once

#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "peer/in_lane.h"
#include "peer/link_stats.h"
#include "peer/op_registry.h"
#include "peer/out_lane.h"

namespace ferry::peer {

// How many of the streams RingLinks::start() gets run over shared memory, out and in.
struct SharedMemoryLanes {
  uint32_t out = 0, in = 0;
};

class RingLinks : public std::enable_shared_from_this<RingLinks> {
 public:
  // `ops`: where incoming chunks find their collectives (weak: links may outlive their communicator).
  RingLinks(uint64_t epoch, uint32_t lanes, std::weak_ptr<OpRegistry> ops, SharedMemoryLanes shared_memory = {});
  ~RingLinks();

  // Takes the handshaken streams (empty for a world of one), switches them to
  // blocking mode and starts the lane threads. A lane that cannot get its
  // eventfd or thread (a full descriptor table, a thread limit) closes the
  // whole set and is the failure returned (Errc::system); nothing throws.
  [[nodiscard]] Status start(std::vector<std::shared_ptr<net::Stream>> out,
                             std::vector<std::shared_ptr<net::Stream>> in);
  uint64_t epoch() const { return epoch_; }
  uint32_t lanes() const { return lanes_; }
  uint32_t shared_memory_lanes() const { return shared_memory_.out + shared_memory_.in; }
  // Queues a chunk for the next peer; whichever lane is free first writes it.
  // With `checksum_pending` that lane computes header.checksum just before
  // writing: step-0 chunks are then hashed by the lanes in parallel instead
  // of one after another by the thread that starts the operation.
  void send(const wire::ChunkHeader& header, const uint8_t* payload, std::shared_ptr<ChunkConsumer> owner,
            bool checksum_pending);

  // A committed all-reduce's part on the link to the next peer (link_stats.h); once per collective.
  void note_transfer(uint64_t bytes_sent, double transfer_s) { transfers_.note(bytes_sent, transfer_s); }
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

  const uint64_t epoch_;
  const uint32_t lanes_;
  const SharedMemoryLanes shared_memory_;
  const std::weak_ptr<OpRegistry> ops_;
  // Set by close() before it tells ops_; shared with the lanes' lookups, which outlive nothing here.
  const std::shared_ptr<std::atomic<bool>> closed_ = std::make_shared<std::atomic<bool>>(false);
  std::shared_ptr<SendQueue> sends_ = std::make_shared<SendQueue>();
  LinkTransfers transfers_;  // locks itself
  std::vector<std::shared_ptr<OutLane>> out_;  // fixed after start()
  std::vector<std::shared_ptr<InLane>> in_;    // fixed after start()
  std::vector<std::shared_ptr<net::Stream>> standby_;  // open but unused out streams; guarded by mu_ after start()
  mutable std::mutex mu_;
  Status failure_;  // guarded by mu_
};

}  // namespace ferry::peer
