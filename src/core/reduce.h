// Reduce kernels: the element-wise arithmetic of every collective.
//
// Contract (relied on by the ring engine for bit-exactness):
//  - reduce() is element-wise: out[i] depends only on incoming[i] and local[i],
//    so chunking a buffer never changes a result bit.
//  - Integers wrap modulo 2^bits for sum/avg/prod (computed unsigned: no UB).
//  - f16/bf16 are widened to f32, combined in f32, and rounded to nearest-even
//    once per call.
//  - min/max propagate NaN: if either operand is NaN the result is NaN.
//  - avg is a sum here; finalize_avg() divides once, by the peer that owns the
//    segment, so every peer receives the same quotient.
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/dtype.h"

namespace ferry {

// out[i] = incoming[i] (op) local[i] for i < count. out may alias incoming
// and/or local (exactly, not partially).
void reduce(DType dtype, ReduceOp op, void* out, const void* incoming, const void* local,
            size_t count);

// data[i] = data[i] / world in the element type: integers divide the wrapped
// sum with truncation toward zero; floats use IEEE division (f16/bf16 in f32,
// then rounded). world == 1 leaves data untouched.
void finalize_avg(DType dtype, void* data, size_t count, uint32_t world);

}  // namespace ferry
