#include "peer/ring_plan.h"

#include <algorithm>

namespace ferry::peer {
namespace {

size_t ceil_div(size_t a, size_t b) { return (a + b - 1) / b; }

}  // namespace

RingPlan::RingPlan(size_t count, size_t elem_size, uint32_t world, uint32_t rank, uint32_t lanes,
                   size_t max_chunk_bytes, size_t align)
    : count_(count), elem_size_(elem_size), align_(std::max<size_t>(align, 1)), world_(world), rank_(rank),
      lanes_(std::max(lanes, 1u)) {
  size_t max_seg_elems = ceil_div(ceil_div(count_, align_), world_) * align_;  // whole aligned pieces
  if (max_seg_elems == 0) return;
  size_t seg_bytes = max_seg_elems * elem_size_;
  // Enough chunks that none exceeds the limit, and one per lane where the
  // segment is big enough for striping to pay (kMinChunkBytes per chunk).
  size_t by_limit = ceil_div(seg_bytes, std::max(max_chunk_bytes, elem_size_));
  size_t by_lanes = std::min<size_t>(lanes_, ceil_div(seg_bytes, kMinChunkBytes));
  size_t chunks = std::max({by_limit, by_lanes, size_t{1}});
  if (chunks > lanes_) chunks = ceil_div(chunks, lanes_) * lanes_;  // equal work per lane
  chunks = std::min(chunks, max_seg_elems / align_);
  chunk_elems_ = ceil_div(max_seg_elems / align_, chunks) * align_;
  chunks_per_segment_ = static_cast<uint32_t>(ceil_div(max_seg_elems, chunk_elems_));

  for (uint32_t u = 0; u < units(); ++u) {
    size_t n = send_range(u).count;
    units_to_send_ += n > 0;
    units_to_receive_ += recv_range(u).count > 0;
    payload_bytes_ += n * elem_size_;
  }
}

uint32_t RingPlan::send_segment(uint32_t step) const {
  int64_t n = world_;
  int64_t s = is_reduce_step(step) ? rank_ - static_cast<int64_t>(step)
                                   : rank_ + 1 - static_cast<int64_t>(step - (world_ - 1));
  return static_cast<uint32_t>(((s % n) + n) % n);
}

uint32_t RingPlan::recv_segment(uint32_t step) const {
  int64_t n = world_;
  int64_t s = is_reduce_step(step) ? rank_ - static_cast<int64_t>(step) - 1
                                   : rank_ - static_cast<int64_t>(step - (world_ - 1));
  return static_cast<uint32_t>(((s % n) + n) % n);
}

ElementRange RingPlan::segment(uint32_t seg) const {
  // In aligned pieces: segments differ by at most one piece, and only the last may be short.
  size_t pieces = ceil_div(count_, align_);
  size_t base = pieces / world_, extra = pieces % world_;
  size_t begin = std::min(count_, (seg * base + std::min<size_t>(seg, extra)) * align_);
  size_t end = std::min(count_, begin + (base + (seg < extra ? 1 : 0)) * align_);
  return {begin, end - begin};
}

ElementRange RingPlan::chunk(uint32_t seg, uint32_t c) const {
  ElementRange s = segment(seg);
  size_t offset = static_cast<size_t>(c) * chunk_elems_;
  if (offset >= s.count) return {s.begin + s.count, 0};
  return {s.begin + offset, std::min(chunk_elems_, s.count - offset)};
}

}  // namespace ferry::peer
