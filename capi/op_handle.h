// The C handle of a collective in flight (ferry_op), shared by the capi/ files
// that issue one (comm_api.cpp: all-reduces; gather_api.cpp: all-gathers) and
// ferry_op_test / ferry_op_wait, which serve both.
#pragma once

#include <memory>

#include "capi/device_staging.h"
#include "ferry/ferry.h"
#include "peer/allreduce_op.h"
#include "peer/gather_op.h"

struct ferry_op {
  // Exactly one of these is set.
  std::shared_ptr<ferry::peer::AllreduceOp> impl;
  std::shared_ptr<ferry::peer::GatherOp> gather;
  // Device buffers (desc->device): the host copy the op reduces in place,
  // delivered to device_recv once it succeeds.
  std::unique_ptr<ferry::capi::StagedBuffer> staged;
  void* device_recv = nullptr;
};

// What an all-gather hands its caller: the op's result, shared with the op
// so that either may go first.
struct ferry_gathered {
  std::shared_ptr<ferry::peer::GatheredBytes> bytes;
};

namespace ferry::capi {

// Throws invalid_argument for an info whose struct_size is unset.
void check_info(const ferry_op_info* info);
void fill_info(ferry_op_info* info, const peer::OpInfo& from);
// ferry_op_wait's part for an all-gather: waits, fills info, throws the failure.
void finish_gather(ferry_op& op, ferry_op_info* info);

}  // namespace ferry::capi
