#include "master/master_server.h"

#include <future>

#include <asio/ip/tcp.hpp>
#include <asio/post.hpp>
#include <asio/steady_timer.hpp>
#include "core/log.h"
#include "master/master_log.h"
#include "net/endpoint.h"
#include "net/fd_limit.h"

namespace ferry::master {
namespace {

// The state's only clock (back-off, probe deadlines); steady: a wall-clock
// jump must not lift or extend one.
uint64_t now_ms() {
  return static_cast<uint64_t>(
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now().time_since_epoch())
          .count());
}

bool is_loopback(const std::string& host) {
  std::error_code ec;
  auto address = asio::ip::make_address(host, ec);
  if (ec) return host == "localhost";
  return address.is_loopback();
}

}  // namespace

MasterServer::MasterServer(MasterServerOptions options)
    : options_(std::move(options)),
      state_(options_.limits, options_.secret,
             static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::milliseconds>(
                                       std::chrono::system_clock::now().time_since_epoch())
                                       .count())) {
  if (!options_.transport) options_.transport = net::make_tcp_transport();
  net::FdLimit fds = net::raise_fd_limit();
  strangers_ = net::StrangerGate::create(
      "master", options_.strangers.value_or(net::StrangerLimits::within(fds.soft)));
  listener_ = net::Listener::bind(io_.get_executor(), options_.listen_host, options_.listen_port,
                                  options_.listen_port);
  if (!options_.http_address.empty()) http_ = std::make_unique<MasterHttp>(options_.http_address);
}

MasterServer::~MasterServer() { stop(); }

void MasterServer::start() {
  if (started_) throw Error(Errc::invalid_usage, "the master is already running");
  if (stopped_) throw Error(Errc::invalid_usage, "the master was stopped; create a new one");
  started_ = true;
  started_at_ = std::chrono::steady_clock::now();
  listener_->start(strangers_, [this](asio::ip::tcp::socket socket, std::shared_ptr<net::StrangerGate::Pass> pass) {
    on_accept(std::move(socket), std::move(pass));
  });
  started_ms_ = now_ms();
  asio::post(io_, [this] {
    publish();
    arm_tick();
  });
  if (http_) http_->start();
  thread_ = std::thread([this] { serve(); });
  const net::StrangerLimits& caps = strangers_->limits();
  const std::string listening = net::Endpoint{options_.listen_host, port()}.to_string();
  master_log().info("master listening on {} ({}); open-file limit {}; at most {} unwelcomed connections ({} per source)",
             listening, options_.transport->name(), net::raise_fd_limit().soft, caps.total, caps.per_source);
  if (http_) master_log().info("dashboard at {} (metrics at {}metrics, status at {}status)", http_url(), http_url(), http_url());
  // Here, not in ferry-master, so that a master made through the C API or Python warns alike.
  if (!options_.secret && !is_loopback(options_.listen_host))
    log().warn("listening on {} without a run secret: anyone who can reach this port can join the run, read its "
               "tensors and feed it garbage; give it a secret file (ferry-master --secret-file, "
               "ferry_master_params.secret_file, ferry.Master(secret_file=...), or $FERRY_SECRET_FILE)",
               listening);
}

void MasterServer::serve() {
  try {
    io_.run();
    return;
  } catch (const std::exception& e) {
    // Never a live master that serves nobody: close everything, so peers see
    // the loss now, and tell the owner, who decides whether the process ends.
    std::string reason = std::string("the master's serving thread failed: ") + e.what();
    log().critical("{}; closing every connection", reason);
    try {
      close_all(Status::failure(Errc::master_lost, reason));
      io_.restart();
      io_.run_for(std::chrono::milliseconds(200));  // let the closes go out
    } catch (const std::exception& again) {
      log().critical("closing after the failure failed too: {}", again.what());
    }
    if (options_.on_failure) options_.on_failure(reason);
  }
}

void MasterServer::close_all(const Status& why, const std::optional<wire::Message>& last) {
  listener_->stop();
  for (auto& [id, served] : connections_) served.conn->close(why, last);
  connections_.clear();
}

void MasterServer::arm_tick() {
  tick_.expires_after(std::chrono::milliseconds(500));
  tick_.async_wait([this](std::error_code ec) {
    if (ec || stopped_) return;
    state_.on_tick(now_ms());
    apply_effects();
    publish();
    arm_tick();
  });
}

void MasterServer::publish() {
  if (!http_) return;
  state_.advance_clock(now_ms());
  auto snapshot = std::make_shared<RunSnapshot>();
  snapshot->view = state_.view();
  snapshot->stats = state_.stats();
  snapshot->journal = state_.journal();
  snapshot->context.listen = net::Endpoint{options_.listen_host, port()}.to_string();
  snapshot->context.now_unix =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  snapshot->context.started_ms = started_ms_;
  http_->publish(std::move(snapshot));
}

void MasterServer::stop(Farewell farewell, const std::string& reason) {
  if (stopped_.exchange(true)) return;
  if (!started_) return;
  std::promise<void> closed;
  asio::post(io_, [this, &closed, farewell, reason] {
    std::optional<wire::Message> last;
    if (farewell == Farewell::going_away) last = wire::GoingAway{.reason = wire::bounded_reason(reason)};
    close_all(Status::failure(Errc::master_lost, "master shutting down"), last);
    closed.set_value();
  });
  // Let the closes flush briefly; never wait on a stuck peer.
  closed.get_future().wait_for(std::chrono::seconds(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  io_.stop();
  if (thread_.joinable()) thread_.join();
  if (http_) http_->stop();
  // The serving thread has ended: the state is this thread's now.
  master_log().info("{}", summary_line(state_.stats(), std::chrono::duration_cast<std::chrono::milliseconds>(
                                                    std::chrono::steady_clock::now() - started_at_)));
  master_log().info("master stopped{}", farewell == Farewell::going_away ? " (its peers were told it is gone for good)"
                                                                  : " without telling its peers (they may resume with the "
                                                                    "master started next at this address)");
}

void MasterServer::on_accept(asio::ip::tcp::socket socket, std::shared_ptr<net::StrangerGate::Pass> stranger) {
  options_.transport->open_server(std::move(socket), [this, stranger](Status st, std::shared_ptr<net::Stream> stream) {
    asio::post(io_, [this, st, stream, stranger] { on_stream(st, stream, stranger); });
  });
}

void MasterServer::on_stream(const Status& status, std::shared_ptr<net::Stream> stream,
                             std::shared_ptr<net::StrangerGate::Pass> stranger) {
  if (stopped_) return;
  if (!status.ok()) {
    if (uint64_t events = dropped_log_.admit())
      log().warn("dropped {} incoming connection(s) in the transport handshake; last: {}", events, status.message);
    return;
  }
  ConnId id = next_conn_++;
  auto conn = net::FrameConnection::create(std::move(stream), wire::kMaxHandshakePayload);
  connections_[id] = {conn, std::move(stranger)};
  state_.on_connected(id, conn->remote_host(), random_nonce());
  // Counted from now, not from the last frame: heartbeats do not buy a stranger time.
  conn->set_deadline(options_.hello_timeout);
  conn->start({
      [this, id](wire::Message message) {
        state_.advance_clock(now_ms());
        state_.on_message(id, message);
        apply_effects();
      },
      [this, id, host = conn->remote_host()](const Status& why) {
        if (!connections_.erase(id)) return;  // we closed it ourselves
        if (why.code == Errc::protocol)
          if (uint64_t events = dropped_log_.admit())
            log().warn("dropped {} connection(s) for malformed traffic; last {} from {}: {}", events, id, host,
                       why.message);
        state_.on_disconnected(id, why.message);
        apply_effects();
      },
  });
  apply_effects();  // the auth challenge: the master speaks first
}

void MasterServer::apply_effects() {
  Effects effects = state_.take_effects();
  for (auto& send : effects.sends)
    if (auto it = connections_.find(send.conn); it != connections_.end()) it->second.conn->send(send.message);
  for (auto& d : effects.deadlines) {
    if (auto it = connections_.find(d.conn); it != connections_.end()) {
      // Its hello was accepted (the only time the state sets a deadline): the handshake is over.
      Served& served = it->second;
      served.stranger.reset();
      served.conn->set_deadline(std::chrono::milliseconds(0));
      served.conn->set_max_payload(wire::kMaxControlPayload);
      // A peer that was only stopped reads this when it resumes: evicted, not a lost master.
      served.conn->set_receive_timeout(
          std::chrono::milliseconds(d.timeout_ms),
          wire::Kick{.code = static_cast<uint32_t>(Errc::kicked),
                     .reason = "evicted: the master heard nothing from this peer for its heartbeat deadline (" +
                               std::to_string(d.timeout_ms) + " ms); connect again to rejoin as a newcomer"});
      // Heartbeats at a quarter of the deadline: three may be lost before either side gives up.
      served.conn->set_heartbeat(std::chrono::milliseconds(std::max<uint32_t>(d.timeout_ms / 4, 25)));
    }
  }
  for (auto& check : effects.reachability_checks) check_reachability(check);
  for (auto& c : effects.closes) {
    auto it = connections_.find(c.conn);
    if (it == connections_.end()) continue;
    auto conn = it->second.conn;
    connections_.erase(it);
    conn->close(Status::failure(Errc::kicked, c.reason), c.last);
  }
}

// One TCP dial to a newcomer's advertised address, closed as soon as it connects: no bytes
// go, so the peer's listener drops it like any connection that never says hello.
void MasterServer::check_reachability(const Effects::CheckReachability& check) {
  auto answer = [this, peer = check.peer](bool reachable) {
    if (stopped_) return;
    state_.advance_clock(now_ms());
    state_.on_reachability(peer, reachable);
    apply_effects();
  };
  std::error_code ec;
  const asio::ip::address address = asio::ip::make_address(check.host, ec);
  // A host name: the peers resolve it themselves, and their links tell.
  if (ec) return asio::post(io_, [answer] { answer(true); });
  struct Dial {
    asio::ip::tcp::socket socket;
    asio::steady_timer timer;
  };
  auto dial = std::make_shared<Dial>(Dial{asio::ip::tcp::socket(io_), asio::steady_timer(io_)});
  dial->timer.expires_after(std::chrono::milliseconds(check.timeout_ms));
  dial->timer.async_wait([dial](const std::error_code& e) {
    std::error_code ignored;
    if (!e) dial->socket.close(ignored);  // the connect then ends with operation_aborted
  });
  dial->socket.async_connect({address, check.port}, [dial, answer](const std::error_code& e) {
    dial->timer.cancel();
    std::error_code ignored;
    dial->socket.close(ignored);
    answer(!e);
  });
}

}  // namespace ferry::master
