// Plain TCP backend of Stream.
#pragma once

#include <asio/ip/tcp.hpp>
#include <asio/strand.hpp>

#include "net/stream.h"

namespace ferry::net {

class TcpStream final : public Stream {
 public:
  // Takes a connected socket; moves it onto a fresh strand of its executor.
  explicit TcpStream(asio::ip::tcp::socket socket);

  asio::any_io_executor executor() override { return strand_; }
  void read_exact(asio::mutable_buffer buffer, IoHandler handler) override;
  void read_some(asio::mutable_buffer buffer, IoHandler handler) override;
  void write_all(std::span<const asio::const_buffer> buffers, IoHandler handler) override;
  void close() override;
  std::string remote_host() const override { return remote_host_; }

  void enter_blocking_mode() override;
  std::error_code read_exact_blocking(asio::mutable_buffer buffer) override;
  std::error_code write_all_blocking(std::span<const asio::const_buffer> buffers) override;
  int native_handle() override { return fd_; }
  void abort() override;
  // Hands the socket over (on this stream's strand, with no read or write in flight): a relayed
  // lane's hop speaks one hello in frames, then carries another transport (peer/relay_service.h).
  // The stream is closed for good afterwards.
  asio::ip::tcp::socket release_socket() { return std::move(socket_); }

 private:
  asio::strand<asio::any_io_executor> strand_;
  asio::ip::tcp::socket socket_;
  std::string remote_host_;
  int fd_ = -1;  // fixed at construction; closed only by socket_'s destructor
};

}  // namespace ferry::net
