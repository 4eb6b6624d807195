// The BIO under a TLS stream in blocking mode: OpenSSL reads and writes the
// socket's descriptor directly, through a buffer on each side.
//
// Why not OpenSSL's socket BIO: it write()s without MSG_NOSIGNAL (a peer that
// hung up would SIGPIPE the process), and it costs one syscall per TLS record
// (16 KiB). Here ciphertext is gathered into a buffer of kFdBioBufferBytes and
// sent in one send(), and recv() fills a buffer of the same size that serves
// OpenSSL's small record-header and record-body reads: a bulk transfer moves
// a few hundred KiB per syscall, as plain TCP's gather write does.
//
// Why a BIO at all instead of kTLS: the handshake runs through Asio's BIO pair
// (async mode), and the kernel can only take over keys negotiated on a socket
// BIO; a later switch cannot enable it.
//
// Threading: the read side is used only by the thread inside SSL_read, the
// write side only by the thread inside SSL_write, and never both at once on
// one SSL object (see tls_stream.h). abort() on another thread only shuts the
// descriptor down; this BIO then sees EOF / EPIPE and fails.
#pragma once

#include <openssl/bio.h>

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

namespace ferry::net {

inline constexpr size_t kFdBioBufferBytes = 256 * 1024;


struct FdBioState {
  int fd = -1;
  // Ciphertext that arrived before the switch to this BIO (handed over from
  // Asio's BIO pair): served before the socket is read.
  std::vector<uint8_t> carried_in;
  size_t carried_pos = 0;

  // Read side: in_[in_pos_, in_end_) received and not yet consumed.
  std::unique_ptr<uint8_t[]> in;
  size_t in_pos = 0, in_end = 0;
  bool eof = false;  // the peer closed (or we shut down): no more bytes will come
  int read_errno = 0;

  // Write side: out_[0, out_len_) waiting to be sent.
  std::unique_ptr<uint8_t[]> out;
  size_t out_len = 0;
  int write_errno = 0;
};

// A BIO over `state` (borrowed: it must outlive the BIO, which the SSL object
// owns once set). Returns null when OpenSSL cannot allocate it.
BIO* make_fd_bio(FdBioState* state);

// Sends everything buffered on the write side. False (state->write_errno set) on failure.
bool flush_fd_bio(FdBioState& state);

}  // namespace ferry::net
