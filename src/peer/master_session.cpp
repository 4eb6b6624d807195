#include "peer/master_session.h"

#include <algorithm>
#include <future>

#include "core/auth_labels.h"
#include "core/log.h"
#include "core/wait_notice.h"
#include "net/dialer.h"

namespace ferry::peer {

MasterSession::MasterSession(asio::any_io_executor executor, Options options, Events& events)
    : executor_(std::move(executor)), options_(std::move(options)), events_(events) {}

void MasterSession::open(wire::Hello hello, std::optional<std::chrono::milliseconds> dial_timeout,
                         const std::atomic<bool>* abandon) {
  {
    std::lock_guard lock(mu_);
    if (connection_ && !closed_) throw Error(Errc::invalid_usage, "the master session is already open");
  }
  // Shared with the dial: an abandoned wait leaves it to end (and drop its stream) on its own.
  auto dialed = std::make_shared<std::promise<net::DialOutcome>>();
  const auto bound = dial_timeout.value_or(options_.timeout);
  net::dial(executor_, options_.master, bound, options_.transport,
            net::DialDone([dialed](net::DialOutcome outcome) { dialed->set_value(std::move(outcome)); }));
  // The dialer's own deadline bounds this wait. An address that drops the packets answers
  // nothing for all of it (a minute by default): say so while it lasts.
  auto outcome = dialed->get_future();
  const auto began = std::chrono::steady_clock::now();
  WaitNotice notices(began);
  auto next_wake = [&] {
    return abandon ? std::min(notices.next(), std::chrono::steady_clock::now() + kAbandonCheck) : notices.next();
  };
  while (outcome.wait_until(next_wake()) == std::future_status::timeout) {
    if (abandon && abandon->load()) throw Abandoned();
    if (auto waited = notices.due(std::chrono::steady_clock::now()))
      log().warn("master {}: no answer to the dial for {} (a firewall dropping the packets, a wrong address, or "
                 "a master not started yet); this dial gives up in {}",
                 options_.master.to_string(), seconds_text(*waited), seconds_text(std::max(bound - *waited, bound * 0)));
  }
  auto [status, stream, answered, resolved] = outcome.get();
  if (!status.ok()) {
    std::string what = "master " + options_.master.to_string() + ": " + status.message;
    if (!answered) throw Unanswered(status.code, what, resolved);
    throw Error(status.code, what);
  }
  auto connection = net::FrameConnection::create(stream);
  uint64_t generation;
  {
    std::lock_guard lock(mu_);
    connection_ = connection;
    hello_ = std::move(hello);  // goes out once the master's challenge is in (the master speaks first)
    hello_sent_ = false;
    master_nonce_.clear();
    closed_ = false;
    heard_from_master_.store(false);
    generation = ++generation_;
  }
  connection->start({[this, generation](wire::Message m) { on_message(generation, std::move(m)); },
                     [this, generation](const Status& why) { on_closed(generation, why); }});
  connection->set_receive_timeout(options_.heartbeat_timeout);
  connection->set_heartbeat(std::max(options_.heartbeat_timeout / 4, std::chrono::milliseconds(25)));
}

std::shared_ptr<net::FrameConnection> MasterSession::connection_of() const {
  std::lock_guard lock(mu_);
  return connection_;
}

void MasterSession::leave() {
  if (auto connection = connection_of()) connection->close(Status::failure(Errc::invalid_usage, "left"), wire::Leave{});
}

void MasterSession::close(const Status& why) {
  if (auto connection = connection_of()) connection->close(why);
}

bool MasterSession::wait_closed(std::chrono::steady_clock::time_point deadline) {
  std::unique_lock lock(mu_);
  return closed_cv_.wait_until(lock, deadline, [&] { return !connection_ || closed_; });
}

bool MasterSession::current(uint64_t generation) const {
  std::lock_guard lock(mu_);
  return generation == generation_;
}

void MasterSession::on_message(uint64_t generation, wire::Message message) {
  if (!current(generation)) return;
  heard_from_master_.store(true);
  std::visit(
      [this](auto& m) {
        using M = std::decay_t<decltype(m)>;
        if constexpr (std::is_same_v<M, wire::AuthChallenge>) {
          on_challenge(m);
        } else if constexpr (std::is_same_v<M, wire::Welcome>) {
          on_welcome(m);
        } else if constexpr (std::is_same_v<M, wire::Topology>) {
          events_.on_topology(m);
        } else if constexpr (std::is_same_v<M, wire::TopologyDone>) {
          events_.on_topology_done(m);
        } else if constexpr (std::is_same_v<M, wire::PendingCount>) {
          events_.on_pending_count(m.pending);
        } else if constexpr (std::is_same_v<M, wire::CollectiveGo>) {
          events_.on_collective_go(m);
        } else if constexpr (std::is_same_v<M, wire::SyncPlan>) {
          events_.on_sync_plan(m);
        } else if constexpr (std::is_same_v<M, wire::GatherGo>) {
          events_.on_gather_go(m);
        } else if constexpr (std::is_same_v<M, wire::CollectiveResult>) {
          events_.on_collective_result(m);
        } else if constexpr (std::is_same_v<M, wire::CollectivePending>) {
          events_.on_collective_pending(m);
        } else if constexpr (std::is_same_v<M, wire::CallRefused>) {
          events_.on_call_refused(m);
        } else if constexpr (std::is_same_v<M, wire::LinkMatrix>) {
          events_.on_link_matrix(m);
        } else if constexpr (std::is_same_v<M, wire::ProbeRound>) {
          events_.on_probe_round(m);
        } else if constexpr (std::is_same_v<M, wire::GoingAway>) {
          events_.on_master_gone(Status::failure(
              Errc::master_lost, "the master at " + options_.master.to_string() + " shut down (" + m.reason +
                                     ") and told its peers it will not come back; start a master and connect "
                                     "again (a new communicator: this one is done)"));
        } else if constexpr (std::is_same_v<M, wire::Kick>) {
          bool auth = m.code == static_cast<uint32_t>(Errc::auth);
          fail(Status::failure(auth ? Errc::auth : Errc::kicked,
                               (auth ? "the master refused us: " : "kicked by the master: ") + m.reason));
        } else {
          fail(Status::failure(Errc::protocol, std::string("the master sent an unexpected ") +
                                                   wire::message_type_name(static_cast<uint16_t>(M::kType))));
        }
      },
      message);
}

void MasterSession::on_challenge(const wire::AuthChallenge& challenge) {
  std::shared_ptr<net::FrameConnection> connection;
  wire::Hello hello;
  {
    std::lock_guard lock(mu_);
    if (!hello_ || hello_sent_) return;  // one challenge per connection
    hello = *hello_;
    master_nonce_ = challenge.nonce;
    hello_sent_ = true;
    connection = connection_;
  }
  // Mutual: a master that cannot prove the secret could be anyone, and would see our gradients.
  if (options_.secret && !challenge.required)
    return fail(Status::failure(Errc::auth, "the master does not check the run secret; refusing to join"));
  if (options_.secret) hello.proof = options_.secret->proof(auth_label::kPeerToMaster, challenge.nonce, hello.nonce);
  connection->send(hello);
}

void MasterSession::on_welcome(const wire::Welcome& welcome) {
  std::string nonce, master_nonce;
  {
    std::lock_guard lock(mu_);
    if (!hello_ || !hello_sent_) return fail(Status::failure(Errc::protocol, "the master welcomed us before our hello"));
    nonce = hello_->nonce;
    master_nonce = master_nonce_;
    hello_.reset();  // one welcome per connection
  }
  if (options_.secret && !options_.secret->verify(welcome.proof, auth_label::kMasterToPeer, nonce, master_nonce))
    return fail(Status::failure(Errc::auth, "the master could not prove the run secret"));
  log().debug("joined as peer {} (seen from {})", welcome.peer_id, welcome.observed_host);
  events_.on_welcome(welcome.peer_id);
}

void MasterSession::on_closed(uint64_t generation, const Status& why) {
  {
    std::lock_guard lock(mu_);
    if (generation != generation_) return;
    closed_ = true;
    closed_cv_.notify_all();
  }
  // A hang-up before the master's first message is a connection that never
  // worked: typically a master that requires TLS meeting a plain peer (it
  // gives up on the handshake and closes).
  // Silence is this peer's own receive deadline: something took the connection and said
  // nothing (a ferry master speaks first), e.g. a Python ferry.Master(start=False) not started.
  if (!heard_from_master_.load() && why.code == Errc::timeout)
    return fail(Status::failure(Errc::connect, "the master at " + options_.master.to_string() +
                                                   " took the connection but sent nothing (" + why.message +
                                                   "; a ferry master speaks first): is it a ferry master, and "
                                                   "serving (a Python ferry.Master(start=False) serves once "
                                                   "started)? Does it require TLS (tls_* parameters) and this "
                                                   "peer not?"));
  if (!heard_from_master_.load())
    return fail(Status::failure(Errc::connect, "the master closed the connection before its first message (" +
                                                   why.message +
                                                   "): does it require TLS (tls_* parameters) and this peer not, "
                                                   "or is it not a ferry master?"));
  fail(Status::failure(Errc::master_lost, "lost the master: " + why.message));
}

}  // namespace ferry::peer
