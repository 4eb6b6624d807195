// A connected, ordered byte stream: the seam between ferry's protocols and
// the transport under them. Backends (plain TCP, TLS) are siblings with the
// same small surface, so master/ and peer/ never know which one they use.
//
// Threading: a stream runs on its own strand (executor()). Start operations
// only from that strand (asio::post/dispatch to it); at most one read and one
// write may be outstanding at a time. Handlers run on the strand.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <system_error>

#include <asio/any_io_executor.hpp>
#include <asio/buffer.hpp>

namespace ferry::net {

using IoHandler = std::function<void(std::error_code, size_t)>;

class Stream {
 public:
  virtual ~Stream() = default;

  virtual asio::any_io_executor executor() = 0;
  // Completes when `buffer` is full, or with an error.
  virtual void read_exact(asio::mutable_buffer buffer, IoHandler handler) = 0;
  // Completes when every byte of every buffer was handed to the transport.
  virtual void write_all(std::span<const asio::const_buffer> buffers, IoHandler handler) = 0;
  // Cancels outstanding operations (their handlers see an error) and closes.
  // Idempotent; call on the strand.
  virtual void close() = 0;
  // Peer address as text (for logs and for the master's view of a peer).
  virtual std::string remote_host() const = 0;
};

}  // namespace ferry::net
