#include "chaos_run.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <memory>
#include <random>
#include <set>
#include <stdexcept>

#include "chaos_data.h"
#include "chaos_progress.h"
#include "chaos_proxy.h"
#include "child_process.h"  // tools/common
#include "invariants.h"
#include "peer_lines.h"

namespace ferry::chaos {

using tooling::Child;
using tooling::ChildSet;
using tooling::Clock;

namespace {

constexpr double kTick = 0.1;                 // seconds between looks at the children and the schedule
constexpr double kRssEvery = 5;
constexpr double kConvergeLimit = 120;        // quiescence: seconds for the membership to settle
constexpr double kDetectWindow = 30;          // a failure this long after a fault is not its detection
constexpr double kFaultSpan = 5;              // how long slow/latency shaping lasts
constexpr std::uint64_t kSlowBytesPerSecond = 2 << 20;
constexpr int kExitRemoved = 4;               // ferry-chaos-peer: master lost or kicked
constexpr int kExitStateLost = 6;             // ferry-chaos-peer: it never held the state and nobody offers it

double now_s() { return std::chrono::duration<double>(Clock::now().time_since_epoch()).count(); }

std::uint16_t free_loopback_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  if (fd < 0 || ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0 ||
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) != 0)
    throw std::runtime_error("cannot find a free loopback port");
  ::close(fd);
  return ntohs(addr.sin_port);
}

// A port for the master, below the kernel's ephemeral range: it stays free
// while a killed master is down. One in that range can be taken meanwhile by
// any connect() (seen: "cannot listen on 127.0.0.1 ports 46831..46831:
// Address already in use" at a restart), since SO_REUSEADDR does not help
// against a connected socket.
std::uint16_t master_loopback_port() {
  unsigned ephemeral_low = 32768;
  std::ifstream("/proc/sys/net/ipv4/ip_local_port_range") >> ephemeral_low;
  const unsigned low = 10000, high = std::min(ephemeral_low, 65536u);
  if (high <= low) return 0;  // an odd configuration: let the kernel choose
  unsigned port = low + std::random_device{}() % (high - low);
  for (unsigned tries = 0; tries < high - low; ++tries, port = port + 1 < high ? port + 1 : low) {
    int fd = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (fd < 0) break;
    int on = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);  // as the master will
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    addr.sin_port = htons(static_cast<std::uint16_t>(port));
    const bool bound = ::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0;
    ::close(fd);
    if (bound) return static_cast<std::uint16_t>(port);
  }
  return 0;
}

std::uint64_t rss_kib(pid_t pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/status");
  for (std::string line; std::getline(in, line);)
    if (line.rfind("VmRSS:", 0) == 0) return std::strtoull(line.c_str() + 6, nullptr, 10);
  return 0;
}

std::string find_binary(const ChaosArgs& args, const std::string& name, const std::string& build_subdir) {
  namespace fs = std::filesystem;
  std::vector<fs::path> dirs;
  if (!args.bin_dir.empty()) {
    dirs.push_back(args.bin_dir);
  } else {
    const fs::path here = fs::read_symlink("/proc/self/exe").parent_path();
    dirs = {here, here / ".." / ".." / "tools" / build_subdir};
  }
  for (const fs::path& dir : dirs) {
    const fs::path candidate = (dir / name).lexically_normal();
    if (::access(candidate.c_str(), X_OK) == 0) return candidate.string();
  }
  throw std::runtime_error("cannot find " + name + " (build it, or pass --bin-dir)");
}

struct Peer {
  Child* child = nullptr;
  std::uint16_t route = 0;  // 0: a dial-out-only peer, which no proxy fronts (nobody dials it)
  bool dial_out_only = false;
  std::uint64_t id = 0;  // the master's id, once joined
  std::uint64_t next_relay = 0;  // who relays its link to the next peer, as of its last topo line
  std::size_t consumed = 0;
  double last_line_t = 0;
  bool killed = false;   // by us: its end is expected
  bool stopped = false;
  double stop_until = 0;
  bool kill_after_stop = false;
  bool ended = false;
  bool silent_reported = false;
  std::vector<std::uint64_t> rss;
  // The last success: for the convergence check.
  double last_ok_t0 = 0;
  std::uint64_t last_ok_epoch = 0;
  std::vector<std::uint64_t> last_ok_ring;
  std::string last_line;  // what it said last: in the report when the membership does not converge
};

struct Injection {
  std::string kind;
  std::uint64_t target_id = 0;
  double t = 0;
  bool detected = false;
  double latency_s = 0;  // to the first failure it caused on another member of its ring
};

class ChaosRun {
 public:
  explicit ChaosRun(const ChaosArgs& args)
      : args_(args), rng_(args.seed), proxy_(args.seed), children_(args.verbose),
        checker_(CheckerConfig{args.quant, args.op_deadlines(),
                               [this](std::uint64_t step, std::uint32_t k, const std::vector<std::uint64_t>& ring) {
                                 if (k == kGatherK) {
                                   const auto gathered = reference_gather(args_.seed, step, ring, args_.gather_bytes);
                                   return result_hash(gathered.data(), gathered.size());
                                 }
                                 const auto expected =
                                     reference_sum(count(), op_seed(args_.seed, step, k), ring);
                                 return result_hash(expected.data(), expected.size() * sizeof(float));
                               },
                               [this](std::uint64_t revision) {
                                 const auto expected = state_content(args_.seed, revision);
                                 return result_hash(expected.data(), expected.size() * sizeof(float));
                               }}) {
    master_bin_ = find_binary(args, "ferry-master", "master");
    peer_bin_ = find_binary(args, "ferry-chaos-peer", "../stress/chaos");
  }

  ChaosSummary run();

 private:
  std::size_t count() const { return args_.size_bytes / sizeof(float); }
  void start_master();
  // `open`: accepting connections whatever --dial-out-only-every says.
  Peer& spawn_peer(bool open = false);
  // Whether the harness may kill `p`: an open peer only while as many open peers as
  // dial-out-only ones would stay (two dial-out-only neighbours punch, past the faulty proxies).
  bool may_kill(const Peer& p);
  // At quiescence: the master's removals may have left more dial-out-only peers than
  // open ones, which no fault of ours did: open newcomers restore the balance.
  void rebalance_open_peers();
  void pump(double seconds);
  void read_lines(Peer& p);
  void on_op(Peer& p, OpReport report);
  void on_sync(Peer& p, SyncReport report);
  void on_ended(Peer& p);
  std::vector<Peer*> live(bool joined_only);
  std::size_t extra_closed() const;  // dial-out-only peers allowed beyond the open ones
  std::pair<std::size_t, std::size_t> live_open_and_closed();  // live peers that accept connections, and not
  void kill_one();
  void inject_fault();
  void resume_stopped(bool heal);
  void sample_rss();
  bool converged();
  void check_silence(double now);
  void check_memory();
  void stop_everything();
  void write_logs() const;
  void report_progress(double now);

  const ChaosArgs& args_;
  std::mt19937_64 rng_;
  ChaosProxy proxy_;
  ChildSet children_;
  InvariantChecker checker_;
  std::string master_bin_, peer_bin_, master_address_;
  Child* master_ = nullptr;
  int masters_started_ = 0;
  std::uint16_t master_port_ = 0;  // kept across restarts: peers dial it again
  double master_back_at_ = 0;      // while the master is down (a `master` fault): when it starts again
  std::vector<std::uint64_t> master_rss_;
  std::vector<std::unique_ptr<Peer>> peers_;
  std::vector<Injection> injections_;
  ChaosSummary s_;
  double last_ok_t_ = 0;
  bool quiescing_ = false;
  double quiesce_start_ = 0;
  double started_ = 0;
  double next_progress_ = INFINITY;
};

void ChaosRun::start_master() {
  master_back_at_ = 0;
  // A killed master holds its port until it has ended, which a loaded machine can delay past the
  // restart: its successor then failed "Address already in use". Bind after it is reaped.
  if (master_) children_.pump_until([&] { return !master_->running(); }, Clock::now() + std::chrono::seconds(10));
  if (masters_started_ == 0) master_port_ = master_loopback_port();
  master_ = &children_.spawn("master " + std::to_string(masters_started_++), {master_bin_, "--listen", "127.0.0.1:" + std::to_string(master_port_),
                                              "--log-level", "warn", "--peer-timeout-ms",
                                              std::to_string(args_.heartbeat_ms), "--punch", args_.punch});
  children_.pump_until([&] { return !master_->running() || master_->out().find('\n') != std::string::npos; },
                       Clock::now() + std::chrono::seconds(15));
  const std::string line = master_->out().substr(0, master_->out().find('\n'));
  if (line.rfind("ferry-master listening on ", 0) != 0)
    throw std::runtime_error("ferry-master did not start: " + master_->describe_exit() + ": " + master_->err_tail(5));
  master_port_ = static_cast<std::uint16_t>(std::stoi(line.substr(line.rfind(':') + 1)));
  master_address_ = "127.0.0.1:" + std::to_string(master_port_);
}

Peer& ChaosRun::spawn_peer(bool force_open) {
  auto p = std::make_unique<Peer>();
  const std::size_t index = peers_.size();
  const auto [open, closed] = live_open_and_closed();
  const int every = args_.dial_out_only_every;
  p->dial_out_only =
      !force_open && every > 0 && (index + 1) % static_cast<std::size_t>(every) == 0 && closed + 1 <= open + extra_closed();
  std::vector<std::string> argv = {
      peer_bin_, "--master", master_address_, "--seed", std::to_string(args_.seed), "--count",
      std::to_string(count()), "--quant", ferry_quant_name(args_.quant), "--concurrent",
      std::to_string(args_.concurrent), "--connections", std::to_string(args_.connections), "--timeout-ms",
      std::to_string(args_.timeout_ms), "--progress-ms", std::to_string(args_.progress_ms), "--heartbeat-ms",
      std::to_string(args_.heartbeat_ms), "--state-every", std::to_string(args_.state_every), "--gather-bytes",
      std::to_string(args_.gather_bytes), "--max-seconds", std::to_string(args_.duration_s + 600)};
  if (p->dial_out_only) {
    argv.push_back("--dial-out-only");
    ++s_.dial_out_only_started;
  } else {
    const std::uint16_t real_port = free_loopback_port();
    p->route = proxy_.add_route(real_port);
    argv.insert(argv.end(), {"--advertise-port", std::to_string(p->route), "--p2p-port", std::to_string(real_port)});
  }
  p->child = &children_.spawn("peer " + std::to_string(index), argv);
  p->last_line_t = now_s();
  peers_.push_back(std::move(p));
  return *peers_.back();
}

std::vector<Peer*> ChaosRun::live(bool joined_only) {
  std::vector<Peer*> out;
  for (auto& p : peers_)
    if (!p->ended && !p->killed && p->child->running() && (!joined_only || p->id != 0)) out.push_back(p.get());
  return out;
}

std::pair<std::size_t, std::size_t> ChaosRun::live_open_and_closed() {
  std::size_t open = 0, closed = 0;
  for (Peer* p : live(false)) ++(p->dial_out_only ? closed : open);
  return {open, closed};
}

bool ChaosRun::may_kill(const Peer& p) {
  const auto [open, closed] = live_open_and_closed();
  // With relays (--punch off), an open peer may go while another lives: it may be a relay,
  // and rebalance_open_peers() starts open ones until the rule holds again.
  if (extra_closed() > 0) return p.dial_out_only || open >= 2;
  return p.dial_out_only || open > closed;
}

std::size_t ChaosRun::extra_closed() const {
  // With --punch off, dial-out-only neighbours are relayed by an open peer: one more of them
  // than of open peers makes a relayed hop in every ring, and the relay may be killed.
  return args_.punch == "off" ? 1 : 0;
}

void ChaosRun::rebalance_open_peers() {
  for (auto counts = live_open_and_closed(); counts.second > counts.first + extra_closed();
       counts = live_open_and_closed()) {
    spawn_peer(/*open=*/true);
    ++s_.joins;
  }
}

void ChaosRun::pump(double seconds) {
  children_.pump_until([] { return false; },
                       Clock::now() + std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(seconds)));
  for (auto& p : peers_) {
    read_lines(*p);
    if (!p->ended && !p->child->running()) on_ended(*p);
  }
  if (!master_->running() && master_back_at_ == 0)
    throw std::runtime_error("ferry-master ended: " + master_->describe_exit());
}

void ChaosRun::read_lines(Peer& p) {
  const std::string& out = p.child->out();
  for (std::size_t nl; (nl = out.find('\n', p.consumed)) != std::string::npos; p.consumed = nl + 1) {
    const std::string_view text(out.data() + p.consumed, nl - p.consumed);
    p.last_line_t = now_s();
    p.last_line = std::string(text.substr(0, 200));
    auto line = parse_peer_line(text);
    if (!line) {
      checker_.violation(p.child->name() + " printed a malformed line: " + std::string(text));
      continue;
    }
    if (line->kind == "joined") {
      p.id = static_cast<std::uint64_t>(line->number("id"));
    } else if (line->kind == "relay") {
      // The peer relaying this one's next link in its current ring (0: direct).
      p.next_relay = static_cast<std::uint64_t>(line->number("relay"));
      if (p.next_relay != 0) ++s_.relayed_links_seen;
    } else if (line->kind == "op") {
      auto report = op_report(*line);
      if (!report) {
        checker_.violation(p.child->name() + " printed a malformed op line: " + std::string(text));
        continue;
      }
      on_op(p, std::move(*report));
    } else if (line->kind == "state") {
      auto report = sync_report(*line);
      if (!report) {
        checker_.violation(p.child->name() + " printed a malformed state line: " + std::string(text));
        continue;
      }
      on_sync(p, std::move(*report));
    }
  }
}

void ChaosRun::on_sync(Peer& p, SyncReport r) {
  r.peer = p.child->name();
  r.peer_id = p.id;
  if (r.result == FERRY_OK) {
    ++s_.syncs_ok;
    s_.sync_bytes_received += r.received;
  } else {
    ++s_.syncs_failed;
  }
  checker_.add_sync(r);
}

void ChaosRun::on_op(Peer& p, OpReport r) {
  r.peer = p.child->name();
  r.peer_id = p.id;
  if (auto breach = deadline_breach(r, args_.op_deadlines())) {
    // The checker records the violation; the peer's own log may say more.
    std::fprintf(stderr, "ferry-chaos: %s (id %llu) op step=%llu k=%u: %s; its stderr:\n%s\n", r.peer.c_str(),
                 static_cast<unsigned long long>(p.id), static_cast<unsigned long long>(r.step), r.k, breach->c_str(),
                 p.child->err_tail(20).c_str());
  }
  if (r.result == FERRY_OK) {
    ++s_.ops_ok;
    s_.max_step = std::max(s_.max_step, r.step);
    if (!quiescing_ && last_ok_t_ > 0) s_.longest_progress_gap_s = std::max(s_.longest_progress_gap_s, r.t1 - last_ok_t_);
    last_ok_t_ = std::max(last_ok_t_, r.t1);
    p.last_ok_t0 = r.t0;
    p.last_ok_epoch = r.epoch;
    p.last_ok_ring = r.ring;
  } else {
    ++s_.ops_failed;
    ++s_.failed_by_error[ferry_strerror(static_cast<ferry_result>(r.result))];
    // The first failure of a member of the op's ring after a fault on another member is its detection.
    for (Injection& inj : injections_) {
      if (inj.detected || inj.target_id == p.id || r.t1 < inj.t || r.t1 - inj.t > kDetectWindow) continue;
      if (std::find(r.ring.begin(), r.ring.end(), inj.target_id) == r.ring.end()) continue;
      inj.detected = true;
      inj.latency_s = r.t1 - inj.t;
    }
  }
  checker_.add(r);
}

void ChaosRun::on_ended(Peer& p) {
  p.ended = true;
  if (p.route) proxy_.remove_route(p.route);
  if (p.killed) return;
  if (p.child->exit_code() == std::optional<int>(kExitRemoved)) {
    ++s_.removed;
    return;
  }
  if (p.child->exit_code() == std::optional<int>(kExitStateLost)) {
    ++s_.state_lost;
    return;
  }
  checker_.violation(p.child->name() + " (id " + std::to_string(p.id) + ") ended by itself: " +
                     p.child->describe_exit() + "; stderr: " + p.child->err_tail(3));
}

void ChaosRun::kill_one() {
  auto candidates = live(true);
  std::erase_if(candidates, [](Peer* p) { return p->stopped; });
  // An open peer is spared when its death would leave a dial-out-only peer no open one to sit beside.
  std::erase_if(candidates, [this](Peer* p) { return !may_kill(*p); });
  if (live(false).size() <= 2 || candidates.empty()) return;
  Peer& victim = *candidates[rng_() % candidates.size()];
  victim.killed = true;
  injections_.push_back({"kill", victim.id, now_s()});
  ::kill(victim.child->pid(), SIGKILL);
  ++s_.kills;
  const auto live_peers = live(false);
  if (victim.id != 0 && std::any_of(live_peers.begin(), live_peers.end(),
                                    [&](const Peer* p) { return p->next_relay == victim.id; }))
    ++s_.relay_kills;
}

void ChaosRun::inject_fault() {
  auto candidates = live(true);
  std::erase_if(candidates, [](Peer* p) { return p->stopped; });
  if (candidates.empty() || args_.faults.empty()) return;
  const FaultKind kind = args_.faults[rng_() % args_.faults.size()];
  // The network faults live in the proxy in front of a peer's listener; a dial-out-only peer has none.
  if (kind != FaultKind::stop && kind != FaultKind::master)
    std::erase_if(candidates, [](Peer* p) { return p->route == 0; });
  if (candidates.empty()) return;
  Peer& target = *candidates[rng_() % candidates.size()];
  const double t = now_s();
  const auto until = Clock::now() + std::chrono::seconds(static_cast<int>(kFaultSpan));
  std::size_t hit = 1;  // reset and blackhole can only be detected when they cut a live connection
  switch (kind) {
    case FaultKind::reset: hit = proxy_.reset(target.route); break;
    case FaultKind::blackhole: hit = proxy_.blackhole(target.route); break;
    case FaultKind::slow: proxy_.shape(target.route, RouteShaping{{}, kSlowBytesPerSecond}, until); break;
    case FaultKind::latency:
      proxy_.shape(target.route, RouteShaping{std::chrono::milliseconds(20 + rng_() % 130), 0}, until);
      break;
    case FaultKind::corrupt: proxy_.corrupt_next(target.route); break;
    case FaultKind::master:
      // Every member sees it (retryable failures, then the same ring again): no one target to detect it.
      if (master_back_at_ > 0) return;
      ::kill(master_->pid(), SIGKILL);
      master_back_at_ = t + 0.2 + std::uniform_real_distribution<double>(0, 3.0)(rng_);
      hit = 0;
      break;
    case FaultKind::stop: {
      // Shorter or longer than the heartbeat deadline, then resumed or killed.
      if (live(false).size() <= 2) return;
      target.stopped = true;
      target.stop_until = t + 0.5 + std::uniform_real_distribution<double>(0, 2.0 * args_.heartbeat_ms / 1000.0)(rng_);
      target.kill_after_stop = rng_() % 2 == 0;
      ::kill(target.child->pid(), SIGSTOP);
      break;
    }
  }
  ++s_.faults[fault_name(kind)];
  // Shaping only slows a run down; the other faults must be detected.
  if (kind != FaultKind::slow && kind != FaultKind::latency && hit > 0) injections_.push_back({fault_name(kind), target.id, t});
}

void ChaosRun::resume_stopped(bool all) {
  const double t = now_s();
  for (auto& p : peers_) {
    if (!p->stopped || (!all && t < p->stop_until)) continue;
    p->stopped = false;
    if (p->kill_after_stop && may_kill(*p)) {
      p->killed = true;
      ::kill(p->child->pid(), SIGKILL);
    }
    ::kill(p->child->pid(), SIGCONT);
    p->last_line_t = t;  // its silence while stopped is ours
  }
}

void ChaosRun::sample_rss() {
  if (master_->running() && master_back_at_ == 0) master_rss_.push_back(rss_kib(master_->pid()));
  for (Peer* p : live(false))
    if (!p->stopped) p->rss.push_back(rss_kib(p->child->pid()));
}

void ChaosRun::check_silence(double now) {
  // A running peer says something at least once per op deadline (each call reports its outcome).
  const double limit = args_.op_deadlines().hang_s + args_.timeout_ms / 1000.0 + 10;
  for (Peer* p : live(false)) {
    if (p->stopped || p->silent_reported || now - p->last_line_t < limit) continue;
    p->silent_reported = true;
    checker_.violation(p->child->name() + " (id " + std::to_string(p->id) + ") said nothing for " +
                       std::to_string(static_cast<int>(now - p->last_line_t)) + " s: hung");
  }
}

bool ChaosRun::converged() {
  // Every live peer has succeeded since quiescence began, all in the same ring, which holds exactly them.
  auto peers = live(false);
  if (peers.empty()) return false;
  std::set<std::uint64_t> ids;
  for (Peer* p : peers) {
    if (p->id == 0 || p->last_ok_t0 < quiesce_start_) return false;
    ids.insert(p->id);
  }
  for (Peer* p : peers) {
    if (p->last_ok_epoch != peers[0]->last_ok_epoch) return false;
    if (std::set<std::uint64_t>(p->last_ok_ring.begin(), p->last_ok_ring.end()) != ids) return false;
  }
  return true;
}

// Memory: the last quarter of the samples may not exceed twice the first quarter's peak plus 64 MiB.
void check_growth(InvariantChecker& checker, const std::string& who, const std::vector<std::uint64_t>& rss) {
  if (rss.size() < 8) return;
  const std::size_t quarter = rss.size() / 4;
  const std::uint64_t early = *std::max_element(rss.begin() + 1, rss.begin() + 1 + quarter);
  const std::uint64_t late = *std::max_element(rss.end() - quarter, rss.end());
  if (late > 2 * early + 64 * 1024)
    checker.violation(who + ": RSS grew from " + std::to_string(early / 1024) + " MiB to " +
                      std::to_string(late / 1024) + " MiB");
}

void ChaosRun::check_memory() {
  check_growth(checker_, "ferry-master", master_rss_);
  for (auto& p : peers_) check_growth(checker_, p->child->name(), p->rss);
  if (!master_rss_.empty()) {
    s_.master_rss_start_kib = master_rss_.front();
    s_.master_rss_end_kib = master_rss_.back();
  }
}

void ChaosRun::stop_everything() {
  for (Peer* p : live(false)) {
    p->killed = true;
    ::kill(p->child->pid(), SIGTERM);
    ::kill(p->child->pid(), SIGCONT);
  }
  children_.pump_until([&] { return live(false).empty() || std::none_of(peers_.begin(), peers_.end(), [](auto& p) {
                                      return p->child->running();
                                    }); },
                       Clock::now() + std::chrono::seconds(5));
  for (auto& p : peers_) read_lines(*p);
  children_.stop(*master_, std::chrono::seconds(3));
  children_.kill_all();
}

void ChaosRun::write_logs() const {
  if (args_.log_dir.empty()) return;
  std::filesystem::create_directories(args_.log_dir);
  for (const auto& child : children_.children()) {
    std::string file = child->name();
    std::replace(file.begin(), file.end(), ' ', '-');
    const std::filesystem::path base = std::filesystem::path(args_.log_dir) / file;
    std::ofstream(base.string() + ".out") << child->out();
    std::ofstream(base.string() + ".err") << child->err_tail(SIZE_MAX);
  }
}

void ChaosRun::report_progress(double now) {
  if (now < next_progress_) return;
  // One line per look, however long the last pump took: a stalled harness must not print a burst.
  while (next_progress_ <= now) next_progress_ += args_.progress_every_s;
  ChaosProgress progress;
  progress.elapsed_s = now - started_;
  progress.duration_s = args_.duration_s;
  progress.quiescing_s = quiescing_ ? now - quiesce_start_ : -1;
  progress.live_peers = live(false).size();
  progress.master_restarts = masters_started_ - 1;
  progress.violations = checker_.violation_count();
  std::fputs(progress_line(progress, s_).c_str(), stderr);
  std::fflush(stderr);
}

ChaosSummary ChaosRun::run() {
  const double started = now_s();
  started_ = started;
  if (args_.progress_every_s > 0) next_progress_ = started + args_.progress_every_s;
  start_master();
  for (int i = 0; i < args_.peers; ++i) spawn_peer();
  const double end = started + args_.duration_s;
  double next_kill = args_.kill_every_s > 0 ? started + args_.kill_every_s : INFINITY;
  double next_join = args_.join_every_s > 0 ? started + args_.join_every_s : INFINITY;
  double next_fault = args_.fault_every_s > 0 && !args_.faults.empty() ? started + args_.fault_every_s : INFINITY;
  double next_rss = started + kRssEvery;
  try {
    while (now_s() < end) {
      pump(kTick);
      const double t = now_s();
      resume_stopped(false);
      if (master_back_at_ > 0 && t >= master_back_at_) start_master();
      if (t >= next_kill) {
        kill_one();
        next_kill += args_.kill_every_s;
      }
      if (t >= next_join) {
        // Not while the master is down: a newcomer's connect would find no one.
        if (master_back_at_ == 0 && static_cast<int>(live(false).size()) < args_.max_peers) {
          spawn_peer();
          ++s_.joins;
        }
        next_join += args_.join_every_s;
      }
      if (t >= next_fault) {
        inject_fault();
        next_fault += args_.fault_every_s;
      }
      if (t >= next_rss) {
        sample_rss();
        next_rss += kRssEvery;
        check_silence(t);
        checker_.settle(t - args_.op_deadlines().hang_s - 10);
      }
      report_progress(t);
    }
    // Quiescence: no more faults; everyone stopped resumes (or dies as planned).
    quiescing_ = true;
    if (master_back_at_ > 0) start_master();
    proxy_.heal_all();
    resume_stopped(true);
    rebalance_open_peers();
    quiesce_start_ = now_s();
    while (now_s() - quiesce_start_ < kConvergeLimit && !(s_.converged = converged())) {
      pump(kTick);
      if (now_s() >= next_rss) {
        sample_rss();
        next_rss += kRssEvery;
        check_silence(now_s());
      }
      report_progress(now_s());
    }
    s_.convergence_s = now_s() - quiesce_start_;
    if (!s_.converged) {
      std::string state;
      for (Peer* p : live(false))
        // What each still says, and its last warnings: CI keeps only this report, not the logs.
        state += " " + p->child->name() + "(id " + std::to_string(p->id) + ", epoch " +
                 std::to_string(p->last_ok_epoch) + ", ring size " + std::to_string(p->last_ok_ring.size()) +
                 "; last line: " + p->last_line + "; stderr: " + p->child->err_tail(4) + ")";
      checker_.violation("membership did not converge to the " + std::to_string(live(false).size()) +
                         " live peers within " + std::to_string(static_cast<int>(kConvergeLimit)) + " s:" + state +
                         "; master's stderr: " + master_->err_tail(4));
    }
    if (s_.ops_ok == 0) checker_.violation("no all-reduce ever succeeded");
    if (s_.longest_progress_gap_s > args_.op_deadlines().hang_s)
      checker_.violation("no all-reduce succeeded for " + std::to_string(static_cast<int>(s_.longest_progress_gap_s)) +
                         " s");
  } catch (const std::runtime_error& e) {
    checker_.violation(e.what());
  }
  check_memory();
  stop_everything();
  checker_.settle_all();
  write_logs();

  std::map<std::string, std::vector<double>> by_kind;
  for (const Injection& inj : injections_)
    if (inj.detected) by_kind[inj.kind].push_back(inj.latency_s);
  s_.detect_latency_s = percentiles(by_kind["kill"]);
  for (auto& [kind, samples] : by_kind) s_.detect_latency_by_fault[kind] = percentiles(samples);
  const ProxyStats ps = proxy_.stats();
  s_.proxy_connections = ps.connections;
  s_.proxy_bytes = ps.bytes;
  s_.proxy_corrupted = ps.corrupted;
  s_.unique_ops_checked = checker_.ops_checked();
  s_.references_checked = checker_.references_checked();
  s_.syncs_checked = checker_.syncs_checked();
  s_.violations = checker_.violations();
  s_.violation_count = checker_.violation_count();
  s_.wall_s = now_s() - started;
  return s_;
}

}  // namespace

Percentiles percentiles(std::vector<double> samples) {
  Percentiles p;
  p.samples = samples.size();
  if (samples.empty()) return p;
  std::sort(samples.begin(), samples.end());
  auto at = [&](double q) {
    const std::size_t i = static_cast<std::size_t>(std::ceil(q * static_cast<double>(samples.size()))) - 1;
    return samples[std::min(i, samples.size() - 1)];
  };
  p.p50 = at(0.50);
  p.p99 = at(0.99);
  p.max = samples.back();
  return p;
}

ChaosSummary run_chaos(const ChaosArgs& args) {
  ChaosRun run(args);
  return run.run();
}

}  // namespace ferry::chaos
