// A ring link's connection whose bytes go through a shared-memory ring
// (shm_ring.h) while its TCP (or TLS) connection stays open beside it: the
// connection authenticated the two sides, named the ring, and its closing is
// how each side learns that the other died or gave up.
//
// One-way, like a ring link's connection: the dialer writes, the acceptor
// reads; the other direction's blocking call fails at once. Blocking mode
// only: it is made after the handshake and used by a lane's thread.
//
// Threading: as Stream (one reader or one writer thread; abort() from any).
#pragma once

#include <memory>

#include "net/shm_ring.h"
#include "net/stream.h"

namespace ferry::net {

class ShmStream final : public Stream {
 public:
  ShmStream(std::shared_ptr<Stream> connection, std::shared_ptr<ShmRing> ring);
  ~ShmStream() override;

  asio::any_io_executor executor() override { return connection_->executor(); }
  // Asynchronous reads and writes belong to the handshake, which is over.
  void read_exact(asio::mutable_buffer buffer, IoHandler handler) override;
  void read_some(asio::mutable_buffer buffer, IoHandler handler) override;
  void write_all(std::span<const asio::const_buffer> buffers, IoHandler handler) override;
  void close() override;
  std::string remote_host() const override { return connection_->remote_host(); }

  void enter_blocking_mode() override;
  std::error_code read_exact_blocking(asio::mutable_buffer buffer) override;
  std::error_code write_all_blocking(std::span<const asio::const_buffer> buffers) override;
  // The connection's descriptor: it hangs up when the far side goes.
  int native_handle() override { return connection_->native_handle(); }
  void abort() override;
  const uint8_t* borrow_blocking(size_t size, std::error_code& ec) override;
  void release_borrowed(size_t size) override;

 private:
  std::shared_ptr<Stream> connection_;
  std::shared_ptr<ShmRing> ring_;
};

}  // namespace ferry::net
