#include "peer/communicator.h"

#include <algorithm>
#include <cfenv>
#include <future>

#include <asio/dispatch.hpp>
#include <asio/post.hpp>
#include "core/log.h"

#include "core/auth_labels.h"
#include "net/dialer.h"
#include "net/frame_io.h"
#include "peer/p2p_handshake.h"

namespace ferry::peer {
namespace {

constexpr std::chrono::milliseconds kWatchdogPeriod{100};
constexpr size_t kMaxParkedLinks = 256;

// Room for four chunks in flight per lane, so a reader borrowing one never
// stalls the writer; capped because every lane of every link has its own.
SameHostLinks same_host_links(const CommConfig& config) {
  size_t ring = std::clamp<size_t>(4 * (config.max_chunk_bytes + 64), size_t{1} << 20, size_t{16} << 20);
  return {config.shared_memory, ring};
}

std::string ms(std::chrono::milliseconds d) { return std::to_string(d.count()) + " ms"; }

Status status_from_wire(uint32_t code, const std::string& reason) {
  Errc errc = code <= static_cast<uint32_t>(kErrcMax) ? static_cast<Errc>(code) : Errc::internal;
  return code == 0 ? Status::success() : Status::failure(errc, reason);
}

}  // namespace

Communicator::Communicator(CommConfig config)
    : config_(std::move(config)),
      work_(asio::make_work_guard(io_)),
      watchdog_strand_(asio::make_strand(io_.get_executor())),
      watchdog_(watchdog_strand_) {
  auto transport = config_.transport ? config_.transport : net::make_tcp_transport();
  const_cast<CommConfig&>(config_).transport = transport;
  listener_ = net::Listener::bind(io_.get_executor(), config_.listen_host, config_.port_min, config_.port_max);
  listener_->start([this](asio::ip::tcp::socket socket) { on_inbound(std::move(socket)); });
  asio::dispatch(watchdog_strand_, [this] { arm_watchdog(); });
  for (uint32_t i = 0; i < config_.io_threads; ++i)
    threads_.emplace_back([this] {
      // Reductions run here: a fixed IEEE environment (no flush-to-zero inherited
      // from whichever thread created us) makes results reproducible.
      std::fesetenv(FE_DFL_ENV);
      try {
        io_.run();
      } catch (const std::exception& e) {
        log().critical("ferry io thread failed: {}", e.what());
      }
    });
}

Communicator::~Communicator() {
  std::shared_ptr<net::FrameConnection> master;
  bool was_alive = false;
  {
    std::lock_guard lock(mu_);
    master = master_;
    was_alive = state_ != State::dead;
  }
  die(Status::failure(Errc::invalid_usage, "the communicator was destroyed"));
  // Say goodbye, so the master drops us at once instead of after a silence.
  if (master && was_alive) master->close(Status::failure(Errc::invalid_usage, "left"), wire::Leave{});
  {
    std::unique_lock lock(mu_);
    cv_.wait_for(lock, std::chrono::seconds(2), [&] { return ops_.empty() && (!master || master_closed_); });
  }
  listener_->stop();
  asio::post(watchdog_strand_, [this] { watchdog_.cancel(); });
  work_.reset();
  // Give posted closes a moment, then stop regardless: destroy is bounded.
  auto deadline = Clock::now() + std::chrono::milliseconds(500);
  while (!io_.stopped() && Clock::now() < deadline) std::this_thread::sleep_for(std::chrono::milliseconds(5));
  io_.stop();
  for (auto& t : threads_) t.join();
}

// --- the caller's API ------------------------------------------------------------------

template <class Pred>
void Communicator::wait_for(std::unique_lock<std::mutex>& lock, Pred pred, const std::string& what) {
  bool ok = cv_.wait_for(lock, config_.timeout, [&] { return pred() || state_ == State::dead; });
  if (state_ == State::dead) throw Error(dead_reason_.code, dead_reason_.message);
  if (!ok) throw Error(Errc::timeout, what + " did not complete within " + ms(config_.timeout));
}

void Communicator::require_accepted(const char* call) const {
  if (state_ == State::dead) throw Error(dead_reason_.code, dead_reason_.message);
  if (state_ != State::accepted)
    throw Error(Errc::invalid_usage, std::string(call) + ": this peer is not admitted yet; call ferry_connect first");
}

void Communicator::connect() {
  std::lock_guard vote(vote_mu_);
  std::unique_lock lock(mu_);
  if (state_ == State::dead) throw Error(dead_reason_.code, dead_reason_.message);
  if (state_ == State::accepted) throw Error(Errc::invalid_usage, "already connected");
  if (state_ == State::idle) {
    state_ = State::connecting;
    lock.unlock();
    std::promise<std::pair<Status, std::shared_ptr<net::Stream>>> dialed;
    net::dial(io_.get_executor(), config_.master, config_.timeout, config_.transport,
              [&dialed](Status st, std::shared_ptr<net::Stream> stream) { dialed.set_value({st, stream}); });
    auto [status, stream] = dialed.get_future().get();  // the dialer's own deadline bounds this
    lock.lock();
    if (!status.ok()) {
      state_ = State::idle;
      throw Error(status.code, "master " + config_.master.to_string() + ": " + status.message);
    }
    master_ = net::FrameConnection::create(stream);
    master_->start({[this](wire::Message m) { on_master_message(std::move(m)); },
                    [this](const Status& why) { on_master_closed(why); }});
    master_->set_receive_timeout(config_.heartbeat_timeout);
    master_->set_heartbeat(std::max(config_.heartbeat_timeout / 4, std::chrono::milliseconds(25)));
    wire::Hello hello;
    hello.peer_group = config_.peer_group;
    hello.advertised_host = config_.advertised_host;
    hello.advertised_port = config_.advertised_port ? config_.advertised_port : listener_->port();
    hello.p2p_connections = config_.connections;
    hello.heartbeat_timeout_ms = static_cast<uint32_t>(config_.heartbeat_timeout.count());
    hello.nonce = random_nonce();
    hello_ = hello;  // goes out once the master's challenge is in (the master speaks first)
  }
  wait_for(lock, [&] { return state_ == State::accepted; },
           "admission by the master (this peer stays pending; call ferry_connect again to keep waiting)");
}

void Communicator::update_topology() {
  std::lock_guard vote(vote_mu_);
  std::unique_lock lock(mu_);
  require_accepted("update_topology");
  if (!ops_.empty())
    throw Error(Errc::invalid_usage, "update_topology with " + std::to_string(ops_.size()) +
                                         " collectives in flight; wait for them first");
  uint64_t before = topology_done_count_;
  wire::TopologyVote ballot;
  ballot.links_broken = links_ && !links_->failure().ok();
  master_->send(ballot);
  wait_for(lock, [&] { return topology_done_count_ > before; }, "update_topology");
}

uint32_t Communicator::peers_pending() {
  std::lock_guard vote(vote_mu_);
  std::unique_lock lock(mu_);
  require_accepted("peers_pending");
  uint64_t before = pending_answers_;
  master_->send(wire::PendingQuery{});
  wait_for(lock, [&] { return pending_answers_ > before; }, "peers_pending");
  return last_pending_;
}

Attributes Communicator::attributes() const {
  std::lock_guard lock(mu_);
  if (state_ != State::accepted && state_ != State::dead)
    throw Error(Errc::invalid_usage, "attributes are known once the peer is admitted (ferry_connect)");
  Attributes a;
  a.global_world = world_.global_world;
  a.group_world = static_cast<int64_t>(ring_.size());
  a.num_groups = world_.num_groups;
  a.largest_group = world_.largest_group;
  a.rank = rank_;
  a.peer_group = config_.peer_group;
  a.peer_id = static_cast<int64_t>(peer_id_);
  a.epoch = static_cast<int64_t>(epoch_);
  a.shared_memory_lanes = links_ ? links_->shared_memory_lanes() : 0;
  for (const auto& m : ring_) a.ring.push_back(m.peer_id);
  return a;
}

size_t Communicator::ops_in_flight() const {
  std::lock_guard lock(mu_);
  return ops_.size();
}

std::shared_ptr<AllreduceOp> Communicator::allreduce_async(const void* send, void* recv, size_t count,
                                                           const AllreduceSpec& spec) {
  std::shared_ptr<AllreduceOp> op;
  wire::CollectiveBegin begin;
  std::shared_ptr<net::FrameConnection> master;
  {
    std::lock_guard lock(mu_);
    require_accepted("allreduce");
    // The number is taken only once the operation exists: a refusal here must
    // not leave this peer's numbering one ahead of everyone else's.
    uint32_t seq = next_seq_;
    RingPlan plan(count, dtype_size(spec.dtype), static_cast<uint32_t>(ring_.size()), rank_, lanes_,
                  config_.max_chunk_bytes);
    OpDeadlines deadlines{config_.timeout, config_.progress_timeout, config_.timeout};
    op = std::make_shared<AllreduceOp>(static_cast<OpHost&>(*this), epoch_, seq, links_, plan, send, recv, count, spec, deadlines);
    ++next_seq_;
    ops_[seq] = op;
    if (links_) links_->directory()->add(seq, op);
    begin = {epoch_,
             seq,
             static_cast<uint8_t>(wire::CollectiveKind::allreduce),
             spec.tag,
             count,
             static_cast<uint8_t>(spec.dtype),
             static_cast<uint8_t>(spec.op),
             static_cast<uint8_t>(spec.quant.kind),
             spec.quant.kind == Quant::none ? 0 : spec.quant.block};
    master = master_;
  }
  master->send(begin);
  return op;
}

// --- OpHost ---------------------------------------------------------------------------------

void Communicator::send_end(uint64_t epoch, uint32_t seq, const Status& status) {
  std::shared_ptr<net::FrameConnection> master;
  {
    std::lock_guard lock(mu_);
    master = master_;
  }
  if (master) master->send(wire::CollectiveEnd{epoch, seq, static_cast<uint32_t>(status.code), wire::bounded_reason(status.message)});
}

void Communicator::op_finished(uint32_t seq) {
  std::lock_guard lock(mu_);
  ops_.erase(seq);
  cv_.notify_all();
}

std::shared_ptr<CollectiveOp> Communicator::find_op(uint64_t epoch, uint32_t seq) {
  std::lock_guard lock(mu_);
  if (epoch != epoch_) return nullptr;
  auto it = ops_.find(seq);
  return it == ops_.end() ? nullptr : it->second;
}

// --- the master session ------------------------------------------------------------------------

void Communicator::on_master_message(wire::Message message) {
  heard_from_master_.store(true);
  std::visit(
      [this](auto& m) {
        using M = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<M, wire::AuthChallenge>) {
          on_auth_challenge(m);
        } else if constexpr (std::is_same_v<M, wire::Welcome>) {
          on_welcome(m);
        } else if constexpr (std::is_same_v<M, wire::Topology>) {
          on_topology(m);
        } else if constexpr (std::is_same_v<M, wire::TopologyDone>) {
          on_topology_done(m);
        } else if constexpr (std::is_same_v<M, wire::PendingCount>) {
          std::lock_guard lock(mu_);
          last_pending_ = m.pending;
          ++pending_answers_;
          cv_.notify_all();
        } else if constexpr (std::is_same_v<M, wire::CollectiveGo>) {
          if (auto op = find_op(m.epoch, m.seq)) op->go();
        } else if constexpr (std::is_same_v<M, wire::SyncPlan>) {
          if (auto op = find_op(m.epoch, m.seq)) op->plan(m);
        } else if constexpr (std::is_same_v<M, wire::CollectiveResult>) {
          if (auto op = find_op(m.epoch, m.seq)) op->verdict(status_from_wire(m.code, m.reason));
        } else if constexpr (std::is_same_v<M, wire::Kick>) {
          bool auth = m.code == static_cast<uint32_t>(Errc::auth);
          die(Status::failure(auth ? Errc::auth : Errc::kicked, (auth ? "the master refused us: " : "kicked by the master: ") + m.reason));
        } else {
          die(Status::failure(Errc::protocol, std::string("the master sent an unexpected ") +
                                                  wire::message_type_name(static_cast<uint16_t>(M::kType))));
        }
      },
      message);
}

void Communicator::on_auth_challenge(const wire::AuthChallenge& challenge) {
  std::shared_ptr<net::FrameConnection> master;
  wire::Hello hello;
  {
    std::lock_guard lock(mu_);
    if (!hello_ || state_ != State::connecting) return;  // one challenge per connection
    hello = *std::exchange(hello_, std::nullopt);
    master_nonce_ = challenge.nonce;
    master = master_;
  }
  // Mutual: a master that cannot prove the secret could be anyone, and would see our gradients.
  if (config_.secret && !challenge.required)
    return die(Status::failure(Errc::auth, "the master does not check the run secret; refusing to join"));
  if (config_.secret) hello.proof = config_.secret->proof(auth_label::kPeerToMaster, challenge.nonce, hello.nonce);
  master->send(hello);
  std::lock_guard lock(mu_);
  hello_ = wire::Hello{};
  hello_->nonce = hello.nonce;  // kept to check the welcome's proof
}

void Communicator::on_welcome(const wire::Welcome& welcome) {
  std::string nonce, master_nonce;
  {
    std::lock_guard lock(mu_);
    if (hello_) nonce = hello_->nonce;
    master_nonce = master_nonce_;
  }
  if (config_.secret && !config_.secret->verify(welcome.proof, auth_label::kMasterToPeer, nonce, master_nonce))
    return die(Status::failure(Errc::auth, "the master could not prove the run secret"));
  std::lock_guard lock(mu_);
  hello_.reset();
  peer_id_ = welcome.peer_id;
  if (state_ == State::connecting) state_ = State::pending;
  log().debug("joined as peer {} (seen from {})", welcome.peer_id, welcome.observed_host);
}

void Communicator::on_master_closed(const Status& why) {
  {
    std::lock_guard lock(mu_);
    master_closed_ = true;
    cv_.notify_all();
  }
  // The master speaks first on every connection. Silence then a hang-up is a
  // connection that never worked: typically a master that requires TLS meeting
  // a plain peer (it gives up on the handshake and closes).
  if (!heard_from_master_.load())
    return die(Status::failure(Errc::connect, "the master closed the connection before its first message (" +
                                                  why.message +
                                                  "): does it require TLS (tls_* parameters) and this peer not, "
                                                  "or is it not a ferry master?"));
  die(Status::failure(Errc::master_lost, "lost the master: " + why.message));
}

void Communicator::die(const Status& why) {
  std::vector<std::shared_ptr<CollectiveOp>> ops;
  std::shared_ptr<LinkSetup> setup;
  std::shared_ptr<RingLinks> links, proposed_links;
  std::shared_ptr<net::FrameConnection> master;
  {
    std::lock_guard lock(mu_);
    if (state_ == State::dead) return;
    state_ = State::dead;
    dead_reason_ = why;
    for (auto& [seq, op] : ops_) ops.push_back(op);
    setup = std::exchange(setup_, nullptr);
    links = links_;
    proposed_links = std::exchange(proposed_links_, nullptr);
    master = master_;
    parked_links_.clear();
    cv_.notify_all();
  }
  if (why.code != Errc::invalid_usage) log().warn("{}", why.message);
  if (setup) setup->cancel(why);
  for (auto& l : {links, proposed_links})
    if (l) l->close(why);
  for (auto& op : ops) op->fail_local(why, /*final=*/true);
  for (auto& l : {links, proposed_links})
    if (l) l->join();
  if (master && why.code != Errc::invalid_usage) master->close(why);
}

// --- topology ----------------------------------------------------------------------------------------

void Communicator::on_topology(const wire::Topology& topology) {
  bool member = false;
  for (const auto& m : topology.ring) member |= m.peer_id == peer_id_;
  if (!member || topology.p2p_connections == 0 || topology.p2p_connections > wire::kMaxConnectionsPerLink)
    return die(Status::failure(Errc::protocol, "the master proposed a ring this peer cannot use"));

  std::shared_ptr<LinkSetup> old_setup, setup;
  std::shared_ptr<RingLinks> old_links, old_proposed;
  std::vector<ParkedLink> parked;
  {
    std::lock_guard lock(mu_);
    if (state_ == State::dead) return;
    old_setup = std::exchange(setup_, nullptr);
    old_proposed = std::exchange(proposed_links_, nullptr);
    // The ring is being rebuilt: the old links go now (no collective may be in flight).
    old_links = links_;
    proposed_ = topology;
    // The callback must name its own setup, to tell a superseded one apart.
    auto self_setup = std::make_shared<std::weak_ptr<LinkSetup>>();
    setup = std::make_shared<LinkSetup>(io_.get_executor(), config_.transport, config_.p2p_tuning, config_.secret,
                                        same_host_links(config_), peer_id_, topology, config_.timeout,
                                        [this, self_setup](LinkSetup::Outcome outcome) {
                                          on_links_ready(self_setup->lock(), std::move(outcome));
                                        });
    *self_setup = setup;
    setup_ = setup;
    for (auto it = parked_links_.begin(); it != parked_links_.end();) {
      if (it->hello.epoch == topology.epoch) {
        parked.push_back(std::move(*it));
        it = parked_links_.erase(it);
      } else {
        ++it;
      }
    }
  }
  Status rebuilt = Status::failure(Errc::peer_lost, "the ring is being rebuilt");
  if (old_setup) old_setup->cancel(rebuilt);
  for (auto& l : {old_proposed, old_links})
    if (l) {
      l->close(rebuilt);
      l->join();
    }
  log().debug("peer {} sets up links for epoch {} ({} peers)", peer_id_, topology.epoch,
                topology.ring.size());
  setup->start();
  for (auto& p : parked)
    if (!setup->offer_inbound(p.hello, p.welcome_proof, p.stream))
      asio::post(p.stream->executor(), [s = p.stream] { s->close(); });
}

void Communicator::on_links_ready(const std::shared_ptr<LinkSetup>& setup, LinkSetup::Outcome outcome) {
  std::shared_ptr<net::FrameConnection> master;
  {
    std::lock_guard lock(mu_);
    if (!setup || setup_ != setup || state_ == State::dead) {
      if (outcome.links) {
        outcome.links->close(Status::failure(Errc::peer_lost, "superseded ring"));
        outcome.links->join();
      }
      return;
    }
    proposed_links_ = outcome.links;
    master = master_;
  }
  wire::TopologyReady ready{setup->epoch(), static_cast<uint32_t>(outcome.status.code), outcome.unreachable_peer,
                            wire::bounded_reason(outcome.status.message)};
  if (!outcome.status.ok()) log().warn("links for epoch {} failed: {}", setup->epoch(), outcome.status.message);
  master->send(ready);
}

void Communicator::on_topology_done(const wire::TopologyDone& done) {
  std::lock_guard lock(mu_);
  if (state_ == State::dead) return;
  if (proposed_ && proposed_->epoch == done.epoch) {
    epoch_ = done.epoch;
    ring_ = proposed_->ring;
    lanes_ = proposed_->p2p_connections;
    for (uint32_t i = 0; i < ring_.size(); ++i)
      if (ring_[i].peer_id == peer_id_) rank_ = i;
    links_ = proposed_links_;
    if (!links_) {  // a world of one: no lanes, but a directory all the same
      links_ = std::make_shared<RingLinks>(epoch_, 0);
      links_->start({}, {});
    }
    proposed_links_.reset();
    proposed_.reset();
    setup_.reset();
    next_seq_ = 0;
    state_ = State::accepted;
  } else if (!proposed_ && state_ == State::accepted && done.epoch > epoch_) {
    // The same ring renewed: links stay, the collective numbering restarts.
    epoch_ = done.epoch;
    next_seq_ = 0;
  } else if (done.epoch != epoch_) {
    return;  // for a proposal this peer never finished: a newer one follows
  }
  world_ = done;
  ++topology_done_count_;
  cv_.notify_all();
}

// --- inbound p2p connections --------------------------------------------------------------------------

void Communicator::on_inbound(asio::ip::tcp::socket socket) {
  if (Status tuned = net::apply_tuning(socket, config_.p2p_tuning); !tuned.ok())
    log().warn("inbound link: {}", tuned.message);
  config_.transport->open_server(std::move(socket), [this](Status st, std::shared_ptr<net::Stream> stream) {
    if (!st.ok()) return log().debug("dropped an inbound link: {}", st.message);
    asio::dispatch(stream->executor(), [this, stream] {
      acceptor_handshake(stream, config_.secret, config_.timeout,
                         [this, stream](Status hst, std::optional<AcceptedHello> accepted) {
                           if (!hst.ok()) {
                             if (hst.code == Errc::auth) log().warn("refused a p2p connection from {}: {}", stream->remote_host(), hst.message);
                             return;
                           }
                           if (auto* link = std::get_if<wire::LinkHello>(&accepted->hello))
                             return on_link_hello(*link, accepted->welcome_proof, stream);
                           on_fetch_hello(std::get<wire::FetchHello>(accepted->hello), accepted->welcome_proof, stream);
                         });
    });
  });
}

void Communicator::on_link_hello(const wire::LinkHello& hello, const std::string& welcome_proof,
                                 const std::shared_ptr<net::Stream>& stream) {
  std::string refusal;
  {
    // One critical section: a topology installed between "is there a setup for
    // this hello?" and "park it?" would otherwise drop a valid hello (and get
    // its sender kicked). offer_inbound never calls back into us synchronously.
    std::lock_guard lock(mu_);
    if (setup_ && setup_->offer_inbound(hello, welcome_proof, stream)) return;
    uint64_t known = proposed_ ? proposed_->epoch : epoch_;
    auto now = Clock::now();
    std::erase_if(parked_links_, [&](const ParkedLink& p) { return now - p.since > config_.timeout; });
    // Before our welcome we do not even know our own id: the hello may still be for us.
    bool for_us = peer_id_ == 0 || hello.to_peer == peer_id_;
    if (state_ != State::dead && for_us && hello.epoch > known && parked_links_.size() < kMaxParkedLinks) {
      // Its sender heard of the ring before we did; keep it until our topology message arrives.
      parked_links_.push_back({hello, welcome_proof, stream, now});
      return;
    }
    refusal = "link_hello for epoch " + std::to_string(hello.epoch) + " from peer " + std::to_string(hello.from_peer) +
              " does not match this peer's ring";
  }
  log().debug("refused a link: {}", refusal);
  net::write_one_message(stream, wire::LinkWelcome{static_cast<uint32_t>(Errc::protocol), refusal, "", 0},
                         [stream](Status) { stream->close(); });
}

// --- shared state ------------------------------------------------------------------------------------

std::shared_ptr<SharedStateSync> Communicator::sync_shared_state(SyncSpec spec) {
  uint64_t epoch, self;
  uint32_t seq;
  std::shared_ptr<net::FrameConnection> master;
  {
    std::lock_guard lock(mu_);
    require_accepted("sync_shared_state");
    epoch = epoch_;
    self = peer_id_;
    seq = next_seq_++;
    master = master_;
  }
  if (spec.connections == 0) spec.connections = config_.connections;
  OpDeadlines deadlines{config_.timeout, config_.progress_timeout, config_.timeout};
  std::shared_ptr<SharedStateSync> op;
  try {
    // Hashing happens here, outside the lock: it may take a while for large states.
    op = std::make_shared<SharedStateSync>(
        static_cast<OpHost&>(*this), epoch, seq, self, std::move(spec), deadlines,
        [this](const wire::PeerAddress& holder, const wire::FetchHello& hello, std::shared_ptr<net::Stream>& out) {
          return dial_holder(holder, hello, out);
        });
  } catch (const Error& e) {
    // The number is taken: end it at once so every peer's numbering stays aligned.
    master->send(wire::SyncBegin{epoch, seq, 0, 0, {}});
    master->send(wire::CollectiveEnd{epoch, seq, static_cast<uint32_t>(e.code()), wire::bounded_reason(e.what())});
    throw;
  }
  wire::SyncBegin begin = op->begin_message();
  begin.epoch = epoch;
  {
    std::lock_guard lock(mu_);
    if (state_ == State::dead) throw Error(dead_reason_.code, dead_reason_.message);
    ops_[seq] = op;
  }
  master->send(begin);
  return op;
}

Status Communicator::dial_holder(const wire::PeerAddress& holder, const wire::FetchHello& hello,
                                 std::shared_ptr<net::Stream>& out) {
  std::promise<std::pair<Status, std::shared_ptr<net::Stream>>> dialed;
  net::dial(io_.get_executor(), {holder.host, holder.port}, config_.timeout, config_.transport,
            [&dialed](Status st, std::shared_ptr<net::Stream> s) { dialed.set_value({st, s}); }, config_.p2p_tuning);
  auto [st, stream] = dialed.get_future().get();  // bounded by the dialer's deadline
  if (!st.ok()) return st;
  std::promise<Status> answered;
  asio::dispatch(stream->executor(), [&, stream] {
    dialer_handshake(stream, hello, config_.secret, config_.timeout, [&](Status hst, bool) { answered.set_value(hst); });
  });
  Status handshake = answered.get_future().get();  // bounded by read_one_message's deadline
  if (!handshake.ok()) {
    stream->abort();
    return handshake;
  }
  stream->enter_blocking_mode();
  out = stream;
  return Status::success();
}

void Communicator::on_fetch_hello(const wire::FetchHello& hello, const std::string& welcome_proof,
                                  const std::shared_ptr<net::Stream>& stream) {
  auto op = std::dynamic_pointer_cast<SharedStateSync>(find_op(hello.epoch, hello.seq));
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
    std::vector<std::shared_ptr<CollectiveOp>> ops;
    {
      std::lock_guard lock(mu_);
      for (auto& [seq, op] : ops_) ops.push_back(op);
    }
    auto now = Clock::now();
    for (auto& op : ops) op->check_deadlines(now);
    arm_watchdog();
  });
}

}  // namespace ferry::peer
