#include "master/ring_choice.h"

#include <algorithm>
#include <array>
#include <cstdint>
#include <limits>

namespace ferry::master {
namespace {

using Clock = std::chrono::steady_clock;

// Bandwidth as the objective sees it: unknown pairs as the slowest known one.
struct Edges {
  const RingProblem& p;
  double unknown = 1;
  explicit Edges(const RingProblem& problem) : p(problem) {
    double slowest = std::numeric_limits<double>::infinity();
    for (size_t a = 0; a < p.n; ++a)
      for (size_t b = 0; b < p.n; ++b)
        if (a != b && p.bw(a, b) > 0) slowest = std::min(slowest, p.bw(a, b));
    if (slowest != std::numeric_limits<double>::infinity()) unknown = slowest;
  }
  double bw(size_t a, size_t b) const {
    double v = p.bw(a, b);
    return v < 0 ? -1 : v == 0 ? unknown : v;
  }
};

// Whether one ring is better than another: a higher bottleneck, or the same with less RTT.
bool better(double bottleneck, double rtt, const RingChoice& than) {
  const double eps = 1e-12;
  if (bottleneck > than.bottleneck + eps * std::abs(than.bottleneck) + eps) return true;
  return bottleneck >= than.bottleneck - eps * std::abs(than.bottleneck) && rtt < than.total_rtt_ms - 1e-9;
}

// --- exact, n <= kExactRingSize ---------------------------------------------

// Whether the edges with bandwidth >= threshold hold a Hamiltonian cycle.
bool has_cycle(const Edges& e, size_t n, double threshold) {
  const uint32_t full = (1u << n) - 1;
  std::vector<uint16_t> ends(size_t{1} << n, 0);  // ends[mask]: where a path 0 .. covering mask can end
  ends[1] = 1;
  for (uint32_t mask = 1; mask <= full; mask += 2) {  // every path starts at 0: odd masks only
    for (size_t v = 0; v < n; ++v) {
      if (!(ends[mask] >> v & 1)) continue;
      for (size_t w = 1; w < n; ++w)
        if (!(mask >> w & 1) && e.bw(v, w) >= threshold) ends[mask | (1u << w)] |= static_cast<uint16_t>(1u << w);
    }
  }
  for (size_t v = 1; v < n; ++v)
    if ((ends[full] >> v & 1) && e.bw(v, 0) >= threshold) return true;
  return false;
}

// The least-RTT Hamiltonian cycle over edges with bandwidth >= threshold (Held-Karp).
std::optional<std::vector<size_t>> least_rtt_cycle(const Edges& e, const RingProblem& p, double threshold) {
  size_t n = p.n;
  const uint32_t full = (1u << n) - 1;
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<double> cost((size_t{1} << n) * n, inf);
  std::vector<uint8_t> from((size_t{1} << n) * n, 0);
  auto at = [n](uint32_t mask, size_t v) { return size_t{mask} * n + v; };
  cost[at(1, 0)] = 0;
  for (uint32_t mask = 1; mask <= full; mask += 2)
    for (size_t v = 0; v < n; ++v) {
      double c = cost[at(mask, v)];
      if (c == inf) continue;
      for (size_t w = 1; w < n; ++w) {
        if ((mask >> w & 1) || e.bw(v, w) < threshold) continue;
        double next = c + p.rtt(v, w);
        size_t k = at(mask | (1u << w), w);
        if (next < cost[k]) {
          cost[k] = next;
          from[k] = static_cast<uint8_t>(v);
        }
      }
    }
  double best = inf;
  size_t last = 0;
  for (size_t v = 1; v < n; ++v)
    if (e.bw(v, 0) >= threshold && cost[at(full, v)] + p.rtt(v, 0) < best) {
      best = cost[at(full, v)] + p.rtt(v, 0);
      last = v;
    }
  if (best == inf) return std::nullopt;
  std::vector<size_t> order;
  uint32_t mask = full;
  for (size_t v = last; v != 0;) {
    order.push_back(v);
    size_t prev = from[at(mask, v)];
    mask &= ~(1u << v);
    v = prev;
  }
  order.push_back(0);
  std::reverse(order.begin(), order.end());
  return order;
}

std::optional<std::vector<size_t>> exact(const RingProblem& p, double tolerance) {
  Edges e(p);
  std::vector<double> values;
  for (size_t a = 0; a < p.n; ++a)
    for (size_t b = 0; b < p.n; ++b)
      if (a != b && e.bw(a, b) >= 0) values.push_back(e.bw(a, b));
  std::sort(values.begin(), values.end());
  values.erase(std::unique(values.begin(), values.end()), values.end());
  if (values.empty() || !has_cycle(e, p.n, values.front())) return std::nullopt;  // no ring avoids the unreachable
  size_t lo = 0, hi = values.size() - 1;  // values[lo] feasible; find the largest feasible
  while (lo < hi) {
    size_t mid = (lo + hi + 1) / 2;
    if (has_cycle(e, p.n, values[mid]))
      lo = mid;
    else
      hi = mid - 1;
  }
  return least_rtt_cycle(e, p, values[lo] * (1 - tolerance));
}

// --- local search, any n ----------------------------------------------------

// Moves runs of 1..3 members elsewhere in the ring while that raises the
// bottleneck, or keeps it with less RTT.
std::vector<size_t> improve(const RingProblem& p, std::vector<size_t> order, Clock::time_point deadline) {
  Edges e(p);
  size_t n = order.size();
  if (n < 4) return order;
  RingChoice current = evaluate_ring(p, order);
  bool improved = true;
  while (improved && Clock::now() < deadline) {
    improved = false;
    // The four weakest edges (by start position): the smallest one a move keeps is among them.
    std::vector<std::pair<double, size_t>> edges(n);
    for (size_t i = 0; i < n; ++i) edges[i] = {e.bw(order[i], order[(i + 1) % n]), i};
    std::partial_sort(edges.begin(), edges.begin() + 4, edges.end());
    for (size_t len = 1; len <= 3 && !improved; ++len) {
      for (size_t i = 0; i < n && !improved; ++i) {
        if (Clock::now() >= deadline) return order;
        // The run order[i .. i+len-1] (mod n), between prev and next.
        size_t prev = (i + n - 1) % n, first = i, last = (i + len - 1) % n, next = (i + len) % n;
        if (len + 2 > n) break;
        for (size_t j = (i + len) % n; j != prev; j = (j + 1) % n) {
          // Insert the run between order[j] and order[j+1] (both outside it).
          size_t after = (j + 1) % n;
          size_t removed[3] = {prev, last, j};  // edges prev->first, last->next, j->after (by start)
          double keep = std::numeric_limits<double>::infinity();
          for (size_t k = 0; k < 4; ++k)
            if (edges[k].second != removed[0] && edges[k].second != removed[1] && edges[k].second != removed[2]) {
              keep = edges[k].first;
              break;
            }
          size_t a = order[prev], f = order[first], l = order[last], b = order[next], x = order[j], y = order[after];
          double bottleneck = std::min({keep, e.bw(a, b), e.bw(x, f), e.bw(l, y)});
          double rtt = current.total_rtt_ms - p.rtt(a, f) - p.rtt(l, b) - p.rtt(x, y) + p.rtt(a, b) + p.rtt(x, f) +
                       p.rtt(l, y);
          if (!better(bottleneck, rtt, current)) continue;
          std::vector<size_t> run, rest;
          for (size_t k = 0; k < len; ++k) run.push_back(order[(i + k) % n]);
          for (size_t k = 0; k < n - len; ++k) {
            size_t v = order[(i + len + k) % n];
            rest.push_back(v);
            if (v == x) rest.insert(rest.end(), run.begin(), run.end());
          }
          order = std::move(rest);
          current = evaluate_ring(p, order);
          improved = true;
          break;
        }
      }
    }
  }
  return order;
}

// --- dropping members, when no ring exists --------------------------------

// Every subset that holds a Hamiltonian cycle over reachable pairs (a lone member always does).
std::vector<bool> subsets_with_cycle(const Edges& e, size_t n) {
  const uint32_t count = 1u << n;
  std::vector<uint16_t> ends(count, 0);  // ends[mask]: where a path from mask's lowest member covering mask can end
  std::vector<bool> cycle(count, false);
  for (size_t v = 0; v < n; ++v) ends[1u << v] = static_cast<uint16_t>(1u << v);
  for (uint32_t mask = 1; mask < count; ++mask) {
    size_t low = static_cast<size_t>(__builtin_ctz(mask));
    for (size_t v = 0; v < n; ++v) {
      if (!(ends[mask] >> v & 1)) continue;
      if (mask == (1u << low) || (v != low && e.bw(v, low) >= 0)) cycle[mask] = true;
      for (size_t w = low + 1; w < n; ++w)
        if (!(mask >> w & 1) && e.bw(v, w) >= 0) ends[mask | (1u << w)] |= static_cast<uint16_t>(1u << w);
    }
  }
  return cycle;
}

RingProblem without(const RingProblem& p, const std::vector<size_t>& kept) {
  RingProblem q = RingProblem::sized(kept.size());
  for (size_t a = 0; a < kept.size(); ++a)
    for (size_t b = 0; b < kept.size(); ++b) {
      q.bw(a, b) = p.bw(kept[a], kept[b]);
      q.rtt_ms[a * kept.size() + b] = p.rtt(kept[a], kept[b]);
    }
  return q;
}

bool ring_exists(const RingProblem& p, std::chrono::milliseconds budget) {
  std::vector<size_t> start(p.n);
  for (size_t i = 0; i < p.n; ++i) start[i] = i;
  return p.n < 2 || choose_ring(p, start, 0.05, budget).bottleneck >= 0;
}

}  // namespace

RingProblem RingProblem::sized(size_t n) {
  RingProblem p;
  p.n = n;
  p.bandwidth.assign(n * n, 0);
  p.rtt_ms.assign(n * n, 0);
  return p;
}

size_t relayed_hops(const RingProblem& problem, const std::vector<size_t>& order) {
  if (problem.relayed.empty()) return 0;
  size_t hops = 0;
  for (size_t k = 0; k < order.size(); ++k)
    hops += problem.relayed[order[k] * problem.n + order[(k + 1) % order.size()]];
  return hops;
}

RingChoice evaluate_ring(const RingProblem& problem, const std::vector<size_t>& order) {
  Edges e(problem);
  RingChoice c{order, std::numeric_limits<double>::infinity(), 0};
  size_t n = order.size();
  if (n < 2) {
    c.bottleneck = 0;
    return c;
  }
  for (size_t i = 0; i < n; ++i) {
    size_t a = order[i], b = order[(i + 1) % n];
    c.bottleneck = std::min(c.bottleneck, e.bw(a, b));
    c.total_rtt_ms += problem.rtt(a, b);
  }
  return c;
}

RingChoice choose_ring(const RingProblem& problem, const std::vector<size_t>& start, double tolerance,
                       std::chrono::milliseconds budget) {
  RingChoice given = evaluate_ring(problem, start);
  if (start.size() < 3) return given;  // every order of two is the same ring
  if (problem.n <= kExactRingSize) {
    if (auto order = exact(problem, tolerance)) {
      RingChoice best = evaluate_ring(problem, *order);
      // Within tolerance of the best bottleneck, less RTT: the start stands only if it is no worse.
      if (given.bottleneck >= best.bottleneck && given.total_rtt_ms <= best.total_rtt_ms) return given;
      return best;
    }
    return given;  // no ring avoids every unreachable pair
  }
  return evaluate_ring(problem, improve(problem, start, Clock::now() + budget));
}

std::vector<size_t> fewest_to_drop(const RingProblem& problem, const std::vector<double>& keep_weight,
                                   std::chrono::milliseconds budget) {
  const size_t n = problem.n;
  Edges e(problem);
  std::vector<size_t> dropped;
  if (n <= kExactRingSize) {
    std::vector<bool> cycle = subsets_with_cycle(e, n);
    const uint32_t full = (1u << n) - 1;
    uint32_t best = 0;
    double best_weight = 0;
    for (uint32_t mask = 1; mask <= full; ++mask) {
      if (!cycle[mask]) continue;
      double weight = 0;  // of the members it drops
      for (size_t v = 0; v < n; ++v)
        if (!(mask >> v & 1)) weight += keep_weight[v];
      int size = __builtin_popcount(mask), best_size = __builtin_popcount(best);
      if (size > best_size || (size == best_size && weight < best_weight)) {
        best = mask;
        best_weight = weight;
      }
    }
    for (size_t v = 0; v < n; ++v)
      if (!(best >> v & 1)) dropped.push_back(v);
    return dropped;
  }
  const auto deadline = Clock::now() + budget;
  std::vector<size_t> kept(n);
  for (size_t i = 0; i < n; ++i) kept[i] = i;
  auto remaining = [&] { return std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now()); };
  while (kept.size() > 1 && !ring_exists(without(problem, kept), std::max(remaining(), std::chrono::milliseconds(1)))) {
    size_t worst = 0;
    std::pair<int, double> worst_key{-1, 0};
    for (size_t k = 0; k < kept.size(); ++k) {
      int blocked = 0;
      for (size_t m : kept)
        if (m != kept[k]) blocked += (problem.bw(kept[k], m) < 0) + (problem.bw(m, kept[k]) < 0);
      std::pair<int, double> key{blocked, -keep_weight[kept[k]]};
      if (key > worst_key) {
        worst_key = key;
        worst = k;
      }
    }
    dropped.push_back(kept[worst]);
    kept.erase(kept.begin() + static_cast<std::ptrdiff_t>(worst));
  }
  std::sort(dropped.begin(), dropped.end());
  return dropped;
}

}  // namespace ferry::master
