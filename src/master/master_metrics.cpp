#include "master/master_metrics.h"

#include <algorithm>

#include <unistd.h>

#include <dirent.h>
#include <fstream>
#include <sstream>
#include <sys/resource.h>

#include <prometheus/metric_family.h>
#include <prometheus/text_serializer.h>

#include "master/collective_names.h"

namespace ferry::master {

namespace {

using prometheus::ClientMetric;
using prometheus::MetricFamily;
using prometheus::MetricType;
using Labels = std::vector<ClientMetric::Label>;

MetricFamily family(std::string name, std::string help, MetricType type) {
  return MetricFamily{std::move(name), std::move(help), type, {}};
}

void add(MetricFamily& f, Labels labels, double value) {
  ClientMetric m;
  m.label = std::move(labels);
  if (f.type == MetricType::Counter) m.counter.value = value;
  else m.gauge.value = value;
  f.metric.push_back(std::move(m));
}

void add_histogram(MetricFamily& f, Labels labels, const Histogram& h) {
  ClientMetric m;
  m.label = std::move(labels);
  m.histogram.sample_count = h.count;
  m.histogram.sample_sum = h.sum;
  uint64_t cumulative = 0;
  for (size_t i = 0; i < h.bounds.size(); ++i) {
    cumulative += h.counts[i];
    m.histogram.bucket.push_back({cumulative, h.bounds[i]});
  }
  m.histogram.bucket.push_back({h.count, std::numeric_limits<double>::infinity()});
  f.metric.push_back(std::move(m));
}

std::string id_text(uint64_t id) { return std::to_string(id); }

// The process figures every Prometheus client exports (their names are the
// convention dashboards expect), from /proc. Missing files leave them out.
void add_process_metrics(std::vector<MetricFamily>& out) {
  std::ifstream stat("/proc/self/stat");
  std::string line;
  if (std::getline(stat, line)) {
    // Fields after the command name (which may hold spaces) start at ") ".
    std::istringstream rest(line.substr(line.rfind(')') + 2));
    std::vector<std::string> fields;
    for (std::string field; rest >> field;) fields.push_back(field);
    // Field numbers of proc(5) less 3 (pid, comm and state come first; state is fields[0]).
    if (fields.size() > 21) {
      const double ticks = static_cast<double>(sysconf(_SC_CLK_TCK));
      const double page = static_cast<double>(sysconf(_SC_PAGESIZE));
      auto cpu = family("process_cpu_seconds_total", "User and system CPU time the master's process spent.",
                        MetricType::Counter);
      add(cpu, {}, (std::stod(fields[11]) + std::stod(fields[12])) / ticks);
      out.push_back(std::move(cpu));
      auto vsize = family("process_virtual_memory_bytes", "Virtual memory size.", MetricType::Gauge);
      add(vsize, {}, std::stod(fields[20]));
      out.push_back(std::move(vsize));
      auto rss = family("process_resident_memory_bytes", "Resident memory size.", MetricType::Gauge);
      add(rss, {}, std::stod(fields[21]) * page);
      out.push_back(std::move(rss));
      // Start time: ticks after boot, and boot time from /proc/stat.
      std::ifstream proc_stat("/proc/stat");
      for (std::string l; std::getline(proc_stat, l);)
        if (l.rfind("btime ", 0) == 0) {
          auto start = family("process_start_time_seconds", "When the process started, seconds since the epoch.",
                              MetricType::Gauge);
          add(start, {}, std::stod(l.substr(6)) + std::stod(fields[19]) / ticks);
          out.push_back(std::move(start));
        }
    }
  }
  if (DIR* dir = opendir("/proc/self/fd")) {
    double open = 0;
    while (readdir(dir)) ++open;
    closedir(dir);
    auto fds = family("process_open_fds", "Open file descriptors.", MetricType::Gauge);
    add(fds, {}, open - 3);  // ".", ".." and the directory's own descriptor
    out.push_back(std::move(fds));
  }
  rlimit limit{};
  if (getrlimit(RLIMIT_NOFILE, &limit) == 0) {
    auto max = family("process_max_fds", "The open-file limit.", MetricType::Gauge);
    add(max, {}, static_cast<double>(limit.rlim_cur));
    out.push_back(std::move(max));
  }
}

}  // namespace

std::string metrics_text(const RunView& view, const MasterStats& stats) {
  std::vector<MetricFamily> out;

  auto peers = family("ferry_master_peers", "Peers by group and state (member: in the ring; joining: waiting for admission).",
                      MetricType::Gauge);
  auto epoch = family("ferry_master_group_epoch", "The epoch of each group's committed ring.", MetricType::Gauge);
  auto ring_size = family("ferry_master_ring_size", "Members of each group's ring.", MetricType::Gauge);
  auto in_flight = family("ferry_master_collectives_in_flight", "Collectives begun and not yet decided, by group.",
                          MetricType::Gauge);
  auto bottleneck = family("ferry_master_ring_bottleneck_bytes_per_second",
                           "The smallest measured bandwidth along the ring (order=chosen) and along the ring in "
                           "arrival order (order=arrival).",
                           MetricType::Gauge);
  auto revision = family("ferry_master_shared_state_revision", "Each group's shared-state revision.", MetricType::Gauge);
  auto bandwidth = family("ferry_master_link_bandwidth_bytes_per_second",
                          "What each measured ordered pair of peers can carry.", MetricType::Gauge);
  auto rtt = family("ferry_master_link_rtt_seconds", "Each measured ordered pair's round-trip time.", MetricType::Gauge);
  auto shared = family("ferry_master_link_shared_memory",
                       "1 for each ordered pair on one host whose bytes go through shared memory (no TCP figures).",
                       MetricType::Gauge);
  auto unreachable = family("ferry_master_link_unreachable",
                            "1 for each ordered pair that could not connect (avoided until its back-off ends).",
                            MetricType::Gauge);
  for (const GroupView& g : view.groups) {
    const std::string group = std::to_string(g.id);
    size_t joining = g.waiting.size();
    add(peers, {{"group", group}, {"state", "member"}}, static_cast<double>(g.ring.size()));
    add(peers, {{"group", group}, {"state", "joining"}}, static_cast<double>(joining));
    add(epoch, {{"group", group}}, static_cast<double>(g.epoch));
    add(ring_size, {{"group", group}}, static_cast<double>(g.ring.size()));
    add(in_flight, {{"group", group}}, static_cast<double>(g.in_flight.size()));
    if (g.ring_bottleneck_Bps) add(bottleneck, {{"group", group}, {"order", "chosen"}}, *g.ring_bottleneck_Bps);
    if (g.arrival_bottleneck_Bps) add(bottleneck, {{"group", group}, {"order", "arrival"}}, *g.arrival_bottleneck_Bps);
    if (g.shared_revision) add(revision, {{"group", group}}, static_cast<double>(*g.shared_revision));
    for (const LinkView& l : g.links) {
      Labels labels{{"from", id_text(l.from)}, {"group", group}, {"to", id_text(l.to)}};
      if (l.unreachable || l.shared_memory) {
        add(l.unreachable ? unreachable : shared, labels, 1);
        continue;
      }
      if (l.bandwidth_Bps > 0) add(bandwidth, labels, l.bandwidth_Bps);
      if (l.rtt_s > 0) add(rtt, labels, l.rtt_s);
    }
  }
  for (uint32_t id : stats.emptied_groups) {
    if (std::any_of(view.groups.begin(), view.groups.end(), [&](const GroupView& g) { return g.id == id; })) continue;
    const std::string group = std::to_string(id);
    add(peers, {{"group", group}, {"state", "member"}}, 0);
    add(peers, {{"group", group}, {"state", "joining"}}, 0);
    add(ring_size, {{"group", group}}, 0);
    add(in_flight, {{"group", group}}, 0);
  }
  for (auto* f : {&peers, &epoch, &ring_size, &in_flight, &bottleneck, &revision, &bandwidth, &rtt, &shared, &unreachable})
    out.push_back(std::move(*f));

  auto connections = family("ferry_master_connections", "Open connections to the master (peers and strangers).",
                            MetricType::Gauge);
  add(connections, {}, static_cast<double>(view.connections));
  out.push_back(std::move(connections));

  auto collectives = family("ferry_master_collectives_total",
                            "Collectives decided, by group, kind and result (ok, or the error every member got).",
                            MetricType::Counter);
  for (const auto& [key, n] : stats.collectives)
    add(collectives,
        {{"group", std::to_string(key.group)},
         {"kind", collective_kind_name(key.kind)},
         {"result", key.result == 0 ? std::string("ok") : std::string(errc_name(static_cast<Errc>(key.result)))}},
        static_cast<double>(n));
  out.push_back(std::move(collectives));

  auto phases = family("ferry_master_collective_phase_seconds",
                       "Each committed collective's phases: start (first member's begin to the go: members late to "
                       "call it), transfer (go to the last member's end: the data moving), commit (last end to the verdict).",
                       MetricType::Histogram);
  add_histogram(phases, {{"phase", "start"}}, stats.start_seconds);
  add_histogram(phases, {{"phase", "transfer"}}, stats.transfer_seconds);
  add_histogram(phases, {{"phase", "commit"}}, stats.commit_seconds);
  out.push_back(std::move(phases));
  auto sizes = family("ferry_master_collective_bytes",
                      "Bytes one member contributes to each committed collective (a sync: the bytes it fetched).",
                      MetricType::Histogram);
  add_histogram(sizes, {}, stats.bytes_per_collective);
  out.push_back(std::move(sizes));

  auto counter = [&](const char* name, const char* help, uint64_t value, Labels labels = {}) {
    auto f = family(name, help, MetricType::Counter);
    add(f, std::move(labels), static_cast<double>(value));
    out.push_back(std::move(f));
  };
  counter("ferry_master_bytes_reduced_total", "Bytes of committed all-reduces and broadcasts (one member's).",
          stats.bytes_reduced);
  counter("ferry_master_shared_state_syncs_total", "Committed shared-state syncs.", stats.syncs_committed);
  counter("ferry_master_shared_state_bytes_fetched_total", "Bytes the committed syncs had members fetch.",
          stats.sync_bytes_fetched);
  counter("ferry_master_joins_total", "Peers welcomed as newcomers.", stats.joins);
  counter("ferry_master_resumes_total", "Members back after a master restart.", stats.resumes);
  counter("ferry_master_begins_refused_total", "Begins refused at once because the member's ring had changed.",
          stats.begins_refused);
  auto leaves = family("ferry_master_leaves_total",
                       "Peers removed, by reason: left (said so), lost (connection closed or silent), kicked.",
                       MetricType::Counter);
  add(leaves, {{"reason", "left"}}, static_cast<double>(stats.left));
  add(leaves, {{"reason", "lost"}}, static_cast<double>(stats.lost));
  add(leaves, {{"reason", "kicked"}}, static_cast<double>(stats.kicked));
  out.push_back(std::move(leaves));

  add_process_metrics(out);

  // Families with no series are left out (the exposition format allows them, but they say nothing).
  std::erase_if(out, [](const MetricFamily& f) { return f.metric.empty(); });
  return prometheus::TextSerializer().Serialize(out);
}

}  // namespace ferry::master
