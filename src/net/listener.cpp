#include "net/listener.h"

#include <asio/ip/address.hpp>
#include <asio/ip/v6_only.hpp>
#include <asio/post.hpp>
#include "core/log.h"

#include "net/resolve.h"

namespace ferry::net {

Listener::Listener(asio::any_io_executor executor)
    : acceptor_(executor), retry_timer_(executor) {}

std::shared_ptr<Listener> Listener::bind(asio::any_io_executor executor, const std::string& host,
                                         uint16_t port_min, uint16_t port_max) {
  if (port_max < port_min)
    throw Error(Errc::invalid_argument, "port range " + std::to_string(port_min) + ".." +
                                            std::to_string(port_max) + " is empty");
  asio::ip::address address = resolve_one_address(executor, host);
  std::shared_ptr<Listener> listener(new Listener(executor));
  const bool dual_stack = address.is_v6() && address.is_unspecified();
  if (dual_stack) {
    std::error_code ec;
    listener->acceptor_.open(asio::ip::tcp::v6(), ec);
    if (ec) {  // a kernel without IPv6: both families means IPv4 here
      log().info("listening on 0.0.0.0 instead of [::]: {}", ec.message());
      address = asio::ip::address_v4::any();
    }
    listener->acceptor_.close(ec);
  }
  listener->address_ = address;
  listener->dual_stack_ = address.is_v6() && address.is_unspecified();
  std::error_code last;
  for (uint32_t port = port_min; port <= port_max; ++port) {
    asio::ip::tcp::endpoint endpoint(address, static_cast<uint16_t>(port));
    std::error_code ec;
    listener->acceptor_.close(ec);
    listener->acceptor_.open(endpoint.protocol(), ec);
    // Off where the system allows it (Linux's default, net.ipv6.bindv6only=0, too): one socket, both families.
    if (!ec && listener->dual_stack_) {
      std::error_code v6_only;
      listener->acceptor_.set_option(asio::ip::v6_only(false), v6_only);
      if (v6_only) listener->dual_stack_ = false;
    }
    if (!ec) listener->acceptor_.set_option(asio::socket_base::reuse_address(true), ec);
    if (!ec) listener->acceptor_.bind(endpoint, ec);
    if (!ec) listener->acceptor_.listen(asio::socket_base::max_listen_connections, ec);
    if (!ec) {
      listener->port_ = listener->acceptor_.local_endpoint().port();
      return listener;
    }
    last = ec;
  }
  throw Error(Errc::connect, "cannot listen on " + host + " ports " + std::to_string(port_min) + ".." +
                                 std::to_string(port_max) + ": " + last.message());
}

void Listener::start(std::shared_ptr<StrangerGate> gate, OnAccept on_accept) {
  gate_ = std::move(gate);
  on_accept_ = std::move(on_accept);
  asio::post(acceptor_.get_executor(), [self = shared_from_this()] { self->accept_next(); });
}

void Listener::stop() {
  asio::post(acceptor_.get_executor(), [self = shared_from_this()] {
    self->stopped_ = true;
    std::error_code ignored;
    self->acceptor_.close(ignored);
    self->retry_timer_.cancel();
    self->on_accept_ = nullptr;
  });
}

void Listener::accept_next() {
  if (stopped_) return;
  acceptor_.async_accept([self = shared_from_this()](std::error_code ec, asio::ip::tcp::socket socket) {
    if (self->stopped_) return;
    if (ec) {
      // Out of file descriptors and the like: back off instead of spinning.
      if (uint64_t events = self->failure_log_.admit())
        log().warn("accept failed {} time(s): {}; retrying every 100 ms", events, ec.message());
      self->retry_timer_.expires_after(std::chrono::milliseconds(100));
      self->retry_timer_.async_wait([self](std::error_code) { self->accept_next(); });
      return;
    }
    std::error_code peer_ec;
    auto source = socket.remote_endpoint(peer_ec);
    // Gone already, or over a cap: closed here, before it costs a read or a timer.
    if (!peer_ec && self->on_accept_)
      if (auto pass = self->gate_->admit(source.address())) self->on_accept_(std::move(socket), std::move(pass));
    self->accept_next();
  });
}

}  // namespace ferry::net
