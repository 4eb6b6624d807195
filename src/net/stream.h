// A connected, ordered byte stream: the seam between ferry's protocols and
// the transport under them. Backends (plain TCP, TLS) are siblings with the
// same small surface, so master/ and peer/ never know which one they use.
//
// Two modes. Asynchronous (control connections, handshakes): a stream runs on
// its own strand (executor()); start operations only from that strand; at
// most one read and one write outstanding; handlers run on the strand.
// Blocking (the bulk data path, after its handshake): one thread reads and
// one thread writes, each blocking in the kernel; a large transfer is then a
// single syscall instead of a reactor round trip per socket-buffer's worth.
#pragma once

#include <functional>
#include <memory>
#include <span>
#include <string>
#include <system_error>

#include <asio/any_io_executor.hpp>
#include <asio/buffer.hpp>

#include "core/inline_function.h"

namespace ferry::net {

// Move-only and allocation-free: one runs per chunk read and per chunk written.
using IoHandler = InlineFunction<void(std::error_code, size_t), 96>;

class Stream {
 public:
  virtual ~Stream() = default;

  virtual asio::any_io_executor executor() = 0;
  // Completes when `buffer` is full, or with an error.
  virtual void read_exact(asio::mutable_buffer buffer, IoHandler handler) = 0;
  // Completes with at least one byte in `buffer` (as many as were there), or with an error.
  virtual void read_some(asio::mutable_buffer buffer, IoHandler handler) = 0;
  // Completes when every byte of every buffer was handed to the transport.
  virtual void write_all(std::span<const asio::const_buffer> buffers, IoHandler handler) = 0;
  // Cancels outstanding operations (their handlers see an error) and closes.
  // Idempotent; call on the strand.
  virtual void close() = 0;
  // Peer address as text (for logs and for the master's view of a peer).
  virtual std::string remote_host() const = 0;

  // --- blocking mode ---
  // Switch once, on the strand, with nothing outstanding; from then on only
  // the calls below are used.
  virtual void enter_blocking_mode() = 0;
  // Each may be called by one thread at a time (one reader, one writer).
  virtual std::error_code read_exact_blocking(asio::mutable_buffer buffer) = 0;
  virtual std::error_code write_all_blocking(std::span<const asio::const_buffer> buffers) = 0;
  // The descriptor, for poll(): only to wait for readiness or a hang-up.
  virtual int native_handle() = 0;
  // Any thread: blocked calls return an error, later ones fail at once. Idempotent.
  virtual void abort() = 0;

  // Reads in place, where the backend holds received bytes in memory the
  // reader may see (shared memory): the next `size` bytes, 8-byte aligned,
  // unchanged until release_borrowed(size). nullptr with no error: not
  // offered for these bytes (use read_exact_blocking); always so for sockets.
  virtual const uint8_t* borrow_blocking(size_t /*size*/, std::error_code& /*ec*/) { return nullptr; }
  virtual void release_borrowed(size_t /*size*/) {}
};

}  // namespace ferry::net
