// The integer-domain family of quantized chunks (quantized_chunks.h: scale
// agreement, integers summed along the ring, the exact sum gathered).
// Internal to src/peer; QuantizedChunks::create() is the way in.
#pragma once

#include <memory>

#include "peer/quantized_chunks.h"

namespace ferry::peer {

// T: the accumulation type (float for f16/bf16/f32 data, double for f64).
// Throws Error(invalid_argument) for ops other than sum and avg, and for a
// group larger than core/int_quant.h's kMaxIntQuantGroup.
template <class T>
std::unique_ptr<QuantizedChunks> make_int_domain_chunks(const RingPlan& plan, DType dtype, ReduceOp op, QuantSpec spec,
                                                        QuantizedBuffers buffers);

}  // namespace ferry::peer
