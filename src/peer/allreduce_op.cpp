#include "peer/allreduce_op.h"

#include <cstring>

#include "core/hash.h"
#include "core/reduce.h"

namespace ferry::peer {

AllreduceOp::AllreduceOp(OpHost& host, uint64_t epoch, uint32_t seq, std::shared_ptr<RingLinks> links,
                         RingPlan plan, const void* send, void* recv, size_t count, AllreduceSpec spec,
                         OpDeadlines deadlines)
    : CollectiveOp(host, epoch, seq, deadlines), links_(std::move(links)), plan_(plan),
      send_(static_cast<const uint8_t*>(send)), recv_(static_cast<uint8_t*>(recv)), count_(count), spec_(spec),
      done_target_(plan_.units_to_send() + plan_.units_to_receive()),
      received_(new std::atomic<uint8_t>[plan_.units()]) {
  for (uint32_t u = 0; u < plan_.units(); ++u) received_[u].store(0, std::memory_order_relaxed);
  // A world of one, or nothing to send, moves no bytes: no codec (the result is the input itself).
  if (spec_.quant.kind != Quant::none && plan_.world() > 1 && count_ > 0)
    quant_ = QuantizedChunks::create(plan_, spec_.dtype, spec_.quant);
}

// --- driven by the master -------------------------------------------------------

void AllreduceOp::go() {
  if (!begin_running()) return;
  if (plan_.world() == 1 || count_ == 0 || !links_) return run_locally();
  if (Status broken = links_->failure(); !broken.ok()) return fail_local(broken);
  if (!try_hold()) return;  // keeps the operation open while step 0 is queued
  accept_chunks();
  // Step 0 sends this rank's own segment straight from the caller's input.
  for (uint32_t c = 0; c < plan_.chunks_per_segment(); ++c) {
    uint32_t unit = plan_.unit(0, c);
    ElementRange r = plan_.send_range(unit);
    if (r.count == 0) continue;
    const uint8_t* data = send_at(r.begin);
    if (quant_) {
      quant_->encode_own(unit, data, r.count);
      data = quant_->slot(unit);
    }
    if (!queue_send(unit, data, wire_bytes(r.count), std::nullopt)) break;
  }
  release();
}

void AllreduceOp::run_locally() {
  if (count_ > 0 && send_ != recv_) std::memcpy(recv_, send_, count_ * plan_.elem_size());
  // avg over a world of one divides by one: nothing to do.
  mark_local_done();
}

void AllreduceOp::stop_transfers(const Status& why) {
  // Chunks may be mid-stream on these links: nothing can continue on them.
  if (links_) links_->close(why);
}

// --- driven by the lanes -----------------------------------------------------------

bool AllreduceOp::queue_send(uint32_t unit, const uint8_t* data, size_t bytes, std::optional<uint64_t> checksum) {
  wire::ChunkHeader header{seq(), unit, static_cast<uint32_t>(bytes), checksum.value_or(0)};
  if (!try_hold()) return false;
  links_->send(header, data, shared_from_this(), !checksum);
  return true;
}

// Any lane may carry any chunk (the link's lanes share one send queue).
Status AllreduceOp::payload_destination(const wire::ChunkHeader& header, uint32_t /*lane*/,
                                        std::vector<uint8_t>& staging, uint8_t*& destination) {
  auto bad = [&](const std::string& why) {
    return Status::failure(Errc::protocol, "collective " + std::to_string(seq()) + ", unit " +
                                               std::to_string(header.unit) + ": " + why);
  };
  if (header.unit >= plan_.units()) return bad("no such unit");
  ElementRange r = plan_.recv_range(header.unit);
  if (r.count == 0 || header.length != wire_bytes(r.count))
    return bad("length " + std::to_string(header.length) + " does not match the plan");
  if (received_[header.unit].exchange(1, std::memory_order_relaxed)) return bad("arrived twice");
  if (!try_hold()) return bad("the collective is over");
  uint32_t step = plan_.step_of(header.unit);
  if (!plan_.is_reduce_step(step) && !quant_) {
    destination = recv_at(r.begin);  // all-gather: the kernel writes the final bytes in place
  } else if (!plan_.is_reduce_step(step) && step + 1 < plan_.steps()) {
    destination = quant_->slot(header.unit + plan_.chunks_per_segment());  // lands where it leaves from
  } else {
    if (staging.size() < header.length) staging.resize(header.length);
    destination = staging.data();
  }
  return Status::success();
}

Status AllreduceOp::payload_received(const wire::ChunkHeader& header, uint32_t lane, const uint8_t* payload) {
  if (hash_bytes(payload, header.length) != header.checksum) {
    Status corrupt = Status::failure(Errc::protocol, "collective " + std::to_string(seq()) + ": chunk " +
                                                         std::to_string(header.unit) + " failed its checksum");
    release();
    fail_local(corrupt);
    return corrupt;
  }
  progressed();
  bytes_received_.fetch_add(header.length, std::memory_order_relaxed);
  if (quant_) {
    Status st = receive_quantized(header, lane, payload);
    if (!st.ok()) {
      release();
      fail_local(st);
      return st;
    }
    count_done_unit();
    release();
    return Status::success();
  }
  uint32_t step = plan_.step_of(header.unit);
  ElementRange r = plan_.recv_range(header.unit);
  uint8_t* result = recv_at(r.begin);
  uint64_t checksum = header.checksum;
  if (plan_.is_reduce_step(step)) {
    ReduceOp op = spec_.op == ReduceOp::avg ? ReduceOp::sum : spec_.op;
    reduce(spec_.dtype, op, result, payload, send_at(r.begin), r.count);
    // The owner divides once; everyone else receives its quotient.
    if (step == plan_.last_reduce_step() && spec_.op == ReduceOp::avg)
      finalize_avg(spec_.dtype, result, r.count, plan_.world());
    checksum = hash_bytes(result, header.length);
  }
  if (step + 1 < plan_.steps())
    queue_send(header.unit + plan_.chunks_per_segment(), result, header.length, checksum);
  count_done_unit();
  release();
  return Status::success();
}

Status AllreduceOp::receive_quantized(const wire::ChunkHeader& header, uint32_t lane, const uint8_t* payload) {
  uint32_t step = plan_.step_of(header.unit), next = header.unit + plan_.chunks_per_segment();
  ElementRange r = plan_.recv_range(header.unit);
  if (plan_.is_reduce_step(step)) {
    Status st = step == plan_.last_reduce_step()
                    ? quant_->finish_owner(lane, spec_.op, payload, header.length, send_at(r.begin), r.count,
                                           plan_.world(), next, recv_at(r.begin))
                    : quant_->hop(lane, spec_.op, payload, header.length, send_at(r.begin), r.count, next);
    if (!st.ok()) return st;
    size_t out = wire_bytes(r.count);
    queue_send(next, quant_->slot(next), out, hash_bytes(quant_->slot(next), out));
    return Status::success();
  }
  // All-gather: the owner's bytes, decoded here and passed on unchanged.
  if (Status st = quant_->deliver(lane, payload, header.length, r.count, recv_at(r.begin)); !st.ok()) return st;
  if (step + 1 < plan_.steps()) queue_send(next, payload, header.length, header.checksum);
  return Status::success();
}

void AllreduceOp::chunk_sent(size_t bytes) {
  progressed();
  bytes_sent_.fetch_add(bytes, std::memory_order_relaxed);
  count_done_unit();
  release();
}

void AllreduceOp::count_done_unit() {
  if (units_done_.fetch_add(1, std::memory_order_acq_rel) + 1 == done_target_) mark_local_done();
}

void AllreduceOp::on_verdict(const Status& verdict) {
  if (!verdict.ok() || !links_) return;
  if (auto seconds = transfer_seconds()) links_->note_transfer(bytes_sent_.load(), *seconds);
}

// --- the caller's side ----------------------------------------------------------------

Status AllreduceOp::wait(OpInfo* info) {
  Status verdict = wait_finished();
  if (info) {
    info->world_size = plan_.world();
    info->bytes_sent = bytes_sent_.load();
    info->bytes_received = bytes_received_.load();
    info->phases = timeline();
    info->duration_s = info->phases.duration_s;
  }
  return verdict;
}

}  // namespace ferry::peer
