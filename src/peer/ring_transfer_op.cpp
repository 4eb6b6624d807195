#include "peer/ring_transfer_op.h"

#include <string>

#include "core/hash.h"

namespace ferry::peer {

RingTransferOp::RingTransferOp(OpHost& host, uint64_t epoch, uint32_t seq, std::shared_ptr<RingLinks> links,
                               OpDeadlines deadlines)
    : CollectiveOp(host, epoch, seq, deadlines), links_(std::move(links)) {}

void RingTransferOp::stop_transfers(const Status& why) {
  if (links_) links_->close(why);
}

void RingTransferOp::on_verdict(const Status& verdict) {
  if (!verdict.ok() || !links_) return;
  if (auto seconds = transfer_seconds()) links_->note_transfer(bytes_sent_.load(), *seconds);
}

bool RingTransferOp::queue_chunk(uint32_t unit, const uint8_t* data, size_t bytes, std::optional<uint64_t> checksum) {
  wire::ChunkHeader header{
      .seq = seq(), .unit = unit, .length = static_cast<uint32_t>(bytes), .checksum = checksum.value_or(0)};
  if (!try_hold()) return false;
  links_->send(header, data, shared_from_this(), !checksum);
  return true;
}

Status RingTransferOp::check_arrival(const wire::ChunkHeader& header, const uint8_t* payload) {
  if (hash_bytes(payload, header.length) != header.checksum) {
    Status corrupt = Status::failure(Errc::protocol, std::string(call_name()) + " " + std::to_string(seq()) +
                                                         ", unit " + std::to_string(header.unit) +
                                                         ": failed its checksum");
    release();
    fail_local(corrupt);
    return corrupt;
  }
  progressed();
  bytes_received_.fetch_add(header.length, std::memory_order_relaxed);
  return Status::success();
}

void RingTransferOp::chunk_sent(size_t bytes) {
  progressed();
  bytes_sent_.fetch_add(bytes, std::memory_order_relaxed);
  count_done_unit();
  release();
}

void RingTransferOp::count_done_unit() {
  if (units_done_.fetch_add(1, std::memory_order_acq_rel) + 1 == done_target_) mark_local_done();
}

void RingTransferOp::fill_info(OpInfo* info, uint32_t world) const {
  info->world_size = world;
  info->bytes_sent = bytes_sent_.load();
  info->bytes_received = bytes_received_.load();
  info->phases = timeline();
  info->duration_s = info->phases.duration_s;
}

}  // namespace ferry::peer
