// The ring order from a link matrix (master/ring_choice.h): exact against
// brute force, unreachable pairs avoided, and the heuristic never worse than
// the order it starts from.
#include <catch2/catch.hpp>

#include <algorithm>
#include <numeric>
#include <random>

#include "master/ring_choice.h"

using namespace ferry::master;

namespace {

RingProblem random_problem(size_t n, std::mt19937& rng) {
  RingProblem p = RingProblem::sized(n);
  // Few distinct rates, so bottlenecks tie and the RTT decides among them.
  std::uniform_int_distribution<int> rate(1, 5), rtt(1, 200);
  for (size_t a = 0; a < n; ++a)
    for (size_t b = 0; b < n; ++b)
      if (a != b) {
        p.bw(a, b) = 25e6 * rate(rng);
        p.rtt_ms[a * n + b] = rtt(rng);
      }
  return p;
}

// Every ring through brute force: the best bottleneck, then the least RTT among
// rings within `tolerance` of it.
RingChoice brute_force(const RingProblem& p, double tolerance) {
  std::vector<size_t> order(p.n);
  std::iota(order.begin(), order.end(), 0);
  double best_bottleneck = -1;
  do {
    best_bottleneck = std::max(best_bottleneck, evaluate_ring(p, order).bottleneck);
  } while (std::next_permutation(order.begin() + 1, order.end()));
  RingChoice best{{}, 0, std::numeric_limits<double>::infinity()};
  std::iota(order.begin(), order.end(), 0);
  do {
    RingChoice c = evaluate_ring(p, order);
    if (c.bottleneck >= best_bottleneck * (1 - tolerance) && c.total_rtt_ms < best.total_rtt_ms) best = c;
  } while (std::next_permutation(order.begin() + 1, order.end()));
  best.bottleneck = best_bottleneck;
  return best;
}

std::vector<size_t> arrival(size_t n) {
  std::vector<size_t> order(n);
  std::iota(order.begin(), order.end(), 0);
  return order;
}

}  // namespace

TEST_CASE("ring choice: equals brute force on random matrices up to 9 peers, bottleneck then RTT", "[master][ring]") {
  std::mt19937 rng(7);
  for (size_t n = 3; n <= 9; ++n)
    for (int trial = 0; trial < (n <= 7 ? 20 : 3); ++trial) {
      RingProblem p = random_problem(n, rng);
      RingChoice want = brute_force(p, 0.05);
      RingChoice got = choose_ring(p, arrival(n));
      INFO("n " << n << " trial " << trial);
      CHECK(got.bottleneck >= want.bottleneck * 0.95);
      CHECK(got.total_rtt_ms == Approx(want.total_rtt_ms));
      std::vector<size_t> sorted = got.order;
      std::sort(sorted.begin(), sorted.end());
      CHECK(sorted == arrival(n));  // a ring of every member, once each
    }
}

TEST_CASE("ring choice: one slow pair ends up apart, and an unreachable pair is avoided", "[master][ring]") {
  RingProblem p = RingProblem::sized(4);
  for (size_t a = 0; a < 4; ++a)
    for (size_t b = 0; b < 4; ++b)
      if (a != b) p.bw(a, b) = 25e6;
  p.bw(0, 1) = p.bw(1, 0) = 2.5e6;  // 20 Mbit/s between 0 and 1
  RingChoice slow = evaluate_ring(p, arrival(4));
  CHECK(slow.bottleneck == 2.5e6);
  RingChoice chosen = choose_ring(p, arrival(4));
  CHECK(chosen.bottleneck == 25e6);

  p.bw(0, 1) = p.bw(1, 0) = 25e6;
  p.bw(2, 3) = -1;  // 2 cannot dial 3
  chosen = choose_ring(p, arrival(4));
  CHECK(chosen.bottleneck == 25e6);
  for (size_t i = 0; i < 4; ++i) CHECK_FALSE((chosen.order[i] == 2 && chosen.order[(i + 1) % 4] == 3));

  // 3 reaches nobody: no ring avoids it; the given order stands, and says so.
  for (size_t b = 0; b < 3; ++b) p.bw(3, b) = -1;
  chosen = choose_ring(p, arrival(4));
  CHECK(chosen.order == arrival(4));
  CHECK(chosen.bottleneck < 0);
}

TEST_CASE("ring choice: unknown pairs count as the slowest known one", "[master][ring]") {
  RingProblem p = RingProblem::sized(3);
  for (size_t a = 0; a < 3; ++a)
    for (size_t b = 0; b < 3; ++b)
      if (a != b) p.bw(a, b) = 10e6;
  p.bw(1, 2) = 0;
  p.bw(2, 0) = 4e6;
  CHECK(evaluate_ring(p, {0, 1, 2}).bottleneck == 4e6);
  CHECK(choose_ring(p, {0, 1, 2}).order == std::vector<size_t>{0, 2, 1});
}

TEST_CASE("ring choice: beyond the exact size the search never ends worse than the order it starts from",
          "[master][ring]") {
  std::mt19937 rng(11);
  for (size_t n : {13, 40, 64}) {
    RingProblem p = random_problem(n, rng);
    // One slow member: whatever ring, its out-link is the bottleneck unless it is fast to someone.
    std::vector<size_t> start = arrival(n);
    std::shuffle(start.begin(), start.end(), rng);
    RingChoice given = evaluate_ring(p, start);
    RingChoice got = choose_ring(p, start);
    INFO("n " << n);
    CHECK(got.bottleneck >= given.bottleneck);
    if (got.bottleneck == given.bottleneck) CHECK(got.total_rtt_ms <= given.total_rtt_ms);
    std::vector<size_t> sorted = got.order;
    std::sort(sorted.begin(), sorted.end());
    CHECK(sorted == arrival(n));
  }
}

namespace {

// Whether the members in `kept` have a ring avoiding every unreachable pair (brute force).
bool has_ring(const RingProblem& p, std::vector<size_t> kept) {
  if (kept.size() < 2) return true;
  std::sort(kept.begin(), kept.end());
  do {
    bool ok = true;
    for (size_t i = 0; i < kept.size() && ok; ++i) ok = p.bw(kept[i], kept[(i + 1) % kept.size()]) >= 0;
    if (ok) return true;
  } while (std::next_permutation(kept.begin() + 1, kept.end()));
  return false;
}

}  // namespace

TEST_CASE("ring choice: with no ring, the fewest members are dropped, the lightest among equals", "[master][ring]") {
  std::mt19937 rng(11);
  std::bernoulli_distribution blocked(0.45);
  int rings_without_drop = 0, drops = 0;
  for (size_t n = 2; n <= 7; ++n)
    for (int trial = 0; trial < 30; ++trial) {
      RingProblem p = random_problem(n, rng);
      for (size_t a = 0; a < n; ++a)
        for (size_t b = 0; b < n; ++b)
          if (a != b && blocked(rng)) p.bw(a, b) = -1;
      std::vector<double> weight(n);
      for (size_t i = 0; i < n; ++i) weight[i] = static_cast<double>(i % 3) + 1.0 / static_cast<double>(i + 1);
      // Brute force: the smallest drop set that leaves a ring, the lightest among those.
      size_t best_count = n;
      double best_weight = 0;
      for (uint32_t mask = 0; mask < (1u << n); ++mask) {  // mask: the dropped members
        std::vector<size_t> kept;
        double w = 0;
        for (size_t v = 0; v < n; ++v)
          if (mask >> v & 1)
            w += weight[v];
          else
            kept.push_back(v);
        if (kept.empty() || !has_ring(p, kept)) continue;
        size_t count = n - kept.size();
        if (count < best_count || (count == best_count && w < best_weight - 1e-12)) {
          best_count = count;
          best_weight = w;
        }
      }
      std::vector<size_t> dropped = fewest_to_drop(p, weight);
      INFO("n " << n << " trial " << trial);
      REQUIRE(dropped.size() == best_count);
      double w = 0;
      std::vector<size_t> kept;
      for (size_t v = 0; v < n; ++v)
        if (std::count(dropped.begin(), dropped.end(), v))
          w += weight[v];
        else
          kept.push_back(v);
      CHECK(w == Approx(best_weight));
      CHECK(has_ring(p, kept));
      (dropped.empty() ? rings_without_drop : drops) += 1;
    }
  CHECK(rings_without_drop > 10);  // both kinds of instance were tried
  CHECK(drops > 10);
}

TEST_CASE("ring choice: beyond the exact size, dropping isolates the member nobody can reach", "[master][ring]") {
  const size_t n = 20;
  RingProblem p = RingProblem::sized(n);
  for (size_t a = 0; a < n; ++a)
    for (size_t b = 0; b < n; ++b)
      if (a != b) p.bw(a, b) = b == 13 ? -1 : 25e6;  // nobody can dial 13
  CHECK(fewest_to_drop(p, std::vector<double>(n, 1.0)) == std::vector<size_t>{13});
  p.bw(4, 13) = 25e6;  // one can
  CHECK(fewest_to_drop(p, std::vector<double>(n, 1.0)).empty());
}
