// A TCP listener bound to the first free port of a range, accepting until
// stopped. Each accepted socket must first get a pass from the listener's
// StrangerGate (or it is closed at once); it then goes to the callback raw,
// with its pass: the owner decides which Transport wraps it, with what
// deadline, and releases the pass when the connection has proved itself.
#pragma once

#include <functional>
#include <memory>

#include <asio/io_context.hpp>
#include <asio/ip/tcp.hpp>
#include <asio/steady_timer.hpp>

#include "core/error.h"
#include "core/log_throttle.h"
#include "net/stranger_gate.h"

namespace ferry::net {

class Listener : public std::enable_shared_from_this<Listener> {
 public:
  using OnAccept = std::function<void(asio::ip::tcp::socket, std::shared_ptr<StrangerGate::Pass>)>;

  // Binds host:[port_min..port_max] (0/0: any free port). Throws Error
  // (Errc::connect) when no port in the range can be bound, Errc::invalid_argument
  // for a host that does not resolve. "::" listens dual-stack (IPv4 arrives as
  // v4-mapped; streams report it as plain IPv4), or on 0.0.0.0 where the
  // system has no IPv6.
  static std::shared_ptr<Listener> bind(asio::any_io_executor executor, const std::string& host,
                                        uint16_t port_min, uint16_t port_max);

  uint16_t port() const { return port_; }
  // The address it is bound to ("::" or "0.0.0.0" when unspecified).
  const asio::ip::address& address() const { return address_; }
  // Whether a neighbour can reach it over IPv4 / IPv6 (unspecified "::" takes both).
  bool takes_v4() const { return address_.is_v4() || (address_.is_unspecified() && dual_stack_); }
  bool takes_v6() const { return address_.is_v6(); }
  void start(std::shared_ptr<StrangerGate> gate, OnAccept on_accept);
  void stop();  // thread-safe

 private:
  explicit Listener(asio::any_io_executor executor);
  void accept_next();

  asio::ip::tcp::acceptor acceptor_;
  asio::steady_timer retry_timer_;
  OnAccept on_accept_;
  std::shared_ptr<StrangerGate> gate_;
  LogThrottle failure_log_;
  uint16_t port_ = 0;
  asio::ip::address address_;
  bool dual_stack_ = false;
  bool stopped_ = false;
};

}  // namespace ferry::net
