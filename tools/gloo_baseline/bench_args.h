// Command line of ferry-gloo-bench: what one rank of the Gloo baseline runs.
#pragma once

#include "byte_size.h"
#include "element_type.h"

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace ferry::gloo_baseline {

using Dtype = tooling::ElemType;  // the element types both ferry and Gloo run
enum class Algorithm {
  allreduce,     // gloo::allreduce (gloo/allreduce.h), ring, in place
  ring,          // gloo::AllreduceRing<T>
  ring_chunked,  // gloo::AllreduceRingChunked<T>
  allgather,     // gloo::allgather (gloo/allgather.h): every rank's --sizes bytes to every rank (gloo_allgather.cpp)
};

inline std::string_view dtype_name(Dtype dtype) { return tooling::elem_type_name(dtype); }
inline std::size_t dtype_size(Dtype dtype) { return tooling::elem_type_size(dtype); }
std::string_view algorithm_name(Algorithm algorithm);

struct BenchArgs {
  int rank = 0;
  int world = 0;
  std::filesystem::path store_dir;  // FileStore directory shared by all ranks
  std::string run_id;               // key prefix inside store_dir
  std::string host;                 // address the TCP device binds to
  std::vector<std::size_t> sizes;   // bytes per all-reduce, in run order
  Dtype dtype = Dtype::f32;
  Algorithm algorithm = Algorithm::allreduce;
  int iters = 20;
  int warmup = 5;
  std::uint64_t seed = 1;
  // Bounds the rendezvous (store wait; Gloo allows 5x this for the TCP connect)
  // and every collective and barrier.
  std::chrono::seconds timeout{60};
};

// A command line that cannot be run; what() is the message for the user.
class ArgsError : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Parses "1048576", "64K", "1M", "2G" (binary multiples, case-insensitive).
// Throws ArgsError on anything else, on zero and on overflow.
std::size_t parse_byte_size(std::string_view text);

// Parses a comma-separated list of parse_byte_size values.
std::vector<std::size_t> parse_byte_sizes(std::string_view text);

// Parses argv. Returns std::nullopt when --help was asked for (the help text
// has then been printed to stdout). Throws ArgsError on a bad command line;
// every check that needs only the arguments is done here, so that no rank
// joins a rendezvous it cannot finish.
std::optional<BenchArgs> parse_bench_args(int argc, char** argv);

}  // namespace ferry::gloo_baseline
