// The quantized side of one all-reduce: what crosses the wire is a codec's
// bytes (core/quant.h), not the data type. Owns the bytes this rank sends
// (one slot per unit, alive until the operation ends) and per-lane scratch.
//
// Bit-exactness (core/quant.h has the codecs' own contract):
//  - reduce-scatter hop:  slot[next] = encode(decode(in) (+) local), in the
//    accumulation type T (float for f16/bf16/f32 data, double for f64);
//  - the segment's owner: acc = decode(in) (+) local; avg divides once; the
//    owner encodes acc once into slot[next] and decodes *those bytes* into its
//    own result;
//  - all-gather: every peer decodes the owner's bytes, forwarding them
//    unchanged (they land straight in the slot they leave from).
// So every peer's result is decode(the owner's bytes): identical everywhere.
//
// Threading: per-unit slots are disjoint and each lane has its own scratch,
// so lanes call in concurrently; encode_own() runs on the starting thread
// with scratch of its own.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/dtype.h"
#include "core/error.h"
#include "core/quant.h"
#include "peer/ring_plan.h"

namespace ferry::peer {

class QuantizedChunks {
 public:
  // Throws Error(invalid_argument) for data types a codec cannot carry.
  static std::unique_ptr<QuantizedChunks> create(const RingPlan& plan, DType dtype, QuantSpec spec);
  virtual ~QuantizedChunks() = default;

  // Wire bytes of a unit of `count` elements.
  virtual size_t wire_bytes(size_t count) const = 0;
  // Where the bytes this rank sends for `unit` live.
  virtual uint8_t* slot(uint32_t unit) = 0;

  // Step 0: encodes this rank's own input (in the data type) into slot(unit).
  virtual void encode_own(uint32_t unit, const void* local, size_t count) = 0;
  // A reduce-scatter hop: slot(next) = encode(decode(in) op local).
  virtual Status hop(uint32_t lane, ReduceOp op, const uint8_t* in, size_t in_bytes, const void* local, size_t count,
                     uint32_t next) = 0;
  // The owner's last hop: acc = decode(in) op local, /world for avg, encoded
  // into slot(next), and those bytes decoded into `result` (the data type).
  virtual Status finish_owner(uint32_t lane, ReduceOp op, const uint8_t* in, size_t in_bytes, const void* local,
                              size_t count, uint32_t world, uint32_t next, void* result) = 0;
  // All-gather: result = decode(bytes), in the data type.
  virtual Status deliver(uint32_t lane, const uint8_t* bytes, size_t size, size_t count, void* result) = 0;
};

}  // namespace ferry::peer
