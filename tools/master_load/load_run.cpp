#include "load_run.h"

#include <algorithm>
#include <functional>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include <asio/executor_work_guard.hpp>
#include <asio/io_context.hpp>

#include "child_process.h"  // tools/common
#include "fake_peer.h"
#include "process_cpu.h"    // tools/common

namespace ferry::master_load {
namespace {

using tooling::Child;
using tooling::ChildSet;

constexpr auto kMasterStartup = std::chrono::seconds(15);
constexpr auto kMasterStopGrace = std::chrono::seconds(3);
constexpr std::size_t kTailLines = 20;
// Admission takes one vote when every joiner fits the first proposal; a few
// more cover joiners a vote left waiting (they are counted in admit_votes).
constexpr uint32_t kMaxAdmitVotes = 4;
constexpr auto kJoinersSettle = std::chrono::milliseconds(2000);

double seconds(Clock::duration d) { return std::chrono::duration<double>(d).count(); }

// The master, its port, and the phase waits (which also drain its output pipes).
class MasterProcess {
 public:
  MasterProcess(const LoadOptions& options) : children_(false), timeout_(options.timeout_s) {
    // Every fake peer dials from 127.0.0.1: lift the per-address cap on joiners waiting. They
    // listen nowhere (their advertised port is 9), so the master must not check that they do.
    std::vector<std::string> argv = {options.master_bin, "--listen", "127.0.0.1:0", "--log-level",
                                     options.master_log_level, "--max-pending-per-source", "65536",
                                     "--reachability-check-ms", "0"};
    master_ = &children_.spawn("ferry-master", argv);
    children_.pump_until([&] { return !master_->running() || master_->out().find('\n') != std::string::npos; },
                         Clock::now() + kMasterStartup);
    const std::string line = master_->out().substr(0, master_->out().find('\n'));
    const std::size_t colon = line.rfind(':');
    if (line.rfind("ferry-master listening on ", 0) != 0 || colon == std::string::npos)
      throw LoadFailed("ferry-master (" + options.master_bin + ") did not start: " + master_->describe_exit() +
                       "; its stderr:\n" + master_->err_tail(kTailLines));
    port_ = static_cast<uint16_t>(std::stoul(line.substr(colon + 1)));
  }
  ~MasterProcess() {
    if (master_->running()) children_.stop(*master_, kMasterStopGrace);
  }

  uint16_t port() const { return port_; }
  std::string log_tail() const { return master_->err_tail(kTailLines); }
  double cpu_s() const { return tooling::process_cpu_s(master_->pid()); }

  // Waits until done() holds; throws naming `phase` on a dead master or a failed peer, and on a
  // timeout (the run's per-phase one) unless `within` is given: then it answers false.
  bool wait(const std::string& phase, const LoadTally& tally, const std::function<bool()>& done,
            std::optional<std::chrono::milliseconds> within = std::nullopt) {
    const auto deadline =
        Clock::now() + (within ? std::chrono::duration_cast<Clock::duration>(*within)
                               : std::chrono::duration_cast<Clock::duration>(std::chrono::duration<double>(timeout_)));
    auto broken = [&] { return !master_->running() || tally.count(Event::failed) > 0; };
    const bool finished = children_.pump_until([&] { return broken() || done(); }, deadline);
    if (finished && !broken()) return true;
    if (!finished && within && !broken()) return false;
    std::string why = !finished ? "did not finish within " + std::to_string(static_cast<int>(timeout_)) + " s"
                      : !master_->running() ? "the master ended: " + master_->describe_exit()
                                            : "a fake peer failed: " + tally.first_failure();
    throw LoadFailed(phase + ": " + why + "; the master's stderr ends:\n" + master_->err_tail(kTailLines));
  }

 private:
  ChildSet children_;
  Child* master_ = nullptr;
  uint16_t port_ = 0;
  double timeout_;
};

// The fake peers and the threads their sessions run on.
class FakeFleet {
 public:
  FakeFleet(const LoadOptions& options, uint16_t master_port, LoadTally& tally) : work_(io_.get_executor()) {
    for (uint32_t i = 0; i < options.threads; ++i) threads_.emplace_back([this] { io_.run(); });
    const net::Endpoint master{"127.0.0.1", master_port};
    for (uint32_t i = 0; i < options.peers; ++i)
      peers_.push_back(std::make_unique<FakePeer>(io_.get_executor(), master, i % options.groups, i, tally));
  }
  // The sessions' events run on the io threads and call into their peers: those threads end before any peer goes.
  ~FakeFleet() {
    for (auto& peer : peers_) peer->leave();
    work_.reset();
    io_.stop();
    for (auto& thread : threads_) thread.join();
    peers_.clear();
  }

  std::vector<std::unique_ptr<FakePeer>>& peers() { return peers_; }
  uint32_t accepted() const {
    return static_cast<uint32_t>(std::count_if(peers_.begin(), peers_.end(), [](const auto& p) { return p->accepted(); }));
  }
  // Every group has a ring (its first member, admitted alone).
  bool every_group_formed(uint32_t groups) const {
    std::vector<bool> formed(groups, false);
    for (const auto& peer : peers_)
      if (peer->accepted()) formed[peer->group()] = true;
    return std::all_of(formed.begin(), formed.end(), [](bool f) { return f; });
  }

 private:
  asio::io_context io_;
  asio::executor_work_guard<asio::io_context::executor_type> work_;
  std::vector<std::thread> threads_;
  std::vector<std::unique_ptr<FakePeer>> peers_;
};

void admit(const LoadOptions& options, MasterProcess& master, FakeFleet& fleet, LoadTally& tally, LoadResult& result) {
  const double cpu0 = master.cpu_s();
  const Clock::time_point start = Clock::now();
  for (auto& peer : fleet.peers()) peer->join();
  master.wait("admission (welcomes)", tally, [&] { return tally.count(Event::welcomed) == options.peers; });
  master.wait("admission (first member of every group)", tally, [&] { return fleet.every_group_formed(options.groups); });
  while (fleet.accepted() < options.peers) {
    if (result.admit_votes++ == kMaxAdmitVotes)
      throw LoadFailed("admission: " + std::to_string(options.peers - fleet.accepted()) + " peers still waiting after " +
                       std::to_string(kMaxAdmitVotes) + " votes");
    // Only the accepted vote; a group commits once all of its ring voted, and sends topology_done to all.
    const uint64_t done_before = tally.count(Event::topology_done);
    const uint32_t voters = fleet.accepted();
    for (auto& peer : fleet.peers())
      if (peer->accepted()) peer->vote();
    master.wait("admission (vote)", tally, [&] { return tally.count(Event::topology_done) >= done_before + voters; });
    // The joiners' topology_done left in the same batch as the voters': a joiner not accepted by then was left waiting.
    master.wait("admission (vote)", tally, [&] { return fleet.accepted() == options.peers; }, kJoinersSettle);
  }
  result.welcomed = static_cast<uint32_t>(tally.count(Event::welcomed));
  result.admitted = fleet.accepted();
  result.admit_s = seconds(tally.last(Event::topology_done) - start);
  result.admit_master_cpu_s = master.cpu_s() - cpu0;
}

void vote(const LoadOptions& options, MasterProcess& master, FakeFleet& fleet, LoadTally& tally, LoadResult& result) {
  const double cpu0 = master.cpu_s();
  double wall = 0;
  for (uint32_t v = 0; v < options.votes; ++v) {
    const uint64_t before = tally.count(Event::topology_done);
    const Clock::time_point start = Clock::now();
    for (auto& peer : fleet.peers()) peer->vote();
    master.wait("topology vote", tally, [&] { return tally.count(Event::topology_done) == before + options.peers; });
    wall += seconds(tally.last(Event::topology_done) - start);
  }
  if (options.votes == 0) return;
  result.vote_s = wall / options.votes;
  result.vote_master_cpu_s = (master.cpu_s() - cpu0) / options.votes;
}

void collectives(const LoadOptions& options, MasterProcess& master, FakeFleet& fleet, LoadTally& tally,
                 LoadResult& result) {
  result.expected_commits = static_cast<uint64_t>(options.peers) * options.rounds;
  if (options.rounds == 0) return;
  const double cpu0 = master.cpu_s();
  const Clock::time_point start = Clock::now();
  for (auto& peer : fleet.peers()) peer->run_collectives(options.rounds);
  master.wait("collective rounds", tally, [&] {
    return tally.count(Event::committed) + tally.count(Event::aborted) == result.expected_commits;
  });
  result.round_s = seconds(tally.last(Event::committed) - start) / options.rounds;
  result.round_master_cpu_s = (master.cpu_s() - cpu0) / options.rounds;
  result.committed = tally.count(Event::committed);
  result.aborted = tally.count(Event::aborted);
  if (result.aborted > 0) result.abort_log = master.log_tail();
}

}  // namespace

LoadResult run_master_load(const LoadOptions& options) {
  if (options.peers == 0 || options.groups == 0 || options.groups > options.peers)
    throw LoadFailed("need at least one peer per group");
  MasterProcess master(options);
  LoadTally tally;
  LoadResult result;
  {
    FakeFleet fleet(options, master.port(), tally);
    admit(options, master, fleet, tally, result);
    vote(options, master, fleet, tally, result);
    collectives(options, master, fleet, tally, result);
  }
  return result;
}

}  // namespace ferry::master_load
