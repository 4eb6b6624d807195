// One rank of the Gloo baseline: rendezvous once, then a measured series of
// in-place all-reduces per size.
//
// Threads: everything runs on the caller's thread, apart from the event loop
// thread that Gloo's TCP device starts for itself.
#pragma once

#include "bench_args.h"

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace gloo {
class Context;
}

namespace ferry::gloo_baseline {

struct SizeResult {
  std::size_t bytes = 0;
  std::vector<double> times_s;     // one per timed iteration, wall time of the collective alone
  std::uint64_t result_hash = 0;   // xxh3-64 of the result of the last iteration
  bool correct = false;            // last result == exact expected sum, bit for bit
  double cpu_s = 0;                // this process's CPU seconds over the timed iterations
};

class GlooBench {
 public:
  // Meets the other ranks in args.store_dir under args.run_id and connects a
  // full TCP mesh bound to args.host. Throws (gloo::Exception or
  // std::filesystem::filesystem_error) on failure; gives up after
  // args.timeout waiting for the other ranks' keys.
  explicit GlooBench(const BenchArgs& args);
  ~GlooBench();
  GlooBench(const GlooBench&) = delete;
  GlooBench& operator=(const GlooBench&) = delete;

  // Runs args.warmup + args.iters all-reduces of `bytes` bytes. Before each
  // iteration the input is copied in afresh and all ranks pass a barrier; only
  // the collective is timed. Throws gloo::Exception when a peer fails or a
  // deadline passes.
  SizeResult run_size(std::size_t bytes);

  // Every rank waits for all the others (args.timeout). Throws gloo::Exception.
  void barrier();

 private:
  template <typename T>
  SizeResult run_typed(std::size_t bytes);
  // --algorithm allgather (gloo_allgather.cpp): correct when every rank's block is its exact input.
  SizeResult run_allgather(std::size_t bytes);

  const BenchArgs& args_;
  std::shared_ptr<gloo::Context> context_;
};

// The JSON object printed for one size, without a trailing newline.
std::string to_json_line(const BenchArgs& args, const SizeResult& result);

}  // namespace ferry::gloo_baseline
