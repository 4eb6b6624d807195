// Options every ferry TCP socket gets.
#pragma once

#include <asio/ip/tcp.hpp>

namespace ferry::net {

// TCP_NODELAY: control replies are tiny and must not wait for delayed ACKs
// (PCCL's ~44 ms floor per operation on loopback comes from exactly this).
// SO_KEEPALIVE as a last resort under ferry's own heartbeats.
void apply_socket_options(asio::ip::tcp::socket& socket);

}  // namespace ferry::net
