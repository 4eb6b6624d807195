// ferry-bench --collective all_gather, a peer's side: every peer contributes
// its --sizes bytes (the input pattern of its rank, as the all-reduce fills
// it), C all-gathers in flight per iteration (tags 0..C-1). Correct when every
// rank's block of the result is that rank's exact input; bit-identical when
// every peer's result hashes alike (aggregate.h).
#pragma once

#include <ferry/ferry.h>

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "bench_args.h"
#include "peer_session.h"

namespace ferry::bench {

class GatherRounds {
 public:
  GatherRounds(const BenchArgs& args, PeerSession& session, std::size_t bytes);
  ~GatherRounds();
  GatherRounds(const GatherRounds&) = delete;
  GatherRounds& operator=(const GatherRounds&) = delete;

  // One iteration: issues every all-gather, then waits every one issued; the bytes
  // this peer sent, summed. Keeps the results (the last iteration's are checked).
  // Throws PeerFailure. Call drop_results() first, outside the timing.
  std::uint64_t run_iteration();
  void drop_results();
  // Of the last iteration's result of op k: its hash (hash_hex), and whether every
  // block is its rank's input (a wrong one is logged).
  std::string hash(std::uint32_t k) const;
  bool correct(std::uint32_t k) const;

 private:
  const BenchArgs& args_;
  PeerSession& session_;
  const std::size_t bytes_;
  std::vector<Buffer> send_;
  std::vector<ferry_gathered*> results_;
};

}  // namespace ferry::bench
