#include "master/master_server.h"

#include <future>

#include <asio/post.hpp>
#include "core/log.h"

namespace ferry::master {

MasterServer::MasterServer(MasterServerOptions options)
    : options_(std::move(options)), state_(options_.limits, options_.secret) {
  if (!options_.transport) options_.transport = net::make_tcp_transport();
  listener_ = net::Listener::bind(io_.get_executor(), options_.listen_host, options_.listen_port,
                                  options_.listen_port);
}

MasterServer::~MasterServer() { stop(); }

void MasterServer::start() {
  if (started_) throw Error(Errc::invalid_usage, "the master is already running");
  if (stopped_) throw Error(Errc::invalid_usage, "the master was stopped; create a new one");
  started_ = true;
  listener_->start([this](asio::ip::tcp::socket socket) { on_accept(std::move(socket)); });
  thread_ = std::thread([this] {
    try {
      io_.run();
    } catch (const std::exception& e) {
      log().critical("master thread failed: {}", e.what());
    }
  });
  log().info("master listening on {}:{} ({})", options_.listen_host, port(), options_.transport->name());
}

void MasterServer::stop() {
  if (stopped_.exchange(true)) return;
  if (!started_) return;
  std::promise<void> closed;
  asio::post(io_, [this, &closed] {
    listener_->stop();
    for (auto& [id, conn] : connections_)
      conn->close(Status::failure(Errc::master_lost, "master shutting down"));
    connections_.clear();
    closed.set_value();
  });
  // Let the closes flush briefly; never wait on a stuck peer.
  closed.get_future().wait_for(std::chrono::seconds(1));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  io_.stop();
  if (thread_.joinable()) thread_.join();
  log().info("master stopped");
}

void MasterServer::on_accept(asio::ip::tcp::socket socket) {
  options_.transport->open_server(std::move(socket), [this](Status st, std::shared_ptr<net::Stream> stream) {
    asio::post(io_, [this, st, stream] { on_stream(st, stream); });
  });
}

void MasterServer::on_stream(const Status& status, std::shared_ptr<net::Stream> stream) {
  if (stopped_) return;
  if (!status.ok()) {
    log().warn("dropped an incoming connection: {}", status.message);
    return;
  }
  ConnId id = next_conn_++;
  auto conn = net::FrameConnection::create(std::move(stream), wire::kMaxHandshakePayload);
  connections_[id] = conn;
  state_.on_connected(id, conn->remote_host(), random_nonce());
  // Counted from now, not from the last frame: heartbeats do not buy a stranger time.
  conn->set_deadline(options_.hello_timeout);
  conn->start({
      [this, id](wire::Message message) {
        state_.on_message(id, message);
        apply_effects();
      },
      [this, id, host = conn->remote_host()](const Status& why) {
        if (!connections_.erase(id)) return;  // we closed it ourselves
        if (why.code == Errc::protocol)
          log().warn("dropped connection {} from {}: {}", id, host, why.message);
        state_.on_disconnected(id, why.message);
        apply_effects();
      },
  });
  apply_effects();  // the auth challenge: the master speaks first
}

void MasterServer::apply_effects() {
  Effects effects = state_.take_effects();
  for (auto& send : effects.sends)
    if (auto it = connections_.find(send.conn); it != connections_.end()) it->second->send(send.message);
  for (auto& d : effects.deadlines) {
    if (auto it = connections_.find(d.conn); it != connections_.end()) {
      // Its hello was accepted (the only time the state sets a deadline): the handshake is over.
      it->second->set_deadline(std::chrono::milliseconds(0));
      it->second->set_max_payload(wire::kMaxControlPayload);
      it->second->set_receive_timeout(std::chrono::milliseconds(d.timeout_ms));
      // Heartbeats at a quarter of the deadline: three may be lost before either side gives up.
      it->second->set_heartbeat(std::chrono::milliseconds(std::max<uint32_t>(d.timeout_ms / 4, 25)));
    }
  }
  for (auto& c : effects.closes) {
    auto it = connections_.find(c.conn);
    if (it == connections_.end()) continue;
    auto conn = it->second;
    connections_.erase(it);
    conn->close(Status::failure(Errc::kicked, c.reason), c.last);
  }
}

}  // namespace ferry::master
