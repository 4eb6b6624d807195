// The quantized side of one all-reduce: what crosses the wire is a codec's
// bytes, not the data type. Owns the bytes this rank sends (one slot per
// unit, alive until the operation ends) and per-lane scratch. Two families:
//
// Per-hop codecs (core/quant.h: u8, i8, u4, f16, bf16):
//  - reduce-scatter hop:  slot[next] = encode(decode(in) (+) local), in the
//    accumulation type T (float for f16/bf16/f32 data, double for f64);
//  - the segment's owner: acc = decode(in) (+) local; avg divides once; the
//    owner encodes acc once into slot[next] and decodes *those bytes* into its
//    own result;
//  - all-gather: every peer decodes the owner's bytes, forwarding them
//    unchanged (they land straight in the slot they leave from).
// So every peer's result is decode(the owner's bytes): identical everywhere.
//
// Integer-domain modes (core/int_quant.h: i8h, i4h and their stochastic
// twins; sum and avg; the plan aligned to their blocks): first a scale
// agreement per chunk index c, N-1 ring steps, each forwarding the running
// max of the absolute maxima of the blocks of chunk c of every segment (step
// t carries the max over ranks r..r-t; max is exact, so every rank ends with
// the same scales whatever the ring). Chunk c's ring starts as soon as its
// scales are agreed, so the agreement of later chunks overlaps the ring of
// earlier ones instead of holding the whole ring back by N-1 round trips.
// Then every hop adds its own encoding to the incoming integers
// (int_quant_encode_add), packed at the width its number of contributions
// needs, and the all-gather carries the exact integer sum, which every peer
// decodes. So the result is a function of
// the inputs, the scales and the op's seed alone: not of the ring order, the
// chunking or who owns what.
//
// Threading: per-unit slots are disjoint and each lane has its own scratch,
// so lanes call in concurrently. begin_agreement runs once, before any other
// call; encode_own uses the given lane's scratch.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/buffer_pool.h"
#include "core/dtype.h"
#include "core/error.h"
#include "core/quant.h"
#include "peer/ring_plan.h"
#include "wire/messages.h"

namespace ferry::peer {

// What a codec reads and writes: the caller's tensors (count elements each;
// borrowed for the codec's life) and, for the integer-domain modes, the op's
// agreed seed and this peer's stable id (its stochastic rounding stream).
struct QuantizedBuffers {
  const void* send = nullptr;
  void* recv = nullptr;
  uint64_t seed = 0;
  uint64_t contributor = 0;
  // Where the send arena comes from (null: a fresh allocation per op).
  BufferPool* pool = nullptr;
};

class QuantizedChunks {
 public:
  // Throws Error(invalid_argument) for a data type or op the mode cannot carry.
  static std::unique_ptr<QuantizedChunks> create(const RingPlan& plan, DType dtype, ReduceOp op, QuantSpec spec,
                                                 QuantizedBuffers buffers);
  virtual ~QuantizedChunks() = default;

  // The scale agreement of chunk index c (the plan's chunks_per_segment of
  // them): its number of steps (0: none, for every c) and the bytes each step
  // carries (0: chunk c is empty in every segment, nothing to agree).
  virtual uint32_t agreement_steps() const { return 0; }
  virtual size_t agreement_bytes(uint32_t /*chunk*/) const { return 0; }
  // Computes this rank's maxima, for every chunk.
  virtual void begin_agreement() {}
  // The bytes to send at agreement step 0 of chunk c.
  virtual const uint8_t* agreement_own(uint32_t /*chunk*/) { return nullptr; }
  // Step `step`'s bytes of chunk c from the predecessor. Returns the bytes to
  // send at step + 1, or nullptr after the last step: chunk c's scales are then
  // agreed. Calls for different chunks may run concurrently.
  virtual const uint8_t* agreement_received(uint32_t /*step*/, uint32_t /*chunk*/, const uint8_t* /*in*/) {
    return nullptr;
  }

  // Wire bytes of a unit of `count` elements at ring step `step`.
  virtual size_t wire_bytes(uint32_t step, size_t count) const = 0;
  // Where the bytes this rank sends for `unit` live.
  virtual uint8_t* slot(uint32_t unit) = 0;

  // Step 0: encodes this rank's input for send unit `unit` into slot(unit),
  // on lane `lane`'s thread (or the starting thread's: kStartLane).
  virtual void encode_own(uint32_t lane, uint32_t unit) = 0;
  static constexpr uint32_t kStartLane = wire::kMaxConnectionsPerLink;
  // A reduce-scatter hop on received unit `unit`: slot(unit's next) = in (+) local.
  virtual Status hop(uint32_t lane, uint32_t unit, const uint8_t* in, size_t in_bytes) = 0;
  // The owner's last hop: the segment's final bytes into slot(next), and
  // those bytes decoded into the result.
  virtual Status finish_owner(uint32_t lane, uint32_t unit, const uint8_t* in, size_t in_bytes) = 0;
  // All-gather: the result at received unit `unit` = decode(bytes).
  virtual Status deliver(uint32_t lane, uint32_t unit, const uint8_t* bytes, size_t size) = 0;
};

}  // namespace ferry::peer
