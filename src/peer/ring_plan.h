// Which bytes a rank sends and receives at each step of a ring all-reduce.
// A pure function of (count, element size, world, rank, lanes, chunk limit,
// alignment), so every peer derives the same plan and a chunk header need only
// name its unit. With an alignment of `align` elements every segment and chunk
// boundary is a multiple of it (but the tensor's end): the integer-domain
// quantizations align to their scale blocks, so each block lies in one chunk.
//
// Algorithm: reduce-scatter then all-gather over N ranks, buffer split into N
// segments, each segment into `chunks_per_segment` chunks.
//   reduce-scatter step s (0 <= s < N-1): send segment (r-s) mod N,
//       receive segment (r-s-1) mod N and combine it with the local input.
//   all-gather step s (N-1 <= s < 2N-2, t = s-(N-1)): send segment (r+1-t),
//       receive segment (r-t) and keep its bytes.
// After the reduce-scatter rank r owns segment (r+1) mod N: the only peer that
// computes its final bytes. The all-gather copies those bytes everywhere
// (the owner keeps the very same bytes), hence bit-identical results.
//
// Reduction order contract: segment j is combined as
//   (((x_j (+) x_{j+1}) (+) x_{j+2}) ... (+) x_{j+N-1})   (ranks mod N),
// one rank per hop; `incoming (+) local` at each hop.
//
// Cost model per rank: 2(N-1) steps; 2(N-1)/N * S payload bytes sent and as
// many received (the bandwidth optimum for a ring); (N-1)/N * S reduced.
// Unit u = step * chunks_per_segment + chunk may travel on any of the link's
// lanes (they share one send queue), so chunk c can be reduced and forwarded
// at step s+1 as soon as it arrived at step s, while later chunks are still
// on the wire. `lanes` only sizes the chunks: at least one per lane.
#pragma once

#include <cstddef>
#include <cstdint>

namespace ferry::peer {

inline constexpr size_t kMinChunkBytes = 8 * 1024;

struct ElementRange {
  size_t begin = 0;  // in elements
  size_t count = 0;
};

class RingPlan {
 public:
  RingPlan(size_t count, size_t elem_size, uint32_t world, uint32_t rank, uint32_t lanes,
           size_t max_chunk_bytes, size_t align = 1);

  uint32_t world() const { return world_; }
  uint32_t rank() const { return rank_; }
  uint32_t lanes() const { return lanes_; }
  size_t elem_size() const { return elem_size_; }
  size_t align() const { return align_; }
  uint32_t chunks_per_segment() const { return chunks_per_segment_; }
  uint32_t steps() const { return world_ > 1 ? 2 * (world_ - 1) : 0; }
  uint32_t units() const { return steps() * chunks_per_segment_; }

  uint32_t step_of(uint32_t unit) const { return unit / chunks_per_segment_; }
  uint32_t chunk_of(uint32_t unit) const { return unit % chunks_per_segment_; }
  uint32_t unit(uint32_t step, uint32_t chunk) const { return step * chunks_per_segment_ + chunk; }
  bool is_reduce_step(uint32_t step) const { return step + 1 < world_; }
  // The step whose receive completes this rank's owned segment.
  uint32_t last_reduce_step() const { return world_ - 2; }

  uint32_t send_segment(uint32_t step) const;
  uint32_t recv_segment(uint32_t step) const;
  ElementRange segment(uint32_t seg) const;
  ElementRange chunk(uint32_t seg, uint32_t chunk) const;
  ElementRange send_range(uint32_t unit) const { return chunk(send_segment(step_of(unit)), chunk_of(unit)); }
  ElementRange recv_range(uint32_t unit) const { return chunk(recv_segment(step_of(unit)), chunk_of(unit)); }

  // Non-empty units this rank sends and receives (they differ when some
  // segments are empty, i.e. count < world), and the payload bytes it sends.
  uint32_t units_to_send() const { return units_to_send_; }
  uint32_t units_to_receive() const { return units_to_receive_; }
  uint64_t payload_bytes() const { return payload_bytes_; }

 private:
  size_t count_, elem_size_, align_;
  uint32_t world_, rank_, lanes_;
  uint32_t chunks_per_segment_ = 1;
  size_t chunk_elems_ = 1;
  uint32_t units_to_send_ = 0, units_to_receive_ = 0;
  uint64_t payload_bytes_ = 0;
};

}  // namespace ferry::peer
