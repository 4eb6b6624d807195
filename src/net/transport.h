// Turns a connected TCP socket into a Stream, running whatever handshake the
// backend needs. One Transport per process role (master, communicator), the
// same for every connection of a run: TLS is on for all of them or for none.
#pragma once

#include <functional>
#include <memory>
#include <string>

#include <asio/ip/tcp.hpp>

#include "core/error.h"
#include "net/stream.h"

namespace ferry::net {

using StreamReady = std::function<void(Status, std::shared_ptr<Stream>)>;

class Transport {
 public:
  virtual ~Transport() = default;
  virtual std::string name() const = 0;
  // `ready` runs exactly once, on an executor of the socket, never inline.
  virtual void open_client(asio::ip::tcp::socket socket, StreamReady ready) = 0;
  virtual void open_server(asio::ip::tcp::socket socket, StreamReady ready) = 0;
};

std::shared_ptr<Transport> make_tcp_transport();

}  // namespace ferry::net
