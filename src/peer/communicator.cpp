#include "peer/communicator.h"

#include <algorithm>
#include <cfenv>
#include <cstring>

#include <asio/dispatch.hpp>
#include <asio/post.hpp>

#include "core/log.h"
#include "net/fd_limit.h"
#include "net/frame_io.h"
#include "net/host_addresses.h"
#include "net/resolve.h"
#include "peer/escaped_exception.h"
#include "peer/p2p_inbound.h"

namespace ferry::peer {
namespace {

constexpr std::chrono::milliseconds kWatchdogPeriod{100};
// How long destroy waits for collectives in flight and the master's goodbye, then for queued closes.
constexpr std::chrono::milliseconds kLeaveGrace{2'000};
constexpr std::chrono::milliseconds kCloseGrace{500};
// Links change over seconds, collectives may come every millisecond: one report a second at most.
constexpr std::chrono::milliseconds kLinkReportInterval{1'000};
// Committed collectives remembered for a resume record (its last kMaxResumeRanges ranges are sent).
constexpr size_t kRecentCommits = 4'096;

CommConfig with_transport(CommConfig config) {
  if (!config.transport) config.transport = net::make_tcp_transport();
  return config;
}

// Room for four chunks in flight per lane, so a reader borrowing one never
// stalls the writer; capped because every lane of every link has its own.
LinkOptions link_options(const CommConfig& config, std::weak_ptr<OpRegistry> ops) {
  size_t ring = std::clamp<size_t>(4 * (config.max_chunk_bytes + 64), size_t{1} << 20, size_t{16} << 20);
  // A pinned count (the user's p2p_connections) never grows: the cap is then the ring's own.
  uint32_t max_lanes = config.connections == 0 ? wire::kMaxConnectionsPerLink : 0;
  bool bbr = max_lanes > 0 && config.p2p_tuning.congestion_control.empty() &&
             net::check_congestion_control("bbr").ok();
  return {config.transport, config.p2p_tuning, config.secret, {config.shared_memory, ring},
          config.timeout,   std::move(ops),     max_lanes,  bbr};
}

std::string ms(std::chrono::milliseconds d) { return std::to_string(d.count()) + " ms"; }

Status status_from_wire(uint32_t code, const std::string& reason) {
  Errc errc = code <= static_cast<uint32_t>(kErrcMax) ? static_cast<Errc>(code) : Errc::internal;
  return code == 0 ? Status::success() : Status::failure(errc, reason);
}

}  // namespace

Communicator::Communicator(CommConfig config)
    : config_(with_transport(std::move(config))),
      work_(asio::make_work_guard(io_)),
      ops_(std::make_shared<OpRegistry>([this](const wire::CollectiveEnd& end) {
        // A dead communicator (destroyed, aborted, failed) reports no failure of its own: the
        // other members must see it lost (its leave or closed connection), not its local
        // reason ("invalid usage: aborted"), whichever reaches the master first.
        if (end.code != 0 && dead_) return;
        session_.send(end);
      })),
      link_options_(link_options(config_, ops_)),
      session_(io_.get_executor(),
               {config_.master, config_.timeout, config_.heartbeat_timeout, config_.transport, config_.secret}, *this),
      membership_(io_.get_executor(), link_options_,
                  [this](const wire::TopologyReady& ready) { session_.send(ready); }),
      prober_(io_.get_executor(), link_options_, [this](wire::ProbeDone done) { session_.send(done); }),
      watchdog_strand_(asio::make_strand(io_.get_executor())),
      watchdog_(watchdog_strand_) {
  listener_ = net::Listener::bind(io_.get_executor(), config_.listen_host, config_.port_min, config_.port_max);
  // Raised before anything opens descriptors; the caps on strangers are sized from it.
  auto strangers = net::StrangerGate::create("p2p", net::StrangerLimits::within(net::raise_fd_limit().soft));
  listener_->start(strangers, [this](asio::ip::tcp::socket socket, std::shared_ptr<net::StrangerGate::Pass> pass) {
    accept_p2p(std::move(socket), std::move(pass), link_options_,
               {[this](const wire::LinkHello& hello, const std::string& proof, const std::shared_ptr<net::Stream>& s) {
                  membership_.offer_link(hello, proof, s);
                },
                [this](const wire::FetchHello& hello, const std::string& proof, const std::shared_ptr<net::Stream>& s) {
                  on_fetch_hello(hello, proof, s);
                },
                [this](const wire::ProbeHello& hello, const std::string& proof, const std::shared_ptr<net::Stream>& s) {
                  prober_.accept(hello, proof, s);
                }});
  });
  asio::dispatch(watchdog_strand_, [this] { arm_watchdog(); });
  try {
    for (uint32_t i = 0; i < config_.io_threads; ++i) threads_.emplace_back([this] { serve_io(); });
  } catch (const std::system_error& e) {
    // No destructor runs for a constructor that throws: the threads made so far end here.
    io_.stop();
    for (auto& t : threads_) t.join();
    throw Error(Errc::system, std::string("cannot start the communicator's io threads: ") + e.what());
  }
}

void Communicator::serve_io() {
  // Reductions run here: a fixed IEEE environment (no flush-to-zero inherited
  // from whichever thread created us) makes results reproducible.
  std::fesetenv(FE_DFL_ENV);
  // A handler that throws fails the communicator, so every caller hears why;
  // the thread itself serves on (Asio allows run() again after a throw), or
  // the leave, the closes and the destroy that follow would have no thread.
  for (;;) {
    try {
      io_.run();
      return;
    } catch (...) {
      die(status_of_current_exception("a communicator io thread failed"));  // logs the first
    }
  }
}

Communicator::~Communicator() {
  bool was_alive = false;
  {
    std::lock_guard lock(mu_);
    was_alive = state_ != State::dead;
  }
  die(Status::failure(Errc::invalid_usage, "the communicator was destroyed"));
  std::thread redial;
  {
    std::lock_guard lock(mu_);
    redial = std::move(reconnector_);
  }
  if (redial.joinable()) redial.join();  // its dial ends within a second or two
  prober_.stop();  // a round in flight ends within ~20 ms
  // Say goodbye, so the master drops us at once instead of after a silence.
  if (was_alive) session_.leave();
  auto grace = Clock::now() + kLeaveGrace;
  ops_->wait_empty(grace);
  session_.wait_closed(grace);
  listener_->stop();
  asio::post(watchdog_strand_, [this] { watchdog_.cancel(); });
  work_.reset();
  // Give posted closes a moment, then stop regardless: destroy is bounded.
  auto deadline = Clock::now() + kCloseGrace;
  while (!io_.stopped() && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  io_.stop();
  for (auto& t : threads_) t.join();
}

void Communicator::abort() {
  bool was_alive = false;
  {
    std::lock_guard lock(mu_);
    was_alive = state_ != State::dead;
  }
  die(Status::failure(Errc::invalid_usage, "the communicator was aborted by ferry_comm_abort"));
  // The goodbye the destructor would send (it sends none for a dead peer): the master drops
  // this peer at once, so the others' collectives fail with peer_lost now, not at a deadline.
  if (was_alive) session_.leave();
}

// --- the caller's API ------------------------------------------------------------------

template <class Pred>
void Communicator::wait_for(std::unique_lock<std::mutex>& lock, Pred pred, const std::string& what,
                            std::optional<std::chrono::milliseconds> limit) {
  const auto within = limit.value_or(config_.timeout);
  bool ok = cv_.wait_for(lock, within, [&] { return pred() || state_ == State::dead; });
  if (state_ == State::dead) throw Error(dead_reason_.code, dead_reason_.message);
  if (!ok) throw Error(Errc::timeout, what + " did not complete within " + ms(within));
}

std::optional<Status> Communicator::master_away(const char* call) const {
  if (state_ != State::reconnecting) return std::nullopt;
  return Status::failure(Errc::peer_lost, std::string(call) + ": the master is being reconnected (" +
                                              lost_master_.message +
                                              "); call ferry_update_topology, which waits for it, then again");
}

void Communicator::require_accepted(const char* call) const {
  if (state_ == State::dead) throw Error(dead_reason_.code, dead_reason_.message);
  if (auto away = master_away(call)) throw Error(away->code, away->message);
  if (state_ != State::accepted)
    throw Error(Errc::invalid_usage, std::string(call) + ": this peer is not admitted yet; call ferry_connect first");
}

OpDeadlines Communicator::op_deadlines() const {
  return {config_.timeout, config_.progress_timeout, config_.timeout};
}

std::string Communicator::advertised_host() {
  if (!config_.advertised_host.empty()) return config_.advertised_host;
  const auto& bound = listener_->address();
  if (!bound.is_unspecified()) return bound.to_string();  // the one address it takes
  // Else the master says where it saw us from: over IPv6, an address a v4-only listener cannot take.
  if (listener_->takes_v6()) return {};
  auto master = net::resolve_one_address(io_.get_executor(), config_.master.host);
  if (master.is_v6() && !master.to_v6().is_v4_mapped())
    throw Error(Errc::invalid_argument,
                "the p2p listener (" + bound.to_string() + ") takes IPv4 only, but the master (" +
                    config_.master.to_string() +
                    ") is reached over IPv6, so neighbours would be told an IPv6 address; listen on \"::\" (the "
                    "default: both families) or set advertised_host");
  return {};
}

void Communicator::connect() {
  std::lock_guard vote(vote_mu_);
  // Before mu_: it may resolve the master's name.
  std::string advertised = advertised_host();
  std::unique_lock lock(mu_);
  if (state_ == State::dead) throw Error(dead_reason_.code, dead_reason_.message);
  if (state_ == State::accepted) throw Error(Errc::invalid_usage, "already connected");
  if (state_ == State::idle) {
    state_ = State::connecting;
    advertised_ = std::move(advertised);
    try {
      dial_master(lock);
    } catch (const Error&) {
      if (state_ == State::connecting) state_ = State::idle;
      throw;
    }
  }
  wait_for(lock, [&] { return state_ == State::accepted; },
           "admission by the master (this peer stays pending; call ferry_connect again to keep waiting)");
}

// A launcher (torchrun, Slurm, a shell loop) may start the peers a moment
// before their master: a dial nobody answers is tried again with back-off
// until master_connect_timeout. One the master answered and refused is final.
void Communicator::dial_master(std::unique_lock<std::mutex>& lock) {
  const auto deadline = Clock::now() + config_.master_connect_timeout;
  auto backoff = std::chrono::milliseconds(50);
  for (bool said = false;;) {
    wire::Hello hello = hello_message();
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    const bool once = config_.master_connect_timeout.count() == 0;
    lock.unlock();
    try {
      session_.open(std::move(hello), once ? config_.timeout : std::clamp(left, std::chrono::milliseconds(1), config_.timeout));
      lock.lock();
      return;
    } catch (const MasterSession::Unanswered& e) {
      lock.lock();
      if (state_ == State::dead) throw Error(dead_reason_.code, dead_reason_.message);
      if (Clock::now() + backoff >= deadline) {
        if (once) throw;
        throw Error(e.code(), std::string(e.what()) + "; no master answered within " +
                                  ms(config_.master_connect_timeout) + " (master_connect_timeout_ms)");
      }
      if (!std::exchange(said, true))
        log().info("{}; dialing it again for up to {}", e.what(), ms(config_.master_connect_timeout));
      cv_.wait_for(lock, backoff, [&] { return state_ == State::dead; });
      backoff = std::min(2 * backoff, std::chrono::milliseconds(1'000));
    } catch (const Error&) {
      lock.lock();
      throw;
    }
  }
}

wire::Hello Communicator::hello_message() const {
  wire::Hello hello;
  hello.peer_group = config_.peer_group;
  // A listener on "::" or 0.0.0.0 with no address chosen for it is offered at every
  // interface address too: the master passes on those of the family it did not see.
  if (advertised_.empty() && listener_->address().is_unspecified())
    hello.other_hosts = net::interface_addresses(listener_->takes_v4(), listener_->takes_v6());
  if (hello.other_hosts.size() > wire::kMaxOtherHosts) hello.other_hosts.resize(wire::kMaxOtherHosts);
  hello.advertised_host = advertised_;
  hello.advertised_port = config_.advertised_port ? config_.advertised_port : listener_->port();
  hello.p2p_connections = config_.connections ? config_.connections : kStartLanes;
  hello.heartbeat_timeout_ms = static_cast<uint32_t>(config_.heartbeat_timeout.count());
  hello.silent_link_ms = static_cast<uint32_t>(LinkSetup::silent_link_deadline(link_options_).count());
  hello.nonce = random_nonce();
  if (state_ != State::reconnecting) return hello;
  auto view = membership_.view();
  hello.resume_peer_id = peer_id_;
  hello.resume_epoch = view.epoch;
  for (const auto& m : view.ring) hello.resume_ring.push_back(m.peer_id);
  hello.resume_revision = revision_ ? *revision_ + 1 : 0;
  if (commits_epoch_ == view.epoch) {
    // The latest ranges: a collective another member awaits is among the last this one saw committed.
    auto committed = wire::seq_ranges(std::vector<uint32_t>(recent_commits_.begin(), recent_commits_.end()));
    const size_t keep = std::min(committed.size(), wire::kMaxResumeRanges);
    hello.resume_committed.assign(committed.end() - static_cast<std::ptrdiff_t>(keep), committed.end());
  }
  hello.resume_awaiting = awaited_ranges(view.epoch);
  return hello;
}

std::vector<wire::SeqRange> Communicator::awaited_ranges(uint64_t epoch) const {
  std::vector<uint32_t> seqs;
  for (const auto& op : ops_->in_flight())
    if (op->epoch() == epoch && op->awaiting_verdict()) seqs.push_back(op->seq());
  std::sort(seqs.begin(), seqs.end());
  return wire::seq_ranges(seqs);
}

std::optional<std::string> Communicator::resume_too_large() const {
  auto view = membership_.view();
  if (view.ring.size() > wire::kMaxResumeRing)
    return "its ring of " + std::to_string(view.ring.size()) + " members is more than a resume record holds (" +
           std::to_string(wire::kMaxResumeRing) + ")";
  if (size_t n = awaited_ranges(view.epoch).size(); n > wire::kMaxResumeRanges)
    return "the collectives awaiting a verdict here form " + std::to_string(n) +
           " runs of numbers, more than a resume record holds (" + std::to_string(wire::kMaxResumeRanges) + ")";
  return std::nullopt;
}

void Communicator::wait_for_master(std::unique_lock<std::mutex>& lock) {
  cv_.wait_until(lock, reconnect_deadline_, [&] { return state_ != State::reconnecting; });
  if (state_ == State::dead) throw Error(dead_reason_.code, dead_reason_.message);
}

bool Communicator::cast_vote(std::unique_lock<std::mutex>& lock, wire::TopologyVote ballot,
                             std::chrono::milliseconds limit, const char* call) {
  wait_for_master(lock);
  require_accepted(call);
  if (size_t in_flight = ops_->size())
    throw Error(Errc::invalid_usage,
                std::string(call) + " with " + std::to_string(in_flight) + " collectives in flight; wait for them first");
  uint64_t before = topology_done_count_, losses = master_losses_, refusals = refusals_;
  auto links = membership_.view().links;
  ballot.links_broken = links && !links->failure().ok();
  session_.send(ballot);
  wait_for(lock, [&] { return topology_done_count_ > before || master_losses_ != losses || refusals_ != refusals; },
           call, limit);
  if (refusals_ != refusals) throw Error(last_refusal_.code, last_refusal_.message);
  return topology_done_count_ > before;
}

void Communicator::update_topology(bool optimize) {
  std::lock_guard vote(vote_mu_);
  std::unique_lock lock(mu_);
  wire::TopologyVote ballot;
  ballot.optimize = optimize ? 1 : 0;
  while (!cast_vote(lock, ballot, config_.timeout, "update_topology")) {
  }
}

void Communicator::wait_for_world(uint32_t min_peers, std::optional<std::chrono::milliseconds> limit) {
  std::lock_guard vote(vote_mu_);
  std::unique_lock lock(mu_);
  const auto timeout = limit.value_or(config_.timeout);
  const auto deadline = Clock::now() + timeout;
  for (;;) {
    wait_for_master(lock);
    require_accepted("wait_for_world");
    const size_t world = membership_.view().ring.size();
    if (world >= min_peers) return;
    if (Clock::now() >= deadline)
      throw Error(Errc::timeout, "wait_for_world: the group has " + std::to_string(world) + " of " +
                                     std::to_string(min_peers) + " peers after " + ms(timeout));
    // Rounded up, plus 1 ms: the master counts the hold on its millisecond clock from the
    // vote's arrival, and a hold ending a hair before our deadline meant a second vote.
    const auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline - Clock::now()) +
                      std::chrono::milliseconds(1);
    wire::TopologyVote ballot;
    ballot.min_world = min_peers;
    ballot.hold_ms = static_cast<uint32_t>(std::min<int64_t>(left.count(), UINT32_MAX));
    // The master decides by the hold's end (its tick looks twice a second), then admits within timeout_ms.
    cast_vote(lock, ballot, left + std::chrono::milliseconds(1'000) + config_.timeout, "wait_for_world");
  }
}

uint32_t Communicator::peers_pending() {
  std::lock_guard vote(vote_mu_);
  std::unique_lock lock(mu_);
  for (;;) {
    wait_for_master(lock);
    require_accepted("peers_pending");
    uint64_t before = pending_answers_, losses = master_losses_, refusals = refusals_;
    session_.send(wire::PendingQuery{});
    wait_for(lock, [&] { return pending_answers_ > before || master_losses_ != losses || refusals_ != refusals; },
             "peers_pending");
    if (refusals_ != refusals) throw Error(last_refusal_.code, last_refusal_.message);
    if (pending_answers_ > before) return last_pending_;
  }
}

Attributes Communicator::attributes() const {
  std::lock_guard lock(mu_);
  if (state_ != State::accepted && state_ != State::reconnecting && state_ != State::dead)
    throw Error(Errc::invalid_usage, "attributes are known once the peer is admitted (ferry_connect)");
  auto view = membership_.view();
  Attributes a;
  a.global_world = view.world.global_world;
  a.group_world = static_cast<int64_t>(view.ring.size());
  a.num_groups = view.world.num_groups;
  a.largest_group = view.world.largest_group;
  a.rank = view.rank;
  a.peer_group = config_.peer_group;
  a.peer_id = static_cast<int64_t>(peer_id_);
  a.epoch = static_cast<int64_t>(view.epoch);
  a.shared_memory_lanes = view.links ? view.links->shared_memory_lanes() : 0;
  for (const auto& m : view.ring) a.ring.push_back(m.peer_id);
  return a;
}

size_t Communicator::ops_in_flight() const { return ops_->size(); }

std::shared_ptr<AllreduceOp> Communicator::allreduce_async(const void* send, void* recv, size_t count,
                                                           const AllreduceSpec& spec) {
  std::shared_ptr<AllreduceOp> op;
  std::optional<Status> no_master;
  {
    std::lock_guard lock(mu_);
    no_master = master_away("allreduce");
    if (!no_master) require_accepted("allreduce");
    auto view = membership_.view();
    if (spec.kind == wire::CollectiveKind::broadcast) {
      if (spec.root >= view.ring.size())
        throw Error(Errc::invalid_argument, "broadcast: root " + std::to_string(spec.root) +
                                                " is not a rank of this group of " + std::to_string(view.ring.size()));
      // The others' zeros sum with the root's bytes to the root's bytes, exactly (integers wrap, never round).
      if (view.rank != spec.root && count > 0) std::memset(recv, 0, count);
    }
    // The integer-domain quantizations agree scales per chunk: each block must lie in one.
    RingPlan plan(count, dtype_size(spec.dtype), static_cast<uint32_t>(view.ring.size()), view.rank, view.lanes,
                  config_.max_chunk_bytes, quant_is_int_domain(spec.quant.kind) ? spec.quant.block : 1);
    op = ops_->issue<AllreduceOp>(
        [&](uint64_t epoch, uint32_t seq) {
          AllreduceSpec op_spec = spec;
          op_spec.contributor = peer_id_;  // distinct in the group: independent rounding streams
          return std::make_shared<AllreduceOp>(*ops_, epoch, seq, view.links, plan, send, recv, count, op_spec,
                                               op_deadlines());
        },
        view.links.get());
  }
  if (no_master) {
    op->fail_local(*no_master, /*final=*/true);
    return op;
  }
  session_.send(wire::CollectiveBegin{op->epoch(),
                                      op->seq(),
                                      static_cast<uint8_t>(spec.kind),
                                      spec.tag,
                                      count,
                                      static_cast<uint8_t>(spec.dtype),
                                      static_cast<uint8_t>(spec.op),
                                      static_cast<uint8_t>(spec.quant.kind),
                                      spec.quant.kind == Quant::none ? 0 : spec.quant.block,
                                      spec.root});
  return op;
}

std::shared_ptr<SharedStateSync> Communicator::sync_shared_state(SyncSpec spec) {
  {
    std::lock_guard lock(mu_);
    if (!master_away("sync_shared_state")) require_accepted("sync_shared_state");
  }
  if (spec.connections == 0) spec.connections = config_.connections ? config_.connections : kStartLanes;
  // Hashing happens first, with no lock held: it may take a while for large states.
  HashedState state = HashedState::of(std::move(spec));
  std::shared_ptr<SharedStateSync> op;
  std::optional<Status> no_master;
  {
    std::lock_guard lock(mu_);
    no_master = master_away("sync_shared_state");
    if (!no_master) require_accepted("sync_shared_state");
    op = ops_->issue<SharedStateSync>(
        [&](uint64_t epoch, uint32_t seq) {
          return std::make_shared<SharedStateSync>(
              *ops_, epoch, seq, peer_id_, std::move(state), op_deadlines(),
              [this](const wire::PeerAddress& holder, const wire::FetchHello& hello, std::shared_ptr<net::Stream>& out) {
                return dial_holder(io_.get_executor(), link_options_, holder, hello, out);
              });
        },
        nullptr);
  }
  if (no_master) {
    op->fail_local(*no_master, /*final=*/true);
    return op;
  }
  session_.send(op->begin_message());
  return op;
}

// --- what the master says --------------------------------------------------------------------

void Communicator::on_welcome(uint64_t peer_id) {
  {
    std::unique_lock lock(mu_);
    if (state_ == State::reconnecting) {
      if (peer_id != peer_id_) {
        lock.unlock();
        return die(Status::failure(Errc::protocol, "the master took this peer back under another id"));
      }
      state_ = State::accepted;
      cv_.notify_all();
      log().info("the master is back: resumed as peer {}", peer_id);
      return;
    }
  }
  membership_.set_self(peer_id);
  std::lock_guard lock(mu_);
  peer_id_ = peer_id;
  if (state_ == State::connecting) state_ = State::pending;
}

void Communicator::on_topology(const wire::Topology& topology) {
  if (Status st = membership_.propose(topology); !st.ok()) die(st);
}

void Communicator::on_topology_done(const wire::TopologyDone& done) {
  std::lock_guard lock(mu_);
  if (state_ == State::dead) return;
  switch (membership_.commit(done)) {
    case RingMembership::Commit::installed:
      state_ = State::accepted;
      [[fallthrough]];
    case RingMembership::Commit::renewed:
      ops_->restart(done.epoch);  // a new ring, or the same one renewed: the collective numbering restarts
      break;
    case RingMembership::Commit::repeated:
      break;
    case RingMembership::Commit::stale:
      return;
  }
  ++topology_done_count_;
  cv_.notify_all();
}

void Communicator::on_probe_round(const wire::ProbeRound& round) {
  uint64_t self;
  {
    std::lock_guard lock(mu_);
    if (state_ == State::dead) return;
    self = peer_id_;
  }
  prober_.start_round(round, self);
}

void Communicator::on_pending_count(uint32_t pending) {
  std::lock_guard lock(mu_);
  last_pending_ = pending;
  ++pending_answers_;
  cv_.notify_all();
}

void Communicator::on_call_refused(const wire::CallRefused& refused) {
  std::lock_guard lock(mu_);
  // Only a mismatch is a refusal a peer can act on; any other code is the master's bug.
  const bool known = refused.code == static_cast<uint32_t>(Errc::mismatch);
  last_refusal_ = Status::failure(known ? Errc::mismatch : Errc::protocol, refused.reason);
  ++refusals_;
  cv_.notify_all();
}

void Communicator::on_collective_go(const wire::CollectiveGo& go) {
  if (auto op = ops_->find(go.epoch, go.seq)) op->go();
}

void Communicator::on_sync_plan(const wire::SyncPlan& plan) {
  if (auto op = ops_->find(plan.epoch, plan.seq)) op->plan(plan);
}

void Communicator::on_collective_result(const wire::CollectiveResult& result) {
  auto op = ops_->find(result.epoch, result.seq);
  if (op && result.code == 0) {
    // Remembered for a master started again (hello.resume_*), before the caller hears of it.
    auto sync = std::dynamic_pointer_cast<SharedStateSync>(op);
    auto revision = sync ? sync->planned_revision() : std::nullopt;
    std::lock_guard lock(mu_);
    if (revision) revision_ = revision;
    if (result.epoch != commits_epoch_) {
      commits_epoch_ = result.epoch;
      recent_commits_.clear();
    }
    recent_commits_.insert(result.seq);
    if (recent_commits_.size() > kRecentCommits) recent_commits_.erase(recent_commits_.begin());
  }
  if (op) op->verdict(status_from_wire(result.code, result.reason));
  if (result.code == 0) report_links(false);
}

void Communicator::on_collective_pending(const wire::CollectivePending& pending) {
  if (auto op = ops_->find(pending.epoch, pending.seq)) op->still_pending();
}

void Communicator::on_link_matrix(wire::LinkMatrix& matrix) {
  std::lock_guard lock(mu_);
  // Answers come in request order: a later one is at least as fresh as any waiter asked for.
  link_answered_ = std::max(link_answered_, matrix.request);
  link_matrix_ = std::move(matrix.links);
  cv_.notify_all();
}

// --- link measurements ---------------------------------------------------------------------

void Communicator::report_links(bool now) {
  auto view = membership_.view();
  if (!view.links || view.ring.size() < 2) return;
  // Held through the send: a query that follows a report on another thread then follows it on the wire too.
  std::lock_guard lock(report_mu_);
  auto at = Clock::now();
  if (!now && at - last_link_report_ < kLinkReportInterval) return;
  last_link_report_ = at;
  uint64_t self = view.ring[view.rank].peer_id, next = view.ring[(view.rank + 1) % view.ring.size()].peer_id;
  if (auto entry = view.links->measure(self, next)) session_.send(wire::LinkReport{{*entry}});
}

std::vector<wire::LinkEntry> Communicator::link_matrix() {
  uint64_t request;
  {
    std::lock_guard lock(mu_);
    require_accepted("link_matrix");
    request = ++link_queries_;
  }
  report_links(true);  // on the same connection ahead of the query: the answer holds it
  session_.send(wire::LinkMatrixQuery{request});
  std::unique_lock lock(mu_);
  wait_for(lock, [&] { return link_answered_ >= request; }, "the link matrix query");
  return link_matrix_;
}

// --- a lost master ------------------------------------------------------------------------------

void Communicator::on_session_failed(const Status& why) {
  {
    std::unique_lock lock(mu_);
    const bool lost = why.code == Errc::master_lost || why.code == Errc::connect;
    if (state_ == State::reconnecting && lost) {
      ++failed_redials_;  // a redial that failed before its welcome: reconnect_loop dials again
      cv_.notify_all();
      return;
    }
    if (state_ == State::accepted && why.code == Errc::master_lost && config_.master_reconnect_timeout.count() > 0) {
      // A record cut short could abort here what another member saw committed: better not to resume at all.
      if (auto too_large = resume_too_large()) {
        lock.unlock();
        return die(Status::failure(Errc::master_lost, why.message + "; cannot resume with a new master: " + *too_large));
      }
      lock.unlock();
      return begin_reconnect(why);
    }
  }
  die(why);
}

void Communicator::begin_reconnect(const Status& why) {
  {
    std::lock_guard lock(mu_);
    if (state_ != State::accepted) return;
    state_ = State::reconnecting;
    lost_master_ = why;
    reconnect_deadline_ = Clock::now() + config_.master_reconnect_timeout;
    ++master_losses_;
    cv_.notify_all();
  }
  log().warn("{}; dialing it again for up to {}", why.message, ms(config_.master_reconnect_timeout));
  // What ended ok here may have been committed by the lost master: the next one says.
  Status retry = Status::failure(Errc::peer_lost, why.message + "; reconnecting: call ferry_update_topology, then again");
  for (auto& op : ops_->in_flight())
    if (!op->awaiting_verdict()) op->fail_local(retry, /*final=*/true);
  std::thread last;
  std::optional<Status> cannot;
  {
    std::lock_guard lock(mu_);
    if (state_ != State::reconnecting) return;  // destroyed meanwhile: nothing to dial for
    last = std::move(reconnector_);
    try {
      reconnector_ = std::thread([this, loss = master_losses_] { reconnect_loop(loss); });
    } catch (const std::system_error& e) {
      cannot = Status::failure(Errc::master_lost, why.message + "; cannot start the redial thread: " + e.what());
    }
  }
  if (last.joinable()) last.join();  // the last loss's loop, which ended with its welcome
  if (cannot) die(*cannot);
}

void Communicator::reconnect_loop(uint64_t loss) {
  pthread_setname_np(pthread_self(), "ferry-redial");
  constexpr auto kMaxBackoff = std::chrono::milliseconds(1'000), kMaxDial = std::chrono::milliseconds(2'000);
  auto backoff = std::chrono::milliseconds(50);
  std::unique_lock lock(mu_);
  // Ours while this loss lasts: once welcomed, a later loss has a loop of its own.
  auto ours = [&] { return state_ == State::reconnecting && master_losses_ == loss; };
  while (ours() && Clock::now() < reconnect_deadline_) {
    if (auto too_large = resume_too_large()) {  // an op ended ok since the loss, past what a record holds
      Status cannot = Status::failure(Errc::master_lost, lost_master_.message + "; cannot resume: " + *too_large);
      lock.unlock();
      return die(cannot);
    }
    wire::Hello hello = hello_message();
    const uint64_t failures = failed_redials_;
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(reconnect_deadline_ - Clock::now());
    lock.unlock();
    bool dialed = true;
    try {
      session_.open(std::move(hello), std::clamp(left, std::chrono::milliseconds(1), kMaxDial));
    } catch (const std::exception& e) {
      dialed = false;
      log().debug("redial of the master failed: {}", e.what());
    }
    lock.lock();
    // Dialed: the welcome, a kick or a close comes within the heartbeat deadline (the session's receive timeout).
    if (dialed) cv_.wait_until(lock, reconnect_deadline_, [&] { return !ours() || failed_redials_ != failures; });
    if (!ours()) return;
    cv_.wait_for(lock, backoff, [&] { return !ours(); });
    backoff = std::min(2 * backoff, kMaxBackoff);
  }
  if (!ours()) return;
  Status gone = Status::failure(Errc::master_lost, lost_master_.message + "; it did not come back within " +
                                                       ms(config_.master_reconnect_timeout));
  lock.unlock();
  die(gone);
}

void Communicator::die(const Status& why) {
  {
    std::lock_guard lock(mu_);
    if (state_ == State::dead) return;
    state_ = State::dead;
    dead_ = true;
    dead_reason_ = why;
    cv_.notify_all();
  }
  if (why.code != Errc::invalid_usage) log().warn("{}", why.message);
  membership_.close(why);
  for (auto& op : ops_->in_flight()) op->fail_local(why, /*final=*/true);
  membership_.join();
  if (why.code != Errc::invalid_usage) session_.close(why);
}

// --- shared state served to other peers ---------------------------------------------------------

void Communicator::on_fetch_hello(const wire::FetchHello& hello, const std::string& welcome_proof,
                                  const std::shared_ptr<net::Stream>& stream) {
  auto op = std::dynamic_pointer_cast<SharedStateSync>(ops_->find(hello.epoch, hello.seq));
  uint64_t self;
  {
    std::lock_guard lock(mu_);
    self = peer_id_;
  }
  if (op && hello.to_peer == self) return op->serve(hello, welcome_proof, stream);
  net::write_one_message(stream,
                         wire::LinkWelcome{static_cast<uint32_t>(Errc::protocol), "no such shared-state sync here", "", 0},
                         [stream](Status) { stream->close(); });
}

// --- deadlines -----------------------------------------------------------------------------------------

void Communicator::arm_watchdog() {
  watchdog_.expires_after(kWatchdogPeriod);
  watchdog_.async_wait([this](std::error_code ec) {
    if (ec) return;
    auto now = Clock::now();
    for (auto& op : ops_->in_flight()) op->check_deadlines(now);
    arm_watchdog();
  });
}

}  // namespace ferry::peer
