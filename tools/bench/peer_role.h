// The peer role of ferry-bench (--role peer): one process of the ring, driven
// through the public C API only, that prints one JSON line per size on stdout
// (rank_report.h) and its log on stderr.
//
// Per size: C send buffers (op k's input from seed op_seed(k) and this rank),
// C receive buffers; W warmup then I timed iterations. Each iteration passes a
// one-element all-reduce (the barrier, so peers start together), then issues C
// all-reduces (tags 0..C-1) with ferry_allreduce_async and waits them all;
// the time runs from the first issue to the last wait.
#pragma once

#include "bench_args.h"

namespace ferry::bench {

// Returns the exit status: 0 ok, 1 a ferry call failed, 3 a result was wrong.
int run_peer(const BenchArgs& args);

}  // namespace ferry::bench
