// One peer group's link matrix: for each ordered pair of members, what the
// sending member last measured of its link to the other (peer/link_stats.h).
//
// Bounded by membership: an entry's two ends are members (record() ignores
// the rest, forget() drops a leaving member's row and column), so a group of
// N holds at most N(N-1) entries, and the matrix goes with its group. Entries
// age out: one not refreshed for max_age_ms is dropped (a link's rate from an
// hour ago says little about it now). Time is the master's clock (ms).
//
// A pair that could not connect (a probe's or a ring link's dial failed) is
// unreachable until its back-off ends: `initial` after its first failure,
// doubling with each further one up to `max`. Then it is unknown again and
// retry_due() says so, so the next vote probes it: a healed firewall or
// route is used again. A success forgets its failures.
//
// Threading: none; the master's state machine owns it (master_state.h).
#pragma once

#include <algorithm>
#include <cstdint>
#include <map>
#include <tuple>
#include <utility>
#include <vector>

#include "wire/messages.h"

namespace ferry::master {

class LinkMatrix {
 public:
  // `from`'s measurements at `now_ms`; entries whose far end is not in
  // `members` are ignored. An entry's age_ms says how old it already was.
  // Probed entries (probe_done) also set the pair's capacity, which later
  // passive reports keep: a ring link's goodput is the whole ring's pace,
  // not what the link could carry.
  void record(uint64_t from, const std::vector<wire::LinkEntry>& entries, const std::vector<uint64_t>& members,
              uint64_t now_ms, bool probed = false);
  struct Backoff {
    uint64_t initial_ms = 30'000;
    uint64_t max_ms = 600'000;
  };
  // `from` could not open a connection to `to`. Returns how long it stays unreachable.
  uint64_t mark_unreachable(uint64_t from, uint64_t to, uint64_t now_ms, Backoff backoff);
  // What the pair can carry, bytes/s, as far as known: the larger of its
  // probed capacity and its latest goodput; kSharedMemoryCapacity over shared memory; -1 when
  // unreachable; 0 when unknown. The probed capacity is the probe's rate less
  // the share of segments it sent twice. Why: a faster sender overruns a
  // slower receiver's downlink queue, which a probe's rate hides (its acked
  // bytes still reach the downlink's rate) but its retransmissions show, and
  // a ring link there loses lanes to recovery. Measured on three-regions:
  // 200 Mbit/s hosts into 100 Mbit/s ones resent 2-9 % where every other
  // pair resent ~0.1 %, and a ring with two such edges ran at 0.74x one with one.
  double capacity(uint64_t from, uint64_t to) const;
  // As capacity(), but 0 rather than -1 for a pair whose dial failed: what its
  // data direction carried when the other end dialed (link_dialers.h).
  double measured_capacity(uint64_t from, uint64_t to) const;
  // Whether `from` failed to open a connection to `to` and is still backing off.
  bool dial_failed(uint64_t from, uint64_t to) const { return unreachable_.count({from, to}) > 0; }
  // A simultaneous open between a and b (either order) failed: neither end may be
  // asked to punch through to the other until its back-off ends (the same doubling
  // as mark_unreachable). Returns how long. A ring link reported between them forgets it.
  uint64_t mark_punch_failed(uint64_t a, uint64_t b, uint64_t now_ms, Backoff backoff);
  bool punch_failed(uint64_t a, uint64_t b) const { return unpunchable_.count(unordered(a, b)) > 0; }
  // A link between a and b relayed through `relay` failed (either leg, or the relay):
  // that relay is not asked for this pair again until its back-off ends; others may be.
  uint64_t mark_relay_failed(uint64_t a, uint64_t b, uint64_t relay, uint64_t now_ms, Backoff backoff);
  bool relay_failed(uint64_t a, uint64_t b, uint64_t relay) const {
    return unrelayable_.count(relayed(a, b, relay)) > 0;
  }
  static constexpr double kSharedMemoryCapacity = 1e12;  // what capacity() says of a shared-memory pair
  double rtt_ms(uint64_t from, uint64_t to) const;
  // A member left: its row and its column go.
  void forget(uint64_t peer);
  // Everything goes (a re-measurement was asked for).
  // (Failures are kept: a pair that fails again backs off longer.)
  void clear() {
    cells_.clear();
    unreachable_.clear();
    unpunchable_.clear();
    unrelayable_.clear();
  }
  // Drops the entries older than max_age_ms, and the unreachable marks whose back-off ended.
  void expire(uint64_t now_ms, uint64_t max_age_ms);
  // Whether some pair of `members` failed before, is due for a retry, and is
  // not yet measured again (call expire first).
  bool retry_due(const std::vector<uint64_t>& members) const;
  // At most `limit` entries, in (from, to) order, each with its age at now_ms.
  std::vector<wire::LinkEntry> entries(uint64_t now_ms, size_t limit) const;
  size_t size() const { return cells_.size(); }
  // The ordered pairs unreachable now (call expire first), at most `limit`.
  std::vector<std::pair<uint64_t, uint64_t>> unreachable_pairs(size_t limit) const;
  // Whether the matrix holds a measurement of from -> to, or knows it
  // unreachable (call expire first for a current answer).
  bool has(uint64_t from, uint64_t to) const { return cells_.count({from, to}) > 0 || unreachable_.count({from, to}) > 0; }

 private:
  struct Cell {
    wire::LinkEntry entry;
    uint64_t measured_at_ms = 0;
    uint64_t probed_bps = 0;          // the last probe's rate; 0: never probed
    uint32_t probed_retrans_ppm = 0;  // the share of its segments that probe sent again
    uint64_t carried_bps = 0;         // the latest goodput a ring link reported (not a probe)
  };
  std::map<std::pair<uint64_t, uint64_t>, Cell> cells_;
  std::map<std::pair<uint64_t, uint64_t>, uint64_t> unreachable_;  // until (ms): its back-off
  std::map<std::pair<uint64_t, uint64_t>, uint32_t> failures_;     // since its last success
  // Simultaneous opens that failed, by unordered pair (smaller id first): until (ms), and how often.
  static std::pair<uint64_t, uint64_t> unordered(uint64_t a, uint64_t b) { return {std::min(a, b), std::max(a, b)}; }
  std::map<std::pair<uint64_t, uint64_t>, uint64_t> unpunchable_;
  std::map<std::pair<uint64_t, uint64_t>, uint32_t> punch_failures_;
  // Relayed links that failed, by (unordered pair, relay): until (ms), and how often.
  using RelayedPair = std::tuple<uint64_t, uint64_t, uint64_t>;
  static RelayedPair relayed(uint64_t a, uint64_t b, uint64_t relay) {
    return {std::min(a, b), std::max(a, b), relay};
  }
  std::map<RelayedPair, uint64_t> unrelayable_;
  std::map<RelayedPair, uint32_t> relay_failures_;
};

}  // namespace ferry::master
