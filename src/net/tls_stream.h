// TLS backend of Stream, the sibling of TcpStream with the same two modes.
//
// Async mode (handshakes, control connections): Asio's ssl::stream on the
// stream's strand, one read and one write outstanding at most, as TcpStream.
//
// Blocking mode (the bulk path): OpenSSL runs straight on the descriptor
// through a buffered BIO (tls_fd_bio.h). An SSL object is not thread-safe, so
// unlike TcpStream a TlsStream must not be read by one thread while another
// writes it: ferry never does (an out-lane only writes, an in-lane only
// reads, a fetch or serve thread does both from one thread). Concurrent use
// is caught and fails with an error instead of corrupting the session.
// Nothing here makes OpenSSL write while reading: session tickets are off and
// ferry never requests a key update.
//
// abort() may come from any thread at any time: it only sets a flag and
// shuts the descriptor down (never touches the SSL object); a blocked
// SSL_read/SSL_write then sees EOF/EPIPE in the BIO and returns.
#pragma once

#include <atomic>
#include <memory>

#include <asio/ip/tcp.hpp>
#include <asio/ssl/context.hpp>
#include <asio/ssl/stream.hpp>
#include <asio/strand.hpp>

#include "net/stream.h"
#include "net/tls_fd_bio.h"

namespace ferry::net {

class TlsStream final : public Stream {
 public:
  // Takes a connected socket (moved onto a fresh strand of its executor). The
  // handshake is the transport's business (handshake() below), before use.
  TlsStream(asio::ip::tcp::socket socket, std::shared_ptr<asio::ssl::context> context);

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

  // For the transport, on the strand.
  asio::ssl::stream<asio::ip::tcp::socket>& ssl() { return ssl_; }

 private:
  // One TLS record's worth of plaintext: small buffers are gathered up to it.
  static constexpr size_t kRecordPlaintext = 16 * 1024;

  std::error_code ssl_write(const uint8_t* data, size_t size);
  std::error_code last_error(int ssl_result, bool writing);

  std::shared_ptr<asio::ssl::context> context_;  // outlives ssl_ (declared first)
  FdBioState bio_state_;                         // outlives ssl_, which owns the BIO over it
  asio::strand<asio::any_io_executor> strand_;
  asio::ssl::stream<asio::ip::tcp::socket> ssl_;
  std::string remote_host_;
  int fd_ = -1;  // fixed at construction; closed only by ssl_'s socket destructor
  std::atomic<bool> aborted_{false};
  // Blocking mode: set once by enter_blocking_mode, read by the I/O threads after.
  bool blocking_ = false;
  std::error_code switch_error_;  // the switch failed: every blocking call reports it
  // Threads inside SSL_read/SSL_write right now (must never exceed one).
  std::atomic<int> users_{0};
  // Write side's plaintext gathering buffer (only the writing thread).
  std::unique_ptr<uint8_t[]> staging_;
};

}  // namespace ferry::net
