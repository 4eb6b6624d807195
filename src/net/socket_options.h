// Options every ferry TCP socket gets, and the per-communicator tuning of p2p sockets.
#pragma once

#include <string>

#include <asio/ip/tcp.hpp>

#include "core/error.h"

namespace ferry::net {

// TCP_NODELAY: control replies are tiny and must not wait for delayed ACKs
// (PCCL's ~44 ms floor per operation on loopback comes from exactly this).
// SO_KEEPALIVE as a last resort under ferry's own heartbeats.
void apply_socket_options(asio::ip::tcp::socket& socket);

struct SocketTuning {
  // TCP_CONGESTION for this socket ("bbr", "cubic", ...); empty: the system's default.
  // Lossy long links are where this matters: cubic collapses on random loss, bbr does not.
  std::string congestion_control;
};

Status apply_tuning(asio::ip::tcp::socket& socket, const SocketTuning& tuning);

// Errc::invalid_argument when this process may not use `name` (checked on a scratch socket).
Status check_congestion_control(const std::string& name);

// TCP_CONGESTION of a socket, set (false when refused) and read (empty when unknown).
bool set_congestion_control(int fd, const std::string& name);
std::string congestion_control_of(int fd);

// TCP_NOTSENT_LOWAT: at most about `bytes` written but unsent stay in the
// socket. False where the kernel lacks it (before 3.12): only pacing suffers.
bool limit_unsent(int fd, uint32_t bytes);
// SO_LINGER 0: close() drops what is queued and resets the connection, so a
// finished measurement leaves no bytes draining into the next one.
bool reset_on_close(int fd);

}  // namespace ferry::net
