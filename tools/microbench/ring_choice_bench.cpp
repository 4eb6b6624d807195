// Time of the master's ring choice (src/master/ring_choice.h) on random
// matrices: exact up to 12 peers, the local search beyond. Issue 16's
// budget: 64 peers within 100 ms, 256 within 1 s, on one core.
#include <benchmark/benchmark.h>

#include <numeric>
#include <random>

#include "master/ring_choice.h"

namespace {

using namespace ferry::master;

void choose(benchmark::State& state) {
  size_t n = static_cast<size_t>(state.range(0));
  std::mt19937 rng(3);
  std::uniform_real_distribution<double> rate(10e6, 30e6), rtt(1, 230);
  RingProblem p = RingProblem::sized(n);
  for (size_t a = 0; a < n; ++a)
    for (size_t b = 0; b < n; ++b)
      if (a != b) {
        p.bw(a, b) = rate(rng);
        p.rtt_ms[a * n + b] = rtt(rng);
      }
  std::vector<size_t> start(n);
  std::iota(start.begin(), start.end(), 0);
  double gain = 0;
  for (auto _ : state) {
    RingChoice c = choose_ring(p, start, 0.05, std::chrono::milliseconds(10'000));
    gain = c.bottleneck / evaluate_ring(p, start).bottleneck;
    benchmark::DoNotOptimize(c);
  }
  state.counters["bottleneck_gain"] = gain;
}

}  // namespace

BENCHMARK(choose)->Arg(8)->Arg(12)->Arg(64)->Arg(256)->Unit(benchmark::kMillisecond);
BENCHMARK_MAIN();
