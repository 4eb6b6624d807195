#include "peer/gather_plan.h"

#include <algorithm>

#include "peer/ring_plan.h"  // kMinChunkBytes: the same striping rule as the all-reduce

namespace ferry::peer {
namespace {

size_t ceil_div(size_t a, size_t b) { return (a + b - 1) / b; }

}  // namespace

GatherPlan::GatherPlan(std::vector<uint64_t> sizes, uint32_t rank, uint32_t lanes, size_t max_chunk_bytes)
    : sizes_(std::move(sizes)), rank_(rank) {
  lanes = std::max(lanes, 1u);
  offsets_.reserve(sizes_.size());
  size_t largest = 0;
  for (uint64_t s : sizes_) {
    offsets_.push_back(total_);
    total_ += static_cast<size_t>(s);
    largest = std::max(largest, static_cast<size_t>(s));
  }
  if (largest == 0 || world() < 2) return;
  // As RingPlan: none above the limit, one per lane where striping pays, equal work per lane.
  size_t by_limit = ceil_div(largest, std::max<size_t>(max_chunk_bytes, 1));
  size_t by_lanes = std::min<size_t>(lanes, ceil_div(largest, kMinChunkBytes));
  size_t chunks = std::max({by_limit, by_lanes, size_t{1}});
  if (chunks > lanes) chunks = ceil_div(chunks, lanes) * lanes;
  chunks = std::min(chunks, largest);
  chunk_bytes_ = ceil_div(largest, chunks);
  chunks_per_block_ = static_cast<uint32_t>(ceil_div(largest, chunk_bytes_));
  for (uint32_t u = 0; u < units(); ++u) {
    size_t out = send_range(u).bytes, in = recv_range(u).bytes;
    units_to_send_ += out > 0;
    units_to_receive_ += in > 0;
    bytes_to_send_ += out;
    bytes_to_receive_ += in;
  }
}

uint32_t GatherPlan::send_block(uint32_t step) const {
  const int64_t n = world();
  const int64_t b = static_cast<int64_t>(rank_) - static_cast<int64_t>(step);
  return static_cast<uint32_t>(((b % n) + n) % n);
}

uint32_t GatherPlan::recv_block(uint32_t step) const {
  const int64_t n = world();
  const int64_t b = static_cast<int64_t>(rank_) - static_cast<int64_t>(step) - 1;
  return static_cast<uint32_t>(((b % n) + n) % n);
}

ByteRange GatherPlan::chunk(uint32_t block, uint32_t c) const {
  const size_t size = static_cast<size_t>(sizes_[block]);
  const size_t at = static_cast<size_t>(c) * chunk_bytes_;
  if (at >= size) return {offsets_[block] + size, 0};
  return {offsets_[block] + at, std::min(chunk_bytes_, size - at)};
}

}  // namespace ferry::peer
