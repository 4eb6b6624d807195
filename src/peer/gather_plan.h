// Which bytes a rank sends and receives at each step of a ring all-gather of
// contributions of different sizes. A pure function of (sizes, world, rank,
// lanes, chunk limit), so every peer derives the same plan from the sizes the
// master's gather_go lists, and a chunk header need only name its unit.
//
// Algorithm: N-1 steps over the ring r -> r+1. At step t (0 <= t < N-1) rank
// r sends block (r-t) mod N and receives block (r-t-1) mod N, which it keeps
// and, unless t is the last step, sends on at step t+1 unchanged. Block b is
// rank b's contribution; it lies at offset(b) of the result (the blocks in
// rank order), and nobody but rank b ever writes its bytes, so every peer ends
// with the same bytes.
//
// Chunking: every block is cut into chunks of chunk_bytes() (the last one
// shorter), chunks_per_block() of them for the largest block; a smaller
// block has empty chunks at the end, which nobody sends. Unit
// u = step * chunks_per_block + chunk may travel on any of the link's lanes
// (one send queue), so a chunk is forwarded the moment it arrived while later
// chunks are still on the wire: the pipeline the all-reduce has.
//
// Cost model per rank: N-1 steps; sends sum over b != r+1 of size(b) and
// receives sum over b != r of size(b) bytes: (N-1) times the mean
// contribution, when the sizes are equal; the minimum, since every byte of
// every other contribution must arrive. No arithmetic at all.
#pragma once

#include <cstddef>
#include <cstdint>
#include <vector>

namespace ferry::peer {

struct ByteRange {
  size_t begin = 0;  // in the result
  size_t bytes = 0;
};

class GatherPlan {
 public:
  // sizes[b]: rank b's contribution in bytes. Their sum must fit size_t (the caller checks).
  GatherPlan(std::vector<uint64_t> sizes, uint32_t rank, uint32_t lanes, size_t max_chunk_bytes);

  uint32_t world() const { return static_cast<uint32_t>(sizes_.size()); }
  uint32_t rank() const { return rank_; }
  uint32_t steps() const { return world() > 1 ? world() - 1 : 0; }
  uint32_t chunks_per_block() const { return chunks_per_block_; }
  size_t chunk_bytes() const { return chunk_bytes_; }
  uint32_t units() const { return steps() * chunks_per_block_; }
  size_t total_bytes() const { return total_; }
  const std::vector<uint64_t>& sizes() const { return sizes_; }
  size_t offset(uint32_t block) const { return offsets_[block]; }

  uint32_t step_of(uint32_t unit) const { return unit / chunks_per_block_; }
  uint32_t chunk_of(uint32_t unit) const { return unit % chunks_per_block_; }
  uint32_t unit(uint32_t step, uint32_t chunk) const { return step * chunks_per_block_ + chunk; }
  uint32_t send_block(uint32_t step) const;
  uint32_t recv_block(uint32_t step) const;
  // Where a chunk of a block lies in the result; bytes 0 past the block's end.
  ByteRange chunk(uint32_t block, uint32_t chunk) const;
  ByteRange send_range(uint32_t unit) const { return chunk(send_block(step_of(unit)), chunk_of(unit)); }
  ByteRange recv_range(uint32_t unit) const { return chunk(recv_block(step_of(unit)), chunk_of(unit)); }

  // Non-empty units this rank sends and receives, and the bytes of each way.
  uint32_t units_to_send() const { return units_to_send_; }
  uint32_t units_to_receive() const { return units_to_receive_; }
  uint64_t bytes_to_send() const { return bytes_to_send_; }
  uint64_t bytes_to_receive() const { return bytes_to_receive_; }

 private:
  std::vector<uint64_t> sizes_;
  std::vector<size_t> offsets_;
  uint32_t rank_;
  size_t total_ = 0;
  size_t chunk_bytes_ = 1;
  uint32_t chunks_per_block_ = 0;
  uint32_t units_to_send_ = 0, units_to_receive_ = 0;
  uint64_t bytes_to_send_ = 0, bytes_to_receive_ = 0;
};

}  // namespace ferry::peer
