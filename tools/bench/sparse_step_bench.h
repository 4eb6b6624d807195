// ferry-bench --collective sparseloco, a peer's side: one SparseLoCo outer
// step's communication per op, as ferry.diloco runs it. Each peer encodes its
// --sizes bytes of f32 (the input pattern of its rank) with the sparse codec
// (--sparse-density, --sparse-bits, chunk 4096), all-gathers the encodings and
// decodes their rank-order sum; all of it is timed. Correct when every rank's
// part is the encoding of that rank's input; bit-identical when every peer's
// sum hashes alike.
#pragma once

#include <ferry/ferry.h>

#include <cstdint>
#include <string>
#include <vector>

#include "bench_args.h"
#include "peer_session.h"

namespace ferry::bench {

class SparseStepRounds {
 public:
  SparseStepRounds(const BenchArgs& args, PeerSession& session, std::size_t bytes);
  ~SparseStepRounds();
  SparseStepRounds(const SparseStepRounds&) = delete;
  SparseStepRounds& operator=(const SparseStepRounds&) = delete;

  // One iteration: encodes and issues every op's all-gather, waits each, decodes each sum;
  // the bytes this peer sent, summed. Throws PeerFailure.
  std::uint64_t run_iteration();
  // Of the last iteration's op k: its sum's hash, and whether every part is its rank's encoding.
  std::string hash(std::uint32_t k) const;
  bool correct(std::uint32_t k) const;

 private:
  std::vector<std::uint8_t> encode(const void* x, float* residual) const;

  const BenchArgs& args_;
  PeerSession& session_;
  const std::size_t count_;
  ferry_sparse_spec spec_;
  std::vector<Buffer> input_;
  std::vector<std::vector<float>> residual_, sum_;
  std::vector<std::vector<std::vector<std::uint8_t>>> parts_;  // [op][rank], the last iteration's
};

}  // namespace ferry::bench
