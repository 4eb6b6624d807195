// The reduction-order contract of ring_plan.h, pinned: segment j is combined
// as (((x_j + x_{j+1}) + x_{j+2}) ... + x_{j+N-1}), `incoming + local` at each
// hop, and every rank ends with the owner's expression. Floating-point sums
// depend on that order, so bit-exactness across versions (and against any
// other implementation of the protocol) rests on it. The ring is simulated
// with a fold that records its operands instead of adding them: any change
// to who sends which segment when, or to who combines what with what, turns
// up as a different expression.
#include <catch2/catch.hpp>

#include <map>
#include <string>
#include <vector>

#include "peer/ring_plan.h"

using ferry::peer::ElementRange;
using ferry::peer::RingPlan;

namespace {

using Expr = std::string;

Expr operand(uint32_t rank) {
  Expr e(1, 'x');  // not "x" + to_string(): gcc 12 -O3 warns falsely (-Wrestrict) on that
  return e += std::to_string(rank);
}

// The engine's reduce step: out = incoming (op) local.
Expr fold(const Expr& incoming, const Expr& local) { return "(" + incoming + "+" + local + ")"; }

// What ring_plan.h promises for every element of segment j.
Expr documented_order(uint32_t segment, uint32_t world) {
  Expr e = operand(segment);
  for (uint32_t k = 1; k < world; ++k) e = "(" + e + "+" + operand((segment + k) % world) + ")";
  return e;
}

bool same_range(ElementRange a, ElementRange b) { return a.begin == b.begin && a.count == b.count; }

// Runs the ring the way AllreduceOp drives it: step 0 sends the rank's own
// input; a unit received at a reduce step is folded with the local *input*
// and forwarded as unit + chunks_per_segment; one received at an all-gather
// step is kept and forwarded unchanged. Rank r sends to r + 1.
// Returns each rank's final buffer.
std::vector<std::vector<Expr>> run_ring(const std::vector<RingPlan>& plans, size_t count) {
  const uint32_t world = static_cast<uint32_t>(plans.size());
  const uint32_t cps = plans[0].chunks_per_segment();
  std::vector<std::vector<Expr>> result(world, std::vector<Expr>(count));
  // What rank r will send as unit u (filled when u - cps arrives).
  std::vector<std::map<uint32_t, std::vector<Expr>>> outgoing(world);
  for (uint32_t r = 0; r < world; ++r)
    for (uint32_t c = 0; c < cps; ++c) {
      ElementRange own = plans[r].send_range(plans[r].unit(0, c));
      for (size_t i = 0; i < own.count; ++i) outgoing[r][plans[r].unit(0, c)].push_back(operand(r));
    }
  for (uint32_t step = 0; step < plans[0].steps(); ++step)
    for (uint32_t r = 0; r < world; ++r)
      for (uint32_t c = 0; c < cps; ++c) {
        const uint32_t unit = plans[r].unit(step, c);
        const ElementRange sent = plans[r].send_range(unit);
        const uint32_t to = (r + 1) % world;
        const ElementRange got = plans[to].recv_range(unit);
        REQUIRE(same_range(sent, got));
        if (sent.count == 0) continue;
        std::vector<Expr> payload = outgoing[r].at(unit);
        REQUIRE(payload.size() == sent.count);
        std::vector<Expr> kept(got.count);
        for (size_t i = 0; i < got.count; ++i)
          kept[i] = plans[to].is_reduce_step(step) ? fold(payload[i], operand(to)) : payload[i];
        for (size_t i = 0; i < got.count; ++i) result[to][got.begin + i] = kept[i];
        if (step + 1 < plans[to].steps()) {
          // The engine forwards from where it received: the next unit must name the same elements.
          REQUIRE(same_range(plans[to].send_range(unit + cps), got));
          outgoing[to][unit + cps] = std::move(kept);
        }
      }
  return result;
}

}  // namespace

TEST_CASE("ring order: every segment is folded in the documented order, the same on every rank",
          "[ring_plan][order]") {
  for (uint32_t world = 2; world <= 6; ++world)
    for (size_t count : {size_t{3}, size_t{11}, size_t{5000}})  // fewer elements than ranks, a few, many chunks
      for (uint32_t lanes : {1u, 3u}) {
        CAPTURE(world, count, lanes);
        std::vector<RingPlan> plans;
        for (uint32_t r = 0; r < world; ++r) plans.emplace_back(count, 4, world, r, lanes, 4096);
        const auto result = run_ring(plans, count);
        for (uint32_t seg = 0; seg < world; ++seg) {
          const ElementRange range = plans[0].segment(seg);
          const Expr want = documented_order(seg, world);
          for (uint32_t r = 0; r < world; ++r)
            for (size_t i = range.begin; i < range.begin + range.count; ++i) {
              INFO("segment " << seg << ", rank " << r << ", element " << i);
              REQUIRE(result[r][i] == want);
            }
        }
      }
}

TEST_CASE("ring order: rank r completes segment r+1 at the last reduce step, from rank r-1's partial",
          "[ring_plan][order]") {
  for (uint32_t world = 2; world <= 6; ++world)
    for (uint32_t r = 0; r < world; ++r) {
      CAPTURE(world, r);
      RingPlan plan(1000, 4, world, r, 1, 1 << 20);
      REQUIRE(plan.last_reduce_step() == world - 2);
      CHECK(plan.recv_segment(plan.last_reduce_step()) == (r + 1) % world);
      // Step 0 sends the rank's own segment from its input: the first operand of segment j is x_j.
      CHECK(plan.send_segment(0) == r);
      // A written-out case, so the formula above is not the only witness.
      if (world == 3) {
        const char* want[] = {"((x0+x1)+x2)", "((x1+x2)+x0)", "((x2+x0)+x1)"};
        CHECK(documented_order(r, world) == want[r]);
      }
    }
}
