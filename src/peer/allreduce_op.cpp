#include "peer/allreduce_op.h"

#include <cstring>

#include "core/hash.h"
#include "core/reduce.h"

namespace ferry::peer {
namespace {

// The stochastic rounding seed of one collective: the same on every member
// (they share the epoch, the sequence number and the tag), different for each op.
uint64_t op_seed(uint64_t epoch, uint32_t seq, uint64_t tag) {
  uint64_t words[3] = {epoch, seq, tag};
  return hash_bytes(words, sizeof words);
}

}  // namespace

AllreduceOp::AllreduceOp(OpHost& host, uint64_t epoch, uint32_t seq, std::shared_ptr<RingLinks> links,
                         RingPlan plan, const void* send, void* recv, size_t count, AllreduceSpec spec,
                         OpDeadlines deadlines)
    : RingTransferOp(host, epoch, seq, std::move(links), deadlines), plan_(plan),
      send_(static_cast<const uint8_t*>(send)), recv_(static_cast<uint8_t*>(recv)), count_(count), spec_(spec),
      // A world of one, or nothing to send, moves no bytes: no codec (the result is the input itself).
      quant_(spec_.quant.kind != Quant::none && plan_.world() > 1 && count_ > 0
                 ? QuantizedChunks::create(plan_, spec_.dtype, spec_.op, spec_.quant,
                                           {send, recv, op_seed(epoch, seq, spec.tag), spec.contributor, host.scratch_pool()})
                 : nullptr),
      chunk_agreed_(new std::atomic<bool>[plan_.chunks_per_segment()]),
      kept_(plan_.chunks_per_segment()),
      received_(new std::atomic<uint8_t>[plan_.units() + agreement_units()]) {
  done_target_ = plan_.units_to_send() + plan_.units_to_receive() + agreement_transfers();
  for (uint32_t u = 0; u < plan_.units() + agreement_units(); ++u) received_[u].store(0, std::memory_order_relaxed);
  for (uint32_t c = 0; c < plan_.chunks_per_segment(); ++c)
    chunk_agreed_[c].store(agreement_steps() == 0 || quant_->agreement_bytes(c) == 0, std::memory_order_relaxed);
}

uint32_t AllreduceOp::agreement_transfers() const {
  uint32_t chunks = 0;
  for (uint32_t c = 0; c < plan_.chunks_per_segment() && agreement_steps() > 0; ++c)
    chunks += quant_->agreement_bytes(c) > 0;
  return 2 * agreement_steps() * chunks;
}

// --- driven by the master -------------------------------------------------------

void AllreduceOp::go() {
  if (!begin_running()) return;
  if (plan_.world() == 1 || count_ == 0 || !links_) return run_locally();
  if (Status broken = links_->failure(); !broken.ok()) return fail_local(broken);
  if (!try_hold()) return;  // keeps the operation open while step 0 is queued
  went_ns_.store(Clock::now().time_since_epoch().count(), std::memory_order_relaxed);
  // This rank's maxima before any chunk is let in: the predecessor's may come first and fold them in.
  if (agreement_steps() > 0) quant_->begin_agreement();
  accept_chunks();
  for (uint32_t c = 0; c < plan_.chunks_per_segment(); ++c) {
    if (agreement_steps() == 0) {
      start_chunk(QuantizedChunks::kStartLane, c);
    } else if (size_t bytes = quant_->agreement_bytes(c)) {
      if (!queue_chunk(plan_.units() + c, quant_->agreement_own(c), bytes, std::nullopt)) break;
    }
  }
  release();
}

void AllreduceOp::start_chunk(uint32_t lane, uint32_t chunk) {
  // Step 0 sends this rank's own segment straight from the caller's input.
  uint32_t unit = plan_.unit(0, chunk);
  ElementRange r = plan_.send_range(unit);
  if (r.count == 0) return;
  const uint8_t* data = send_at(r.begin);
  if (quant_) {
    quant_->encode_own(lane, unit);
    data = quant_->slot(unit);
  }
  queue_chunk(unit, data, wire_bytes(0, r.count), std::nullopt);
}

void AllreduceOp::run_locally() {
  if (count_ > 0 && send_ != recv_) std::memcpy(recv_, send_, count_ * plan_.elem_size());
  // avg over a world of one divides by one: nothing to do.
  mark_local_done();
}

// --- driven by the lanes -----------------------------------------------------------

// Any lane may carry any chunk (the link's lanes share one send queue).
Status AllreduceOp::payload_destination(const wire::ChunkHeader& header, uint32_t /*lane*/,
                                        std::vector<uint8_t>& staging, uint8_t*& destination) {
  auto bad = [&](const std::string& why) {
    return Status::failure(Errc::protocol, "collective " + std::to_string(seq()) + ", unit " +
                                               std::to_string(header.unit) + ": " + why);
  };
  if (header.unit >= plan_.units() + agreement_units()) return bad("no such unit");
  const bool agreement = header.unit >= plan_.units();
  ElementRange r = agreement ? ElementRange{} : plan_.recv_range(header.unit);
  size_t want = agreement ? quant_->agreement_bytes((header.unit - plan_.units()) % plan_.chunks_per_segment())
                : r.count ? wire_bytes(plan_.step_of(header.unit), r.count)
                          : 0;
  if (want == 0 || header.length != want)
    return bad("length " + std::to_string(header.length) + " does not match the plan");
  if (received_[header.unit].exchange(1, std::memory_order_relaxed)) return bad("arrived twice");
  if (!try_hold()) return bad("the collective is over");
  if (agreement) {
    if (staging.size() < header.length) staging.resize(header.length);
    destination = staging.data();
    return Status::success();
  }
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
  if (Status st = check_arrival(header, payload); !st.ok()) return st;
  Status st = header.unit >= plan_.units() ? receive_agreement(header.unit - plan_.units(), lane, payload)
                                            : consume_or_keep(header, lane, payload);
  if (st.ok()) return st;
  release();
  fail_local(st);
  return st;
}

Status AllreduceOp::consume_or_keep(const wire::ChunkHeader& header, uint32_t lane, const uint8_t* payload) {
  const uint32_t chunk = plan_.chunk_of(header.unit);
  if (!chunk_agreed_[chunk].load(std::memory_order_acquire)) {
    std::unique_lock lock(agreement_mu_);
    if (!chunk_agreed_[chunk].load(std::memory_order_relaxed)) {
      // Only a reduce-scatter chunk can precede this rank's agreement: every
      // all-gather chunk carries a sum that needed this rank's contribution.
      if (!plan_.is_reduce_step(plan_.step_of(header.unit)))
        return Status::failure(Errc::protocol, "collective " + std::to_string(seq()) + ": all-gather unit " +
                                                   std::to_string(header.unit) + " arrived before the scale agreement");
      kept_[chunk].push_back({header, std::vector<uint8_t>(payload, payload + header.length)});
      lock.unlock();
      release();  // a kept chunk is a copy: it holds none of the caller's memory
      return Status::success();
    }
  }
  return consume(header, lane, payload);
}

Status AllreduceOp::consume(const wire::ChunkHeader& header, uint32_t lane, const uint8_t* payload) {
  if (quant_) {
    if (Status st = receive_quantized(header, lane, payload); !st.ok()) return st;
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
    queue_chunk(header.unit + plan_.chunks_per_segment(), result, header.length, checksum);
  count_done_unit();
  release();
  return Status::success();
}

Status AllreduceOp::receive_quantized(const wire::ChunkHeader& header, uint32_t lane, const uint8_t* payload) {
  uint32_t step = plan_.step_of(header.unit), next = header.unit + plan_.chunks_per_segment();
  ElementRange r = plan_.recv_range(header.unit);
  if (plan_.is_reduce_step(step)) {
    Status st = step == plan_.last_reduce_step() ? quant_->finish_owner(lane, header.unit, payload, header.length)
                                                 : quant_->hop(lane, header.unit, payload, header.length);
    if (!st.ok()) return st;
    size_t out = wire_bytes(step + 1, r.count);
    queue_chunk(next, quant_->slot(next), out, hash_bytes(quant_->slot(next), out));
    return Status::success();
  }
  // All-gather: the owner's bytes (or the exact sum), decoded here and passed on unchanged.
  if (Status st = quant_->deliver(lane, header.unit, payload, header.length); !st.ok()) return st;
  if (step + 1 < plan_.steps()) queue_chunk(next, payload, header.length, header.checksum);
  return Status::success();
}

Status AllreduceOp::receive_agreement(uint32_t agreement_unit, uint32_t lane, const uint8_t* payload) {
  const uint32_t step = agreement_unit / plan_.chunks_per_segment(), chunk = agreement_unit % plan_.chunks_per_segment();
  if (const uint8_t* forward = quant_->agreement_received(step, chunk, payload)) {
    queue_chunk(plan_.units() + agreement_unit + plan_.chunks_per_segment(), forward, quant_->agreement_bytes(chunk),
               std::nullopt);
  } else {
    std::vector<KeptChunk> kept;
    {
      std::lock_guard lock(agreement_mu_);
      chunk_agreed_[chunk].store(true, std::memory_order_release);
      kept.swap(kept_[chunk]);
    }
    // The ring's start waited for the first chunk agreed; the later ones overlap it.
    int64_t none = 0;
    agreed_ns_.compare_exchange_strong(none, Clock::now().time_since_epoch().count(), std::memory_order_relaxed);
    start_chunk(lane, chunk);
    // This lane's thread consumes them, with this lane's scratch: the lanes they came on may be busy.
    for (KeptChunk& k : kept) {
      if (!try_hold()) break;  // the collective is over
      if (Status st = consume(k.header, lane, k.payload.data()); !st.ok()) {
        release();
        fail_local(st);
        break;
      }
    }
  }
  count_done_unit();
  release();
  return Status::success();
}

// --- the caller's side ----------------------------------------------------------------

Status AllreduceOp::wait(OpInfo* info) {
  Status verdict = wait_finished();
  if (info) {
    fill_info(info, plan_.world());
    const int64_t went = went_ns_.load(std::memory_order_relaxed), agreed = agreed_ns_.load(std::memory_order_relaxed);
    info->agreement_s = agreed > went && went > 0
                            ? std::chrono::duration<double>(Clock::duration(agreed - went)).count()
                            : 0;
  }
  return verdict;
}

}  // namespace ferry::peer
