#include "peer/gather_op.h"

#include <cstring>
#include <limits>
#include <new>

namespace ferry::peer {

GatherOp::GatherOp(OpHost& host, uint64_t epoch, uint32_t seq, std::shared_ptr<RingLinks> links, GatherSpec spec,
                   const void* send, size_t bytes, std::shared_ptr<GatheredBytes> result, OpDeadlines deadlines)
    : RingTransferOp(host, epoch, seq, std::move(links), deadlines), spec_(spec),
      send_(static_cast<const uint8_t*>(send)), bytes_(bytes), result_(std::move(result)),
      pool_(host.scratch_pool()) {}

Status GatherOp::bad(uint32_t unit, const std::string& why) const {
  return Status::failure(Errc::protocol,
                         "all_gather " + std::to_string(seq()) + ", unit " + std::to_string(unit) + ": " + why);
}

// --- driven by the master -------------------------------------------------------

Status GatherOp::prepare(const wire::GatherGo& go) {
  const std::string name = "all_gather " + std::to_string(seq());
  if (go.sizes.size() != spec_.world)
    return Status::failure(Errc::protocol, name + ": the master listed " + std::to_string(go.sizes.size()) +
                                               " sizes for a group of " + std::to_string(spec_.world));
  if (go.sizes[spec_.rank] != bytes_)
    return Status::failure(Errc::protocol, name + ": the master lists " + std::to_string(go.sizes[spec_.rank]) +
                                               " bytes for this rank, which gave " + std::to_string(bytes_));
  uint64_t total = 0;
  for (uint64_t s : go.sizes) {
    if (s > std::numeric_limits<size_t>::max() - total)
      return Status::failure(Errc::invalid_argument, name + ": the contributions add up to more than this "
                                                            "process can address");
    total += s;
  }
  plan_.emplace(go.sizes, spec_.rank, spec_.lanes, spec_.max_chunk_bytes);
  if (static_cast<uint64_t>(plan_->steps()) * plan_->chunks_per_block() > std::numeric_limits<uint32_t>::max())
    return Status::failure(Errc::invalid_argument, name + ": " + std::to_string(total) +
                                                       " bytes over this ring need more chunks than a header numbers");
  if (total > 0) {
    // Uninitialised: every byte is written (the own block below, the others by their chunks).
    try {
      result_->bytes = pool_ ? pool_->acquire(total) : BufferPool().acquire(total);
    } catch (const std::bad_alloc&) {
      return Status::failure(Errc::system, name + ": cannot allocate the result, " + std::to_string(total) +
                                               " bytes (the members' contributions together)");
    }
  }
  result_->total = total;
  result_->sizes = go.sizes;
  for (uint32_t b = 0; b < plan_->world(); ++b) result_->offsets.push_back(plan_->offset(b));
  out_ = result_->bytes.data();
  if (bytes_ > 0) std::memcpy(out_ + plan_->offset(spec_.rank), send_, bytes_);
  done_target_ = plan_->units_to_send() + plan_->units_to_receive();
  received_.reset(new std::atomic<uint8_t>[plan_->units()]);
  for (uint32_t u = 0; u < plan_->units(); ++u) received_[u].store(0, std::memory_order_relaxed);
  return Status::success();
}

void GatherOp::gather_go(const wire::GatherGo& go) {
  if (!begin_running()) return;
  // One hold while the caller's buffer is copied and step 0 queued: a failure meanwhile (an abort,
  // a lost link) must not let wait() return, and the caller free `send`, under the copy.
  if (!try_hold()) return;
  Status st = prepare(go);
  if (st.ok() && done_target_ > 0 && !links_)
    st = Status::failure(Errc::internal, "all_gather: bytes to move but no ring links");
  if (st.ok() && done_target_ > 0) st = links_->failure();
  if (!st.ok()) {
    fail_local(st);
  } else if (done_target_ == 0) {
    mark_local_done();  // a world of one, or nothing to move: the own bytes, or the sizes alone
  } else {
    accept_chunks();
    // Step 0: this rank's own block, from its copy in the result.
    for (uint32_t c = 0; c < plan_->chunks_per_block(); ++c)
      if (plan_->send_range(plan_->unit(0, c)).bytes > 0 && !queue_send(plan_->unit(0, c), std::nullopt)) break;
  }
  release();
}

// --- driven by the lanes -----------------------------------------------------------

bool GatherOp::queue_send(uint32_t unit, std::optional<uint64_t> checksum) {
  const ByteRange r = plan_->send_range(unit);
  return queue_chunk(unit, out_ + r.begin, r.bytes, checksum);
}

Status GatherOp::payload_destination(const wire::ChunkHeader& header, uint32_t /*lane*/,
                                     std::vector<uint8_t>& /*staging*/, uint8_t*& destination) {
  if (header.unit >= plan_->units()) return bad(header.unit, "no such unit");
  const ByteRange r = plan_->recv_range(header.unit);
  if (r.bytes == 0 || header.length != r.bytes)
    return bad(header.unit, "length " + std::to_string(header.length) + " does not match the plan");
  if (received_[header.unit].exchange(1, std::memory_order_relaxed)) return bad(header.unit, "arrived twice");
  if (!try_hold()) return bad(header.unit, "the collective is over");
  destination = out_ + r.begin;  // its final place: the block's bytes are kept as they came
  return Status::success();
}

Status GatherOp::payload_received(const wire::ChunkHeader& header, uint32_t /*lane*/, const uint8_t* payload) {
  if (Status st = check_arrival(header, payload); !st.ok()) return st;
  // Step t's block is step t+1's to send: the same bytes, with the checksum they came with.
  if (plan_->step_of(header.unit) + 1 < plan_->steps())
    queue_send(header.unit + plan_->chunks_per_block(), header.checksum);
  count_done_unit();
  release();
  return Status::success();
}

// --- the caller's side ----------------------------------------------------------------

Status GatherOp::wait(OpInfo* info) {
  Status verdict = wait_finished();
  // Finished: no lane holds the result any more.
  if (verdict.ok())
    result_->ready.store(true, std::memory_order_release);
  else
    result_->clear();
  if (info) fill_info(info, spec_.world);
  return verdict;
}

}  // namespace ferry::peer
