#include "master/master_stats.h"

#include <algorithm>
#include <cstdio>
#include <numeric>

#include "core/dtype.h"

namespace ferry::master {

void Histogram::observe(double value) {
  const size_t bucket = static_cast<size_t>(std::lower_bound(bounds.begin(), bounds.end(), value) - bounds.begin());
  ++counts[bucket];
  sum += value;
  ++count;
}

std::vector<double> MasterStats::phase_bounds() {
  return {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120};
}

std::vector<double> MasterStats::byte_bounds() {
  std::vector<double> bounds;
  for (double b = 1024; b <= 4.0 * 1024 * 1024 * 1024; b *= 4) bounds.push_back(b);
  return bounds;
}

void MasterStats::record(const CollectiveRecord& r) {
  ++collectives[{r.group, r.kind, static_cast<uint8_t>(r.result)}];
  if (r.result != Errc::ok) return;
  start_seconds.observe(static_cast<double>(r.start_ms) / 1000);
  transfer_seconds.observe(static_cast<double>(r.transfer_ms) / 1000);
  commit_seconds.observe(static_cast<double>(r.commit_ms) / 1000);
  if (r.bytes) bytes_per_collective.observe(static_cast<double>(r.bytes));
}

uint64_t MasterStats::aborted() const {
  return std::accumulate(aborted_by_result.begin(), aborted_by_result.end(), uint64_t{0});
}

uint64_t collective_bytes(const wire::CollectiveBegin& begin) {
  // A broadcast runs as an all-reduce of its bytes (u8): it moves them as one does.
  const bool reduces = begin.kind == static_cast<uint8_t>(wire::CollectiveKind::allreduce) ||
                       begin.kind == static_cast<uint8_t>(wire::CollectiveKind::broadcast);
  if (!reduces || !dtype_valid(begin.dtype)) return 0;
  return begin.count * dtype_size(static_cast<DType>(begin.dtype));
}

uint64_t tensor_bytes(const wire::TensorDigest& tensor) {
  return dtype_valid(tensor.dtype) ? tensor.count * dtype_size(static_cast<DType>(tensor.dtype)) : 0;
}

uint64_t sync_fetch_bytes(const std::vector<wire::TensorDigest>& tensors,
                          const std::map<uint64_t, wire::SyncPlan>& plans) {
  // Plans name tensors by their position in name order (wire/messages.h, SyncFetch).
  std::vector<const wire::TensorDigest*> by_name;
  for (const wire::TensorDigest& t : tensors) by_name.push_back(&t);
  std::sort(by_name.begin(), by_name.end(), [](const auto* a, const auto* b) { return a->name < b->name; });
  uint64_t bytes = 0;
  for (const auto& [id, plan] : plans)
    for (const wire::SyncFetch& f : plan.fetches)
      if (f.tensor < by_name.size()) bytes += tensor_bytes(*by_name[f.tensor]);
  return bytes;
}

std::string bytes_text(uint64_t bytes) {
  static constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB"};
  double value = static_cast<double>(bytes);
  size_t unit = 0;
  while (value >= 1024 && unit + 1 < std::size(kUnits)) {
    value /= 1024;
    ++unit;
  }
  char text[32];
  // Whole units print without a fraction: "4 MiB", "1.5 GiB".
  if (unit == 0 || value == static_cast<double>(static_cast<uint64_t>(value)))
    std::snprintf(text, sizeof text, "%.0f %s", value, kUnits[unit]);
  else
    std::snprintf(text, sizeof text, "%.1f %s", value, kUnits[unit]);
  return text;
}

namespace {

// "1h02m03s", "4m05s", "12.3s".
std::string duration_text(std::chrono::milliseconds run_time) {
  const auto ms = static_cast<uint64_t>(std::max<int64_t>(run_time.count(), 0));
  char text[48];
  if (ms < 60'000)
    std::snprintf(text, sizeof text, "%.1fs", static_cast<double>(ms) / 1000);
  else if (ms < 3'600'000)
    std::snprintf(text, sizeof text, "%llum%02llus", static_cast<unsigned long long>(ms / 60'000),
                  static_cast<unsigned long long>(ms / 1000 % 60));
  else
    std::snprintf(text, sizeof text, "%lluh%02llum%02llus", static_cast<unsigned long long>(ms / 3'600'000),
                  static_cast<unsigned long long>(ms / 60'000 % 60), static_cast<unsigned long long>(ms / 1000 % 60));
  return text;
}

}  // namespace

std::string summary_line(const MasterStats& s, std::chrono::milliseconds run_time) {
  std::string line = "summary: ran " + duration_text(run_time) + "; collectives " + std::to_string(s.committed) +
                     " committed, " + std::to_string(s.aborted()) + " aborted";
  std::string by_result;
  for (int code = 1; code <= kErrcMax; ++code)
    if (uint64_t n = s.aborted_by_result[static_cast<size_t>(code)])
      by_result += (by_result.empty() ? "" : ", ") + std::string(errc_name(static_cast<Errc>(code))) + " " +
                   std::to_string(n);
  if (!by_result.empty()) line += " (" + by_result + ")";
  line += "; " + bytes_text(s.bytes_reduced) + " reduced";
  line += "; shared-state syncs " + std::to_string(s.syncs_committed) + " committed, " +
          bytes_text(s.sync_bytes_fetched) + " fetched";
  line += "; peers " + std::to_string(s.joins) + " joined, " + std::to_string(s.resumes) + " resumed, " +
          std::to_string(s.left) + " left, " + std::to_string(s.lost) + " lost, " + std::to_string(s.kicked) +
          " kicked";
  line += "; " + std::to_string(s.begins_refused) + " begins refused on a changed ring";
  return line;
}

}  // namespace ferry::master
