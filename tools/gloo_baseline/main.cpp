// ferry-gloo-bench: one rank of Gloo's all-reduce, the baseline ferry-bench
// runs next to ferry in the same invocation. ferry-bench starts N of these
// (ranks 0..N-1, same --world, --store, --run-id, --sizes, --dtype, --iters,
// --warmup, --algorithm and --seed) and reads one JSON line per size from each.
//
// stdout carries the JSON lines and nothing else; all logs go to stderr.
#include "bench_args.h"
#include "gloo_runner.h"

#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <memory>
#include <optional>
#include <string>

#include <unistd.h>

namespace {

using ferry::gloo_baseline::BenchArgs;

constexpr int kExitOk = 0;
constexpr int kExitFailed = 1;
constexpr int kExitBadArgs = 2;
constexpr int kExitWrongResult = 3;

// Keeps the real stdout for the JSON lines and points fd 1 at stderr, so that
// anything a library prints with std::cout or printf (later Gloo releases log
// "[Gloo] Rank ... is connected" there) cannot corrupt the JSON stream.
std::FILE* claim_stdout_for_json() {
  std::fflush(stdout);
  const int json_fd = ::dup(STDOUT_FILENO);
  if (json_fd < 0 || ::dup2(STDERR_FILENO, STDOUT_FILENO) < 0) {
    return nullptr;
  }
  return ::fdopen(json_fd, "w");
}

// Ends the process without unwinding: Gloo's destructors may wait on a peer that
// is already gone, and a failed run must exit within its deadline.
[[noreturn]] void fail(const BenchArgs& args, const char* phase, const char* what) {
  std::fprintf(stderr, "ferry-gloo-bench[rank %d]: %s failed: %s\n", args.rank, phase, what);
  std::fflush(nullptr);
  std::_Exit(kExitFailed);
}

}  // namespace

int main(int argc, char** argv) {
  std::optional<BenchArgs> parsed;
  try {
    parsed = ferry::gloo_baseline::parse_bench_args(argc, argv);
  } catch (const ferry::gloo_baseline::ArgsError& e) {
    std::fprintf(stderr, "ferry-gloo-bench: %s\nRun with --help for more information.\n", e.what());
    return kExitBadArgs;
  }
  if (!parsed) {
    return kExitOk;  // --help, --version
  }
  const BenchArgs& args = *parsed;

  // A peer that closes its socket must surface as a Gloo error, not kill us silently.
  std::signal(SIGPIPE, SIG_IGN);
  std::FILE* json = claim_stdout_for_json();
  if (json == nullptr) {
    std::perror("ferry-gloo-bench: cannot set up stdout");
    return kExitFailed;
  }

  std::unique_ptr<ferry::gloo_baseline::GlooBench> bench;
  const auto rendezvous_start = std::chrono::steady_clock::now();
  try {
    bench = std::make_unique<ferry::gloo_baseline::GlooBench>(args);
  } catch (const std::exception& e) {
    const std::string hint = std::string(e.what()) + " [store '" + args.store_dir.string() + "', run id '" +
                             args.run_id + "'; every rank must be started, and each run needs a fresh store or run id]";
    fail(args, "rendezvous", hint.c_str());
  }
  std::fprintf(stderr, "ferry-gloo-bench[rank %d]: connected to %d peers in %.3f s\n", args.rank, args.world - 1,
               std::chrono::duration<double>(std::chrono::steady_clock::now() - rendezvous_start).count());

  bool all_correct = true;
  for (const std::size_t bytes : args.sizes) {
    ferry::gloo_baseline::SizeResult result;
    try {
      result = bench->run_size(bytes);
    } catch (const std::exception& e) {
      const std::string phase = "all-reduce of " + std::to_string(bytes) + " bytes";
      fail(args, phase.c_str(), e.what());
    }
    all_correct = all_correct && result.correct;
    const std::string line = ferry::gloo_baseline::to_json_line(args, result);
    std::fprintf(json, "%s\n", line.c_str());
    std::fflush(json);
  }
  // Leave together: a rank that exits while a neighbour's last bytes are still
  // in flight (an emulated WAN holds them for rtt/2) resets that neighbour.
  try {
    bench->barrier();
  } catch (const std::exception& e) {
    fail(args, "the final barrier", e.what());
  }
  std::fclose(json);
  return all_correct ? kExitOk : kExitWrongResult;
}
