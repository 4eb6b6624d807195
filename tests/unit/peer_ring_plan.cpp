// RingPlan: simulate the whole ring from every rank's plan and check that
// senders and receivers agree on every unit and that the result is right.
#include <catch2/catch.hpp>

#include <algorithm>
#include <numeric>
#include <vector>

#include "peer/ring_plan.h"

using ferry::peer::ElementRange;
using ferry::peer::RingPlan;

TEST_CASE("ring plan: every rank's plan fits its neighbours' and the simulated ring sums correctly", "[ring_plan]") {
  for (uint32_t world = 1; world <= 7; ++world)
    for (size_t count : {size_t{0}, size_t{1}, size_t{2}, size_t{5}, size_t{13}, size_t{1000}, size_t{4099}})
      for (uint32_t lanes : {1u, 2u, 3u, 4u})
        for (size_t max_chunk : {size_t{4096}, size_t{1} << 20})
          for (size_t align : {size_t{1}, size_t{256}}) {
            CAPTURE(world, count, lanes, max_chunk, align);
            std::vector<RingPlan> plans;
            for (uint32_t r = 0; r < world; ++r) plans.emplace_back(count, 4, world, r, lanes, max_chunk, align);
            // Integer data: exact sums, so the simulation checks coverage, not rounding.
            std::vector<std::vector<long>> input(world, std::vector<long>(count)), result = input;
            for (uint32_t r = 0; r < world; ++r)
              for (size_t i = 0; i < count; ++i) input[r][i] = static_cast<long>((r + 1) * 1000 + i);
            result = input;
            const RingPlan& p0 = plans[0];
            for (uint32_t r = 0; r < world; ++r) {
              CHECK(plans[r].units() == p0.units());
              CHECK(plans[r].chunks_per_segment() == p0.chunks_per_segment());
            }
            // Steps in order; within a step every rank sends before anyone receives (as the real pipeline allows).
            for (uint32_t step = 0; step < p0.steps(); ++step) {
              std::vector<std::vector<std::pair<ElementRange, std::vector<long>>>> inbox(world);
              for (uint32_t r = 0; r < world; ++r)
                for (uint32_t c = 0; c < p0.chunks_per_segment(); ++c) {
                  uint32_t unit = plans[r].unit(step, c);
                  ElementRange s = plans[r].send_range(unit);
                  ElementRange expect = plans[(r + 1) % world].recv_range(unit);
                  REQUIRE(s.begin == expect.begin);
                  REQUIRE(s.count == expect.count);
                  if (s.count == 0) continue;
                  const auto& from = step == 0 ? input[r] : result[r];
                  inbox[(r + 1) % world].push_back(
                      {s, std::vector<long>(from.begin() + static_cast<long>(s.begin),
                                            from.begin() + static_cast<long>(s.begin + s.count))});
                }
              for (uint32_t r = 0; r < world; ++r)
                for (auto& [range, values] : inbox[r])
                  for (size_t i = 0; i < range.count; ++i)
                    result[r][range.begin + i] =
                        p0.is_reduce_step(step) ? values[i] + input[r][range.begin + i] : values[i];
            }
            for (uint32_t r = 0; r < world; ++r)
              for (size_t i = 0; i < count; ++i) {
                long want = 0;
                for (uint32_t q = 0; q < world; ++q) want += input[q][i];
                REQUIRE(result[r][i] == want);
              }
            // Counts and bytes agree around the ring.
            uint64_t bytes = 0;
            for (uint32_t r = 0; r < world; ++r) {
              CHECK(plans[r].units_to_send() == plans[(r + 1) % world].units_to_receive());
              bytes += plans[r].payload_bytes();
            }
            // The ring optimum: each element crosses 2(N-1) links in total.
            CHECK(bytes == 2ull * (world - 1) * count * 4);
          }
}

TEST_CASE("ring plan: chunks respect the size limit and stripe over every lane", "[ring_plan]") {
  RingPlan plan(64u << 20, 4, 3, 0, 4, 1u << 20);  // 256 MiB of f32 over 3 peers
  CHECK(plan.chunks_per_segment() % 4 == 0);
  for (uint32_t c = 0; c < plan.chunks_per_segment(); ++c) CHECK(plan.chunk(0, c).count * 4 <= (1u << 20));
  RingPlan small(1000, 4, 2, 0, 4, 1u << 20);  // 2 KB segments: too small to stripe
  CHECK(small.chunks_per_segment() == 1);
  RingPlan mid(64 * 1024, 4, 2, 0, 4, 1u << 20);  // 128 KiB segments: one chunk per lane
  CHECK(mid.chunks_per_segment() == 4);
}

TEST_CASE("ring plan: an alignment puts every segment and chunk boundary on a multiple of it", "[ring_plan]") {
  for (size_t count : {size_t{1}, size_t{255}, size_t{256}, size_t{257}, size_t{1000}, size_t{65536}, size_t{1000003}})
    for (uint32_t world : {2u, 3u, 5u, 8u})
      for (uint32_t lanes : {1u, 4u})
        for (size_t max_chunk : {size_t{4096}, size_t{1} << 20}) {
          CAPTURE(count, world, lanes, max_chunk);
          const size_t align = 256;
          RingPlan plan(count, 4, world, 0, lanes, max_chunk, align);
          std::vector<int> covered(count, 0);
          for (uint32_t seg = 0; seg < world; ++seg)
            for (uint32_t c = 0; c < plan.chunks_per_segment(); ++c) {
              ElementRange r = plan.chunk(seg, c);
              if (r.count == 0) continue;
              CHECK(r.begin % align == 0);
              CHECK(((r.begin + r.count) % align == 0 || r.begin + r.count == count));
              CHECK(r.count * 4 <= std::max(max_chunk, align * 4));  // the limit, or one aligned piece
              for (size_t i = r.begin; i < r.begin + r.count; ++i) ++covered[i];
            }
          CHECK(std::count(covered.begin(), covered.end(), 1) == static_cast<long>(count));
        }
  // Alignment 1 is the plan without one.
  RingPlan plain(1000003, 4, 5, 2, 4, 4096), one(1000003, 4, 5, 2, 4, 4096, 1);
  CHECK(plain.chunks_per_segment() == one.chunks_per_segment());
  for (uint32_t u = 0; u < plain.units(); ++u) {
    CHECK(plain.send_range(u).begin == one.send_range(u).begin);
    CHECK(plain.send_range(u).count == one.send_range(u).count);
  }
}
