// What the ring collectives' ops share (AllreduceOp, GatherOp): the links
// their chunks cross, the lane callbacks that only count and release, the
// count of units that ends an op locally, the byte counters behind OpInfo,
// and the link's throughput note at a commit. Each op keeps its own plan and
// what it does with a payload.
//
// Threading: lane callbacks run on lane threads, concurrently; the counters
// are atomic. done_target_ is set before the op lets its first chunk in
// (accept_chunks, whose registry lock orders it before every lane's read) and
// read-only after.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>

#include "peer/chunk_consumer.h"
#include "peer/collective_op.h"
#include "peer/ring_links.h"

namespace ferry::peer {

// What a finished collective tells its caller.
struct OpInfo {
  uint32_t world_size = 0;
  uint64_t bytes_sent = 0;
  uint64_t bytes_received = 0;
  double duration_s = 0;
  OpTimeline phases;  // duration_s is also phases.duration_s
  double agreement_s = 0;  // the integer-domain all-reduces: go -> the first chunk's scales agreed
};

class RingTransferOp : public CollectiveOp, public ChunkConsumer, public std::enable_shared_from_this<RingTransferOp> {
 public:
  // ChunkConsumer: what needs no knowledge of the plan.
  void payload_abandoned() override { release(); }
  void chunk_sent(size_t bytes) override;
  void chunk_dropped() override { release(); }
  void links_failed(const Status& why) override { fail_local(why); }

 protected:
  RingTransferOp(OpHost& host, uint64_t epoch, uint32_t seq, std::shared_ptr<RingLinks> links,
                 OpDeadlines deadlines);

  // Chunks may be mid-stream on the links: nothing can continue on them.
  void stop_transfers(const Status& why) override;
  // A commit tells the link what this transfer achieved (link_stats.h).
  void on_verdict(const Status& verdict) override;

  // Queues one chunk under a hold; `checksum` nullopt: the lane hashes the payload
  // as it writes it. False: the collective is over (nothing queued).
  bool queue_chunk(uint32_t unit, const uint8_t* data, size_t bytes, std::optional<uint64_t> checksum);
  // An arrived payload against its checksum, counted as progress when it matches. On a
  // mismatch the op fails and the payload's hold is released: returns that error.
  Status check_arrival(const wire::ChunkHeader& header, const uint8_t* payload);
  // A unit sent or received; the last one ends the op locally.
  void count_done_unit();
  void fill_info(OpInfo* info, uint32_t world) const;

  const std::shared_ptr<RingLinks> links_;
  uint32_t done_target_ = 0;  // received + sent units when locally done

 private:
  std::atomic<uint32_t> units_done_{0};
  std::atomic<uint64_t> bytes_sent_{0}, bytes_received_{0};
};

}  // namespace ferry::peer
