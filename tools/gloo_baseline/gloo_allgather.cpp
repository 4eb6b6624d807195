// --algorithm allgather: gloo::allgather (gloo/allgather.h), the baseline of
// ferry-bench --collective all_gather. Every rank contributes `bytes` bytes
// (equal sizes: Gloo's allgather takes no others) and receives world * bytes,
// rank r's at offset r * bytes. Timed and checked as the all-reduces are.
#include <xxhash.h>

#include <gloo/allgather.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <vector>

#include "gloo_runner.h"
#include "input_pattern.h"
#include "process_cpu.h"

namespace ferry::gloo_baseline {

namespace {

constexpr std::uint32_t kAllgatherTag = 3;  // distinct from the all-reduce's and the barrier's

}  // namespace

SizeResult GlooBench::run_allgather(std::size_t bytes) {
  const std::size_t world = static_cast<std::size_t>(args_.world);
  // Bytes, as ferry's all-gather sees them; the input pattern of the dtype, as ferry-bench fills it.
  const std::size_t count = bytes / dtype_size(args_.dtype);
  std::vector<std::uint8_t> input(bytes), output(bytes * world);
  tooling::fill_input(args_.dtype, input.data(), count, args_.seed, args_.rank);
  std::memset(output.data(), 0, output.size());  // fault the pages in outside the timing
  auto options = std::make_shared<gloo::AllgatherOptions>(context_);
  options->setInput(input.data(), bytes);
  options->setOutput(output.data(), output.size());
  options->setTag(kAllgatherTag);
  options->setTimeout(args_.timeout);

  SizeResult result;
  result.bytes = bytes;
  for (int iteration = 0; iteration < args_.warmup + args_.iters; ++iteration) {
    barrier();
    const double cpu_before = tooling::process_cpu_s();
    const auto start = std::chrono::steady_clock::now();
    gloo::allgather(*options);
    const auto stop = std::chrono::steady_clock::now();
    const double cpu_after = tooling::process_cpu_s();
    if (iteration >= args_.warmup) {
      result.times_s.push_back(std::chrono::duration<double>(stop - start).count());
      result.cpu_s += cpu_after - cpu_before;
    }
  }
  result.result_hash = XXH3_64bits(output.data(), output.size());
  result.correct = true;
  std::vector<std::uint8_t> expected(bytes);
  for (std::size_t r = 0; r < world && result.correct; ++r) {
    tooling::fill_input(args_.dtype, expected.data(), count, args_.seed, static_cast<int>(r));
    if (std::memcmp(output.data() + r * bytes, expected.data(), bytes) != 0) {
      result.correct = false;
      std::fprintf(stderr, "ferry-gloo-bench[rank %d]: %zu bytes: rank %zu's block differs from its input\n",
                   args_.rank, bytes, r);
    }
  }
  return result;
}

}  // namespace ferry::gloo_baseline
