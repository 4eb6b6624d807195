#include "orchestrator.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <optional>
#include <string>
#include <thread>

#include "child_process.h"  // tools/common
#include "json.h"           // tools/common
#include "rank_report.h"

namespace ferry::bench {

using tooling::Child;
using tooling::ChildSet;
using tooling::Clock;

namespace {

constexpr std::size_t kTailLines = 25;
constexpr auto kMasterStartup = std::chrono::seconds(15);
constexpr auto kGraceAfterFailure = std::chrono::seconds(2);
constexpr auto kMasterStopGrace = std::chrono::seconds(3);
// Gloo's per-collective deadline (at least this; else the run's deadline, so
// a slow emulated WAN does not time Gloo out first); its TCP connect gets five times it.
constexpr int kGlooMinTimeoutS = 60;

// What the Gloo ranks run: the all-reduce asked for, or gloo::allgather beside ferry's all-gather.
std::string gloo_algorithm(const BenchArgs& args) { return is_all_gather(args) ? "allgather" : args.gloo_algorithm; }
// Peers and Gloo ranks exit 3 when a result was wrong: their reports are whole,
// and the tables say what was wrong.
constexpr int kExitWrongResult = 3;

bool ended_well(const Child* child) {
  const std::optional<int> code = child->exit_code();
  return code && (*code == 0 || *code == kExitWrongResult);
}

std::string indented(const std::string& text) {
  if (text.empty()) return "    (nothing on stderr)";
  std::string out = "    ";
  for (const char c : text) {
    out += c;
    if (c == '\n') out += "    ";
  }
  return out;
}

std::string last_line(const Child& child) {
  const std::string tail = child.err_tail(1);
  return tail.empty() ? "" : ": " + tail;
}

std::size_t lines_in(const std::string& text) { return static_cast<std::size_t>(std::count(text.begin(), text.end(), '\n')); }

}  // namespace

void watch(ChildSet& children, const std::vector<Child*>& workers, Child* master, Clock::time_point deadline,
           double deadline_s, const std::string& label, std::size_t sizes, const std::function<void()>& after_read) {
  auto failed = [&](const Child* child) { return !child->running() && !ended_well(child); };
  auto all_done = [&] { return std::all_of(workers.begin(), workers.end(), ended_well); };
  auto any_failed = [&] {
    return std::any_of(workers.begin(), workers.end(), failed) || (master != nullptr && !master->running());
  };
  auto read_and_check = [&] {
    if (after_read) after_read();
    return all_done() || any_failed();
  };
  if (!children.pump_until(read_and_check, deadline)) {
    std::string stuck;
    for (const Child* child : workers) {
      if (child->running()) {
        stuck += "\n  " + child->name() + " (pid " + std::to_string(child->pid()) + ") had reported " +
                 std::to_string(lines_in(child->out())) + " of " + std::to_string(sizes) + " sizes; its stderr:\n" +
                 indented(child->err_tail(kTailLines));
      }
    }
    children.kill_all();
    char budget[32];
    std::snprintf(budget, sizeof budget, "%.0f", deadline_s);
    throw RunFailed(label + " run: the deadline of " + budget + " s passed (raise it with --timeout-s); killed:" + stuck);
  }
  if (all_done()) return;

  // Let the others notice and say so, then end everything.
  children.pump_until(
      [&] { return std::none_of(workers.begin(), workers.end(), [](const Child* c) { return c->running(); }); },
      Clock::now() + kGraceAfterFailure);
  children.kill_all();
  std::vector<const Child*> ended;
  for (const Child* child : workers) ended.push_back(child);
  if (master != nullptr) ended.push_back(master);
  // The first to end badly is the likeliest cause; the master ending at all is bad. Those
  // found ended in the same look (a loaded machine did not run us between their ends) are
  // named together: which of them ended first is not known.
  int first_look = 0;
  for (const Child* child : ended) {
    const bool bad = child == master ? child->end_order() != 0 : failed(child);
    if (bad && (first_look == 0 || child->end_look() < first_look)) first_look = child->end_look();
  }
  std::vector<const Child*> culprits;
  for (const Child* child : ended)
    if ((child == master ? child->end_order() != 0 : failed(child)) && child->end_look() == first_look)
      culprits.push_back(child);
  if (culprits.empty()) throw RunFailed(label + " run failed, and no process says why");
  std::string message = label + " run failed: ";
  if (culprits.size() > 1) message += "these ended first, found together (which of them ended before is not known):\n";
  for (const Child* culprit : culprits)
    message += (culprit == culprits.front() ? "" : "\n") + culprit->name() + " (pid " +
               std::to_string(culprit->pid()) + ")" + (culprits.size() > 1 ? "" : " ended first") + ", with " +
               culprit->describe_exit() + "; its stderr:\n" + indented(culprit->err_tail(kTailLines));
  std::string others;
  for (const Child* child : workers) {
    if (std::find(culprits.begin(), culprits.end(), child) == culprits.end())
      others += "\n  " + child->name() + ": " + child->describe_exit() + last_line(*child);
  }
  if (!others.empty()) message += "\nthe others:" + others;
  throw RunFailed(message);
}

std::string start_listener(ChildSet& children, const std::string& name, const std::vector<std::string>& argv,
                           const Placement& where, Child*& child) {
  child = &children.spawn(name, argv);
  Child& c = *child;
  children.pump_until([&] { return !c.running() || c.out().find('\n') != std::string::npos; },
                      Clock::now() + kMasterStartup);
  // "NAME listening on HOST:PORT"
  const std::string line = c.out().substr(0, c.out().find('\n'));
  const std::string prefix = name + " listening on ";
  const std::size_t colon = line.rfind(':');
  if (line.rfind(prefix, 0) != 0 || colon == std::string::npos || colon + 1 >= line.size()) {
    const std::string state = c.running() ? "gave no port within " + std::to_string(kMasterStartup.count()) + " s"
                                          : "ended with " + c.describe_exit();
    children.kill_all();
    throw RunFailed(name + " (" + argv.at(where.argv_prefix.size()) + " on " + where.where + ") " + state +
                    "; its stderr:\n" + indented(c.err_tail(kTailLines)));
  }
  return line.substr(colon + 1);
}

std::string start_master(const BenchArgs& args, ChildSet& children, const Launcher& launcher, const Binaries& binaries,
                         Child*& master) {
  const Placement where = launcher.place(ProcessRole::master, 0);
  std::vector<std::string> argv = where.argv_prefix;
  // --verbose shows the master's info lines too: the ring it chose and why, probe rounds.
  argv.insert(argv.end(), {binaries.master, "--listen", host_port(where.listen_host(), "0"), "--log-level",
                           args.verbose ? "info" : "warn", "--ring-order", args.ring_order});
  if (!args.secret_file.empty()) argv.insert(argv.end(), {"--secret-file", args.secret_file});
  if (!args.tls_dir.empty()) {
    argv.insert(argv.end(), {"--tls-cert", args.tls_dir + "/master.pem", "--tls-key", args.tls_dir + "/master.key",
                             "--tls-ca", args.tls_dir + "/ca.pem"});
  }
  return start_listener(children, "ferry-master", argv, where, master);
}

namespace {

std::string sizes_arg(const BenchArgs& args) {
  std::string out;
  for (const std::size_t bytes : args.sizes) {
    if (!out.empty()) out += ',';
    out += std::to_string(bytes);
  }
  return out;
}

// A fresh directory for Gloo's FileStore, removed when the run is over.
class StoreDir {
 public:
  StoreDir() {
    const char* tmp = std::getenv("TMPDIR");
    std::string pattern = std::string(tmp != nullptr && *tmp != '\0' ? tmp : "/tmp") + "/ferry-bench-gloo-XXXXXX";
    if (::mkdtemp(pattern.data()) == nullptr) throw RunFailed("cannot create a Gloo store directory: " + pattern);
    path_ = pattern;
  }
  ~StoreDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  StoreDir(const StoreDir&) = delete;
  StoreDir& operator=(const StoreDir&) = delete;
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

}  // namespace

Clock::time_point run_deadline(const BenchArgs& args) {
  return Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(run_deadline_s(args)));
}

std::vector<std::string> run_ferry_peers(const BenchArgs& args, const Launcher& launcher, const Binaries& binaries,
                                         const std::string& label, const std::function<std::string(int)>& name_of,
                                         const std::function<void(const std::vector<Child*>&)>& on_output) {
  const auto deadline = run_deadline(args);
  ChildSet children(args.verbose);
  Child* master = nullptr;
  const Placement master_at = launcher.place(ProcessRole::master, 0);
  const std::string master_port = args.master.empty() ? start_master(args, children, launcher, binaries, master) : "";

  std::vector<Child*> peers;
  for (int i = 0; i < args.peers; ++i) {
    const Placement where = launcher.place(ProcessRole::ferry_peer, i);
    // Each peer dials the master in a family its host has (an IPv6-only host: the master's IPv6 address).
    const std::string master_address =
        args.master.empty() ? host_port(reachable_host(where, master_at), master_port) : args.master;
    std::vector<std::string> argv = where.argv_prefix;
    argv.insert(argv.end(), {binaries.self, "--role", "peer", "--peer-index", std::to_string(i), "--bind-host",
                             where.listen_host(), "--master", master_address});
    const std::vector<std::string> forwarded = peer_forwarded_args(args);
    argv.insert(argv.end(), forwarded.begin(), forwarded.end());
    // In --hosts order, one second apart: each hello reaches the master before the next, so they join in it.
    if (i > 0 && !args.hosts.empty()) std::this_thread::sleep_for(std::chrono::seconds(1));
    peers.push_back(&children.spawn(name_of(i), argv));
  }
  std::function<void()> after_read;
  if (on_output) after_read = [&] { on_output(peers); };
  watch(children, peers, master, deadline, run_deadline_s(args), label, args.sizes.size(), after_read);
  if (master != nullptr) children.stop(*master, kMasterStopGrace);
  std::vector<std::string> outs;
  for (const Child* peer : peers) outs.push_back(peer->out());
  return outs;
}

FerryRun run_ferry(const BenchArgs& args, const Launcher& launcher, const Binaries& binaries, const OnRow& on_row) {
  auto name_of = [](int i) { return "peer " + std::to_string(i); };
  const RunShape shape{"ferry", "ring", args.connections, args.concurrent};
  RowFeed rows(args, shape, parse_ferry_reports, on_row);
  const std::vector<std::string> outs = run_ferry_peers(args, launcher, binaries, "ferry", name_of,
                                                        [&](const std::vector<Child*>& peers) { rows.read(peers); });
  std::vector<std::vector<RankReport>> per_peer;
  std::optional<std::vector<LinkMeasurement>> link_matrix;
  LinkEndsById ends;
  for (std::size_t i = 0; i < outs.size(); ++i) {
    const int index = static_cast<int>(i);
    per_peer.push_back(parse_ferry_reports(outs[i], name_of(index)));
    tooling::for_each_json_line(outs[i], name_of(index), [&](const tooling::JsonValue& line) {
      if (auto links = parse_link_matrix_line(line)) link_matrix = std::move(links);
    });
    if (!per_peer.back().empty()) {
      const RankReport& report = per_peer.back().front();
      const std::string host = launcher.place(ProcessRole::ferry_peer, index).host_name;
      ends[report.peer_id] = {report.peer_id, report.rank, index, host};
    }
  }
  FerryRun run{summarize(args, shape, per_peer), {}};
  std::vector<std::string> ring(outs.size());
  for (const auto& [id, end] : ends)
    if (end.rank >= 0 && static_cast<std::size_t>(end.rank) < ring.size())
      ring[static_cast<std::size_t>(end.rank)] = end.host.empty() ? name_of(end.peer_index) : end.host;
  auto host_of = [&](std::uint64_t peer_id) {
    auto it = ends.find(peer_id);
    if (it == ends.end()) return "peer id " + std::to_string(peer_id);
    return it->second.host.empty() ? name_of(it->second.peer_index) : it->second.host;
  };
  for (std::size_t s = 0; s < run.runs.size(); ++s) {
    RunSummary& summary = run.runs[s];
    summary.ring = ring;
    summary.ring_order = args.ring_order;
    for (const auto& reports : per_peer) {
      if (s >= reports.size()) continue;
      const RankReport& report = reports[s];
      summary.relayed_bytes += report.relayed_bytes;
      if (report.next_link_relay == 0 || report.rank < 0 || ring.empty()) continue;
      const std::size_t r = static_cast<std::size_t>(report.rank);
      summary.relayed_hops.push_back({ring[r % ring.size()], ring[(r + 1) % ring.size()], host_of(report.next_link_relay)});
    }
  }
  if (!link_matrix) throw std::runtime_error("ferry run: no peer reported the link matrix (rank 0 owes it)");
  run.link_matrix = std::move(*link_matrix);
  name_link_ends(run.link_matrix, ends);
  return run;
}

std::vector<RunSummary> run_gloo(const BenchArgs& args, const Launcher& launcher, const Binaries& binaries,
                                 const OnRow& on_row) {
  const double deadline_s = run_deadline_s(args);
  const auto deadline = run_deadline(args);
  const StoreDir store;
  ChildSet children(args.verbose);
  std::vector<Child*> ranks;
  for (int r = 0; r < args.peers; ++r) {
    const Placement where = launcher.place(ProcessRole::gloo_rank, r);
    std::vector<std::string> argv = where.argv_prefix;
    argv.insert(argv.end(), {binaries.gloo, "--rank", std::to_string(r), "--world", std::to_string(args.peers),
                             "--store", store.path(), "--run-id", "ferry-bench", "--host", where.host, "--sizes",
                             sizes_arg(args), "--dtype", std::string(elem_type_name(args.dtype)), "--algorithm",
                             gloo_algorithm(args), "--iters", std::to_string(args.iters), "--warmup",
                             std::to_string(args.warmup), "--timeout-s",
                             std::to_string(std::max(kGlooMinTimeoutS, static_cast<int>(deadline_s)))});
    ranks.push_back(&children.spawn("gloo rank " + std::to_string(r), argv));
  }
  const RunShape shape{"gloo", gloo_algorithm(args), 1, 1};
  RowFeed rows(args, shape, parse_gloo_reports, on_row);
  watch(children, ranks, nullptr, deadline, deadline_s, "gloo", args.sizes.size(), [&] { rows.read(ranks); });

  std::vector<std::vector<RankReport>> per_rank;
  for (const Child* rank : ranks) per_rank.push_back(parse_gloo_reports(rank->out(), rank->name()));
  std::vector<RunSummary> runs = summarize(args, shape, per_rank);
  std::vector<std::string> ring;
  for (int r = 0; r < args.peers; ++r) {
    const std::string host = launcher.place(ProcessRole::gloo_rank, r).host_name;
    ring.push_back(host.empty() ? "rank " + std::to_string(r) : host);
  }
  for (RunSummary& run : runs) {
    run.ring = ring;
    run.ring_order = "rank";
  }
  return runs;
}

}  // namespace ferry::bench
