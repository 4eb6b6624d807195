// Several all-reduces at once, retried in the new world after a peer is lost.
//
// Jobs are issued in index order, at most `max_in_flight` at a time. A
// retryable failure (peer lost, timeout) stops issuing; in-flight operations
// the master has not started are cancelled (so every peer ends up with the
// same set of unfinished jobs: verdicts are the master's, the same for all);
// the rest are waited. Then every peer votes a new topology together, and the
// unfinished jobs are issued again, in index order, in the new world. This
// repeats until all succeed, the group has fewer than two peers, a failure is
// not retryable, or `max_attempts` rounds were spent.
//
// In-place jobs (send == recv) lose their input to partial sums when they
// fail, so their input is copied aside first and restored before each retry:
// memory for one copy of every in-place buffer.
#pragma once

#include <span>

#include "peer/communicator.h"

namespace ferry::peer {

struct AllreduceJob {
  const void* send = nullptr;
  void* recv = nullptr;
  size_t count = 0;
  AllreduceSpec spec;
};

struct RetryPolicy {
  uint32_t max_in_flight = 4;
  uint32_t max_attempts = 16;
  uint32_t min_world = 2;
};

// `total` sums bytes and time over every attempt; world_size is the last world.
Status allreduce_with_retry(Communicator& comm, std::span<const AllreduceJob> jobs, const RetryPolicy& policy,
                            OpInfo* total);

}  // namespace ferry::peer
