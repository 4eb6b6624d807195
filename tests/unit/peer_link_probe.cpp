// The probe's rate from its delivered-bytes samples (peer/link_probe.h).
#include <catch2/catch.hpp>

#include <chrono>
#include <vector>

#include "peer/link_probe.h"

using ferry::peer::probe_rate;
using ferry::peer::ProbeSample;
using namespace std::chrono_literals;

TEST_CASE("probe rate: the best span after the ramp, from dense samples", "[link_probe]") {
  const auto start = std::chrono::steady_clock::time_point{} + 1h;
  std::vector<ProbeSample> samples;
  // 1 MB/s for the first 200 ms (the ramp), then 10 MB/s, sampled every 10 ms for 500 ms.
  uint64_t delivered = 0;
  for (int ms = 10; ms <= 500; ms += 10) {
    delivered += ms <= 200 ? 10'000 : 100'000;
    samples.push_back({start + std::chrono::milliseconds(ms), delivered});
  }
  CHECK(probe_rate(samples, start, 100ms) == Approx(10e6));
}

TEST_CASE("probe rate: samples too sparse for a span give the mean rate, not zero", "[link_probe]") {
  // A starved prober thread woke twice in its 250 ms (seen in CI under load).
  const auto start = std::chrono::steady_clock::time_point{} + 1h;
  const std::vector<ProbeSample> samples = {{start + 60ms, 500'000}, {start + 260ms, 2'600'000}};
  CHECK(probe_rate(samples, start, 100ms) == Approx(10e6));
  CHECK(probe_rate({}, start, 100ms) == 0);
  CHECK(probe_rate({{start + 50ms, 0}}, start, 100ms) == 0);  // nothing moved
}
