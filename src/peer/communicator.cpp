#include "peer/communicator.h"

#include <algorithm>
#include <cfenv>
#include <cstring>

#include <asio/dispatch.hpp>
#include <asio/post.hpp>

#include "core/log.h"
#include "net/fd_limit.h"
#include "peer/escaped_exception.h"
#include "peer/p2p_inbound.h"

namespace ferry::peer {
namespace {

constexpr std::chrono::milliseconds kWatchdogPeriod{100};
// How long destroy waits for collectives in flight and the master's goodbye, then for queued closes.
constexpr std::chrono::milliseconds kLeaveGrace{2'000};
constexpr std::chrono::milliseconds kCloseGrace{500};

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
        if (end.code != 0 && state_.dead) return;
        session_.send(end);
      })),
      link_options_(link_options(config_, ops_)),
      session_(io_.get_executor(),
               {config_.master, config_.timeout, config_.heartbeat_timeout, config_.transport, config_.secret}, *this),
      membership_(
          io_.get_executor(), link_options_, [this](const wire::TopologyReady& ready) { session_.send(ready); },
          [this](const wire::LinkReport& report) { session_.send(report); }),
      prober_(io_.get_executor(), link_options_, [this](wire::ProbeDone done) { session_.send(done); }),
      redial_(state_, session_, *ops_,
              {config_.timeout, config_.master_connect_timeout, config_.master_reconnect_timeout},
              {[this] { return hello_message(); },
               [this] { return ResumeRecord::too_large(resume_snapshot()); },
               [this](const Status& why) { die(why); }}),
      calls_(state_, session_, membership_, *ops_, redial_, config_.timeout),
      label_(session_),
      watchdog_strand_(asio::make_strand(io_.get_executor())),
      watchdog_(watchdog_strand_) {
  // Raised before anything opens descriptors; the caps on strangers are sized from it.
  auto fd_limit = net::raise_fd_limit().soft;
  if (!config_.dial_out_only) start_listener(fd_limit);
  if (!config_.dial_out_only && config_.relay)
    relay_ = RelayService::start(io_.get_executor(), config_.listen_host, link_options_, fd_limit);
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

void Communicator::start_listener(uint64_t fd_limit) {
  listener_ = net::Listener::bind(io_.get_executor(), config_.listen_host, config_.port_min, config_.port_max);
  auto strangers = net::StrangerGate::create("p2p", net::StrangerLimits::within(fd_limit));
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
    std::lock_guard lock(state_.mu);
    was_alive = state_.phase != Phase::dead;
  }
  die(Status::failure(Errc::invalid_usage, "the communicator was destroyed"));
  redial_.join();  // its dial ends within a second or two
  prober_.stop();  // a round in flight ends within ~20 ms
  // Say goodbye, so the master drops us at once instead of after a silence.
  if (was_alive) session_.leave();
  auto grace = Clock::now() + kLeaveGrace;
  ops_->wait_empty(grace);
  session_.wait_closed(grace);
  if (listener_) listener_->stop();
  if (relay_) relay_->stop();
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
    std::lock_guard lock(state_.mu);
    was_alive = state_.phase != Phase::dead;
  }
  die(Status::failure(Errc::invalid_usage, "the communicator was aborted by ferry_comm_abort"));
  // The goodbye the destructor would send (it sends none for a dead peer): the master drops
  // this peer at once, so the others' collectives fail with peer_lost now, not at a deadline.
  if (was_alive) session_.leave();
}

// --- the caller's API ------------------------------------------------------------------

void Communicator::connect() {
  std::lock_guard vote(state_.votes);
  // Before state_.mu: it may resolve the master's name.
  std::string advertised = advertised_host(config_, listener_.get(), io_.get_executor());
  std::unique_lock lock(state_.mu);
  state_.throw_if_dead();
  if (state_.phase == Phase::accepted) throw Error(Errc::invalid_usage, "already connected");
  if (state_.phase == Phase::idle) {
    state_.phase = Phase::connecting;
    advertised_ = std::move(advertised);
    lock.unlock();
    try {
      redial_.first_dial();
    } catch (const Error&) {
      lock.lock();
      if (state_.phase == Phase::connecting) state_.phase = Phase::idle;
      throw;
    }
    lock.lock();
  }
  wait_for_admission(state_, lock, config_.master.to_string(), config_.timeout);
}

wire::Hello Communicator::hello_message() {
  std::string advertised;
  bool resuming;
  {
    std::lock_guard lock(state_.mu);
    advertised = advertised_;
    resuming = state_.phase == Phase::reconnecting;
  }
  wire::Hello hello = peer_hello(config_, listener_.get(), link_options_, advertised);
  if (relay_) hello.relay_port = relay_->port();
  if (!resuming) return hello;
  // The awaited collectives before the commits (resume_record.h): one leaving the first is in the second.
  auto now = resume_snapshot();
  std::lock_guard lock(state_.mu);
  resume_.fill(hello, now);
  return hello;
}

ResumeRecord::Snapshot Communicator::resume_snapshot() {
  auto view = membership_.view();
  ResumeRecord::Snapshot now;
  now.epoch = view.epoch;
  for (const auto& m : view.ring) now.ring.push_back(m.peer_id);
  for (const auto& op : ops_->in_flight())
    if (op->epoch() == view.epoch && op->awaiting_verdict()) now.awaiting.push_back(op->seq());
  std::lock_guard lock(state_.mu);
  now.peer_id = state_.peer_id;
  return now;
}

Attributes Communicator::attributes() const {
  Attributes a;
  {
    std::lock_guard lock(state_.mu);
    if (state_.phase != Phase::accepted && state_.phase != Phase::reconnecting && state_.phase != Phase::dead)
      throw Error(Errc::invalid_usage, "attributes are known once the peer is admitted (ferry_connect)");
    a.peer_id = static_cast<int64_t>(state_.peer_id);
  }
  auto view = membership_.view();
  a.global_world = view.world.global_world;
  a.group_world = static_cast<int64_t>(view.ring.size());
  a.num_groups = view.world.num_groups;
  a.largest_group = view.world.largest_group;
  a.rank = view.rank;
  a.peer_group = config_.peer_group;
  a.epoch = static_cast<int64_t>(view.epoch);
  a.shared_memory_lanes = view.links ? view.links->shared_memory_lanes() : 0;
  a.next_link_relay = static_cast<int64_t>(view.next_relay);
  a.relayed_bytes = relay_ ? static_cast<int64_t>(relay_->counts().bytes) : 0;
  for (const auto& m : view.ring) a.ring.push_back(m.peer_id);
  return a;
}

std::shared_ptr<AllreduceOp> Communicator::allreduce_async(const void* send, void* recv, size_t count,
                                                           const AllreduceSpec& spec) {
  std::shared_ptr<AllreduceOp> op;
  std::optional<Status> no_master;
  {
    std::lock_guard lock(state_.mu);  // with the ring and the issue: one snapshot (communicator.h)
    no_master = state_.master_away("allreduce");
    if (!no_master) state_.require_accepted("allreduce");
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
          op_spec.contributor = state_.peer_id;  // distinct in the group: independent rounding streams
          return std::make_shared<AllreduceOp>(*ops_, epoch, seq, view.links, plan, send, recv, count, op_spec,
                                               op_deadlines());
        },
        view.links.get());
  }
  begin_issued(*op, no_master, [&] {
    session_.send(wire::CollectiveBegin{.epoch = op->epoch(),
                                      .seq = op->seq(),
                                      .kind = static_cast<uint8_t>(spec.kind),
                                      .tag = spec.tag,
                                      .count = count,
                                      .dtype = static_cast<uint8_t>(spec.dtype),
                                      .op = static_cast<uint8_t>(spec.op),
                                      .quant = static_cast<uint8_t>(spec.quant.kind),
                                      .quant_block = spec.quant.kind == Quant::none ? 0 : spec.quant.block,
                                      .root = spec.root});
  });
  return op;
}

void Communicator::begin_issued(CollectiveOp& op, const std::optional<Status>& no_master,
                                const std::function<void()>& send_begin) {
  if (!no_master) send_begin();
  ops_->release_end(op.seq());  // after the begin: an end the master hears first gets this peer kicked
  if (no_master) op.fail_local(*no_master, /*final=*/true);
}

// --- what the master says --------------------------------------------------------------------

void Communicator::on_welcome(uint64_t peer_id) {
  label_.on_welcome();
  if (redial_.on_welcome(peer_id)) return;  // a redial's: the peer resumed (or died)
  membership_.set_self(peer_id);
  std::lock_guard lock(state_.mu);
  state_.peer_id = peer_id;
  if (state_.phase == Phase::connecting) state_.phase = Phase::pending;
}

void Communicator::on_topology(const wire::Topology& topology) {
  if (relay_) {
    uint64_t self;
    {
      std::lock_guard lock(state_.mu);
      self = state_.peer_id;
    }
    relay_->expect(topology, self);
  }
  if (Status st = membership_.propose(topology); !st.ok()) die(st);
}

void Communicator::on_topology_done(const wire::TopologyDone& done) {
  {
    std::lock_guard lock(state_.mu);  // with the commit: one snapshot for the issues (communicator.h)
    if (state_.phase == Phase::dead) return;
    switch (membership_.commit(done)) {
      case RingMembership::Commit::installed:
        state_.phase = Phase::accepted;
        [[fallthrough]];
      case RingMembership::Commit::renewed:
        ops_->restart(done.epoch);  // a new ring, or the same one renewed: the collective numbering restarts
        break;
      case RingMembership::Commit::repeated:
        break;
      case RingMembership::Commit::stale:
        return;
    }
  }
  calls_.on_topology_done();  // wakes the admission and the votes
}

void Communicator::on_probe_round(const wire::ProbeRound& round) {
  uint64_t self;
  {
    std::lock_guard lock(state_.mu);
    if (state_.phase == Phase::dead) return;
    self = state_.peer_id;
  }
  prober_.start_round(round, self);
}

void Communicator::on_collective_go(const wire::CollectiveGo& go) {
  if (auto op = ops_->find(go.epoch, go.seq)) op->go();
}

void Communicator::on_sync_plan(const wire::SyncPlan& plan) {
  if (auto op = ops_->find(plan.epoch, plan.seq)) op->plan(plan);
}

void Communicator::on_gather_go(const wire::GatherGo& go) {
  if (auto op = ops_->find(go.epoch, go.seq)) op->gather_go(go);
}

void Communicator::on_collective_result(const wire::CollectiveResult& result) {
  auto op = ops_->find(result.epoch, result.seq);
  if (op && result.code == 0) {
    // Remembered for a master started again (hello.resume_*), before the caller hears of it.
    auto sync = std::dynamic_pointer_cast<SharedStateSync>(op);
    auto revision = sync ? sync->planned_revision() : std::nullopt;
    std::lock_guard lock(state_.mu);
    resume_.committed(result.epoch, result.seq, revision);
  }
  if (op) op->verdict(status_from_wire(result.code, result.reason));
  if (result.code == 0) membership_.report_links(/*now=*/false);
  pending_notice_.on_commit(result);
}

void Communicator::on_collective_pending(const wire::CollectivePending& pending) {
  if (auto op = ops_->find(pending.epoch, pending.seq)) op->still_pending();
}

void Communicator::die(const Status& why) {
  {
    std::lock_guard lock(state_.mu);
    if (!state_.kill(why)) return;
  }
  if (why.code != Errc::invalid_usage) log().warn("{}", why.message);
  membership_.close(why);
  for (auto& op : ops_->in_flight()) op->fail_local(why, /*final=*/true);
  membership_.join();
  if (why.code != Errc::invalid_usage) session_.close(why);
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
