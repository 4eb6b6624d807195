#include "bench_args.h"
#include "tool_cli.h"  // tools/common

#include <CLI/CLI.hpp>

#include <algorithm>
#include <charconv>
#include <climits>
#include <cstdio>
#include <limits>
#include <map>

namespace ferry::gloo_baseline {

std::string_view algorithm_name(Algorithm algorithm) {
  switch (algorithm) {
    case Algorithm::allreduce: return "allreduce";
    case Algorithm::ring: return "ring";
    case Algorithm::ring_chunked: return "ring_chunked";
    case Algorithm::allgather: return "allgather";
  }
  return "?";
}

std::size_t parse_byte_size(std::string_view text) {
  try {
    return tooling::parse_byte_size(text);
  } catch (const std::invalid_argument& e) {
    throw ArgsError(e.what());
  }
}

std::vector<std::size_t> parse_byte_sizes(std::string_view text) {
  try {
    return tooling::parse_byte_sizes(text);
  } catch (const std::invalid_argument& e) {
    throw ArgsError(e.what());
  }
}

namespace {

constexpr const char* kDescription =
    "Runs Gloo's all-reduce (sum) as one rank of an N-process job and prints one\n"
    "JSON line per size on stdout; logs go to stderr. Ranks meet through Gloo's\n"
    "FileStore in --store: give every run a fresh directory (or a --run-id not used\n"
    "before in that directory), since Gloo refuses to overwrite a key it finds there.\n"
    "Exit status: 0 ok, 1 rendezvous or collective failed, 2 bad arguments,\n"
    "3 a result differed from the exact expected sum.";

const std::map<std::string, Dtype> kDtypes{{"f32", Dtype::f32}, {"f64", Dtype::f64}, {"i32", Dtype::i32}};
const std::map<std::string, Algorithm> kAlgorithms{
    {"allreduce", Algorithm::allreduce}, {"ring", Algorithm::ring}, {"ring_chunked", Algorithm::ring_chunked},
    {"allgather", Algorithm::allgather}};

// Checks that need several options at once; CLI11 validators see one at a time.
void check_consistency(const BenchArgs& args) {
  if (args.rank >= args.world) {
    throw ArgsError("--rank " + std::to_string(args.rank) + " is outside --world " + std::to_string(args.world));
  }
  const std::size_t element = dtype_size(args.dtype);
  for (const std::size_t bytes : args.sizes) {
    if (bytes % element != 0) {
      throw ArgsError("size " + std::to_string(bytes) + " is not a multiple of the " +
                      std::string(dtype_name(args.dtype)) + " element size");
    }
    // The classic algorithms take the element count as an int.
    if (args.algorithm != Algorithm::allreduce && args.algorithm != Algorithm::allgather && bytes / element > static_cast<std::size_t>(INT_MAX)) {
      throw ArgsError("size " + std::to_string(bytes) + " has more elements than --algorithm " +
                      std::string(algorithm_name(args.algorithm)) + " can take (INT_MAX)");
    }
  }
  if (args.run_id.find('/') != std::string::npos) {
    throw ArgsError("--run-id must not contain '/'");
  }
}

}  // namespace

std::optional<BenchArgs> parse_bench_args(int argc, char** argv) {
  BenchArgs args;
  std::string sizes_text = "1M,16M,64M,256M";
  std::string dtype_text = "f32";
  std::string algorithm_text = "allreduce";
  long timeout_s = args.timeout.count();

  CLI::App app(kDescription, "ferry-gloo-bench");
  app.add_option("--rank", args.rank, "This process's rank, 0..world-1")->required()->check(CLI::NonNegativeNumber);
  app.add_option("--world", args.world, "Number of ranks (processes)")->required()->check(CLI::Range(2, 4096));
  app.add_option("--store", args.store_dir, "FileStore directory shared by all ranks (created if missing; use a fresh one per run)")
      ->required();
  app.add_option("--run-id", args.run_id, "Key prefix inside --store, the same on every rank")->default_val("ferry-gloo-bench");
  app.add_option("--host", args.host, "Address (or host name) the TCP device binds to, e.g. 127.0.0.1")->required();
  app.add_option("--sizes", sizes_text, "Comma-separated bytes per all-reduce; K/M/G are binary (1M = 1048576)")
      ->capture_default_str();
  app.add_option("--dtype", dtype_text, "Element type")
      ->check(CLI::IsMember(kDtypes, CLI::ignore_case))
      ->capture_default_str();
  app.add_option("--algorithm", algorithm_text,
                 "allreduce (gloo::allreduce, ring), ring (AllreduceRing), ring_chunked (AllreduceRingChunked) or "
                 "allgather (gloo::allgather of each rank's --sizes bytes)")
      ->check(CLI::IsMember(kAlgorithms, CLI::ignore_case))
      ->capture_default_str();
  app.add_option("--iters", args.iters, "Timed iterations per size")->capture_default_str()->check(CLI::Range(1, 1000000));
  app.add_option("--warmup", args.warmup, "Untimed iterations per size before the timed ones")
      ->capture_default_str()
      ->check(CLI::Range(0, 1000000));
  app.add_option("--seed", args.seed, "Seed of the deterministic input")->capture_default_str();
  app.add_option("--timeout-s", timeout_s, "Deadline in seconds for the rendezvous and for each collective")
      ->capture_default_str()
      ->check(CLI::Range(1L, 86400L));

  tooling::add_version_flag(app, tooling::version_text("ferry-gloo-bench", tooling::built_ferry_version()));

  if (!tooling::parse_or_throw<ArgsError>(app, argc, argv)) return std::nullopt;  // --help, --version
  args.sizes = parse_byte_sizes(sizes_text);
  args.dtype = kDtypes.at(dtype_text);  // IsMember has normalised the case
  args.algorithm = kAlgorithms.at(algorithm_text);
  args.timeout = std::chrono::seconds(timeout_s);
  check_consistency(args);
  return args;
}

}  // namespace ferry::gloo_baseline
