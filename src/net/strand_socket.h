// What both stream backends (TcpStream, TlsStream) do with the socket they are
// given: move it onto the stream's own strand, so that every handler of the
// stream runs there.
#pragma once

#include <asio/ip/tcp.hpp>
#include <asio/strand.hpp>

namespace ferry::net {

// `socket`, rebound to `strand`: the same open descriptor, now on an object
// whose executor is the strand.
inline asio::ip::tcp::socket rebind(asio::ip::tcp::socket socket, const asio::strand<asio::any_io_executor>& strand) {
  auto protocol = socket.local_endpoint().protocol();
  asio::ip::tcp::socket out(strand);
  out.assign(protocol, socket.release());
  return out;
}

}  // namespace ferry::net
