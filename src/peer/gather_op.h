// One all-gather in flight: every member's contribution (its own size, zero
// allowed) reaches every member, in rank order, the same bytes everywhere.
// The pipelined ring of gather_plan.h, driven by lane events; its handshake
// with the master and its holds are CollectiveOp's, its counting RingTransferOp's. The sizes come with the
// master's start signal (wire::GatherGo): only then is the result allocated
// and the plan made, so the caller need not know the others' sizes.
//
// The result (GatheredBytes) is shared by the op and the caller's handle; it
// is published (ready) only when wait() returns the master's commit. On any
// failure it is emptied: a caller never sees a partial result.
//
// Threading: lane callbacks run on lane threads, concurrently (they touch
// disjoint chunks). gather_go runs on an io thread;
// chunks are let in only after it made the plan (accept_chunks), and the
// registry's lock orders that write before every lane's read of plan_.
#pragma once

#include <atomic>
#include <memory>
#include <mutex>
#include <optional>
#include <vector>

#include "peer/gather_plan.h"
#include "peer/ring_transfer_op.h"

namespace ferry::peer {

// What an all-gather delivers: every rank's bytes, concatenated in rank order.
// Written only by its op; read by the caller once ready (after wait()). The
// bytes come from the communicator's scratch pool and go back to it when this
// is destroyed: a training loop's all-gathers of one size reuse their pages
// (a fresh 1 GiB result costs a page fault per 4 KiB as the lanes write it).
struct GatheredBytes {
  BufferPool::Buffer bytes;  // total bytes
  size_t total = 0;
  const uint8_t* data() const { return total > 0 ? bytes.data() : nullptr; }
  std::vector<uint64_t> sizes;    // per rank
  std::vector<size_t> offsets;    // per rank, into data
  std::atomic<bool> ready{false};  // set once the master committed it; never cleared
  void clear() {
    bytes = BufferPool::Buffer();
    total = 0;
    sizes.clear();
    offsets.clear();
  }
};

struct GatherSpec {
  uint64_t tag = 0;
  uint32_t world = 0, rank = 0, lanes = 0;
  size_t max_chunk_bytes = 0;
};

class GatherOp final : public RingTransferOp {
 public:
  // `send`: this rank's `bytes`, borrowed until wait() returns (read once, at the go).
  GatherOp(OpHost& host, uint64_t epoch, uint32_t seq, std::shared_ptr<RingLinks> links, GatherSpec spec,
           const void* send, size_t bytes, std::shared_ptr<GatheredBytes> result, OpDeadlines deadlines);

  void gather_go(const wire::GatherGo& go) override;
  // Blocks until finished; the master's verdict (or the final local failure). Publishes
  // the result on success and empties it on failure.
  Status wait(OpInfo* info);

  // ChunkConsumer
  Status payload_destination(const wire::ChunkHeader& header, uint32_t lane, std::vector<uint8_t>& staging,
                             uint8_t*& destination) override;
  Status payload_received(const wire::ChunkHeader& header, uint32_t lane, const uint8_t* payload) override;

 private:
  const char* call_name() const override { return "all_gather"; }
  // The sizes checked and the result allocated; a failure to report otherwise.
  Status prepare(const wire::GatherGo& go);
  bool queue_send(uint32_t unit, std::optional<uint64_t> checksum);
  Status bad(uint32_t unit, const std::string& why) const;

  const GatherSpec spec_;
  const uint8_t* const send_;
  const size_t bytes_;
  const std::shared_ptr<GatheredBytes> result_;
  BufferPool* const pool_;  // the host's scratch pool (null: none); the result's bytes come from it
  // Set once by gather_go before any chunk is let in; read-only after.
  std::optional<GatherPlan> plan_;
  uint8_t* out_ = nullptr;  // result_->data, likewise
  std::unique_ptr<std::atomic<uint8_t>[]> received_;  // per unit: arrived already?
};

}  // namespace ferry::peer
