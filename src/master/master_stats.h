// What the master counted since it started: the summary it logs when it
// stops (summary_line), and the figures a metrics endpoint will export.
// MasterState updates them on its own thread (the server's serving thread);
// read them there, or once that thread has stopped. Each update is O(1) and
// allocates nothing: they run once per verdict, join or leave, never per member.
#pragma once

#include <array>
#include <chrono>
#include <cstdint>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/error.h"
#include "master/run_journal.h"
#include "wire/messages.h"

namespace ferry::master {

// Counts of observations at or below each upper bound (the last bucket:
// above every bound), their sum and number: what a Prometheus histogram
// exports. The buckets are allocated once; observe() allocates nothing.
struct Histogram {
  explicit Histogram(std::vector<double> upper_bounds)
      : bounds(std::move(upper_bounds)), counts(bounds.size() + 1, 0) {}
  void observe(double value);

  std::vector<double> bounds;   // ascending
  std::vector<uint64_t> counts; // per bucket, not cumulative
  double sum = 0;
  uint64_t count = 0;
};

// Collectives with a verdict, by group, kind (wire::CollectiveKind) and result (Errc).
struct CollectiveKey {
  uint32_t group = 0;
  uint8_t kind = 0;
  uint8_t result = 0;
  auto operator<=>(const CollectiveKey&) const = default;
};

struct MasterStats {
  // Collectives with a verdict (all-reduces and shared-state syncs alike).
  uint64_t committed = 0;
  // Aborted, by the code every member got ([Errc::ok] stays 0).
  std::array<uint64_t, kErrcMax + 1> aborted_by_result{};
  // Of the committed all-reduces: count x dtype size, once per collective (not per member).
  uint64_t bytes_reduced = 0;
  // Of the committed: the shared-state syncs, and the bytes their plans had
  // the members fetch (summed over the members that fetched).
  uint64_t syncs_committed = 0;
  uint64_t sync_bytes_fetched = 0;
  // Begins answered peer_lost at once, with no collective started: the
  // member's ring had changed (a member lost, or a vote under way) and it has
  // not voted yet. One per member and call, so not counted as aborts.
  uint64_t begins_refused = 0;
  // Peers welcomed: newcomers, and members back after a master restart (resume hellos).
  uint64_t joins = 0;
  uint64_t resumes = 0;
  // Peers removed, by why: they said leave; their connection closed or went
  // silent; the master kicked them (a protocol violation, an eviction).
  uint64_t left = 0;
  uint64_t lost = 0;
  uint64_t kicked = 0;

  // Of the committed collectives: each phase's duration (run_journal.h:
  // CollectiveRecord), in seconds, and one member's bytes (all-reduces and
  // broadcasts; a sync's fetched bytes).
  Histogram start_seconds{phase_bounds()};
  Histogram transfer_seconds{phase_bounds()};
  Histogram commit_seconds{phase_bounds()};
  Histogram bytes_per_collective{byte_bounds()};
  // Every verdict. A new entry per group, kind and result seen, so bounded by the groups a run has.
  std::map<CollectiveKey, uint64_t> collectives;
  // Groups that emptied (their last peer left): /metrics shows their gauges at 0, as a
  // scraper expects of a gauge, rather than leaving the series out. Bounded likewise.
  std::set<uint32_t> emptied_groups;

  uint64_t aborted() const;
  // Counts a verdict: the map above always, the histograms when it committed.
  void record(const CollectiveRecord& record);

  static std::vector<double> phase_bounds();  // 1 ms .. 2 min
  static std::vector<double> byte_bounds();   // 1 KiB .. 4 GiB
};

// Bytes one member contributes to a collective: an all-reduce's count x dtype
// size; 0 for other kinds or a dtype no enum knows.
uint64_t collective_bytes(const wire::CollectiveBegin& begin);

// A tensor's bytes (count x dtype size; 0 for a dtype no enum knows).
uint64_t tensor_bytes(const wire::TensorDigest& tensor);

// Bytes a shared-state sync's plans fetch, summed over the members that fetch.
// `tensors`: any member's (the election checked they share one layout).
uint64_t sync_fetch_bytes(const std::vector<wire::TensorDigest>& tensors,
                          const std::map<uint64_t, wire::SyncPlan>& plans);

// "4 MiB", "512 B": a size for a log line.
std::string bytes_text(uint64_t bytes);

// The line the master logs when it stops, e.g. "summary: ran 1h02m03s;
// collectives 1200 committed, 3 aborted (peer lost 2, collective mismatch 1);
// 4.7 GiB reduced; shared-state syncs 2 committed, 512 MiB fetched; peers 5
// joined, 0 resumed, 3 left, 1 lost, 1 kicked; 2 begins refused on a changed ring".
std::string summary_line(const MasterStats& stats, std::chrono::milliseconds run_time);

}  // namespace ferry::master
