#include "net/tls_stream.h"

#include <openssl/err.h>
#include <openssl/ssl.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstring>

#include <asio/bind_executor.hpp>
#include <asio/read.hpp>
#include <asio/ssl/error.hpp>
#include <asio/write.hpp>

#include "net/remote_host.h"
#include "net/strand_socket.h"

namespace ferry::net {
namespace {

// Counts the threads inside the SSL object; a second one is refused, not let in.
class SoleUser {
 public:
  explicit SoleUser(std::atomic<int>& users) : users_(users), sole_(users.fetch_add(1) == 0) {}
  ~SoleUser() { users_.fetch_sub(1); }
  bool sole() const { return sole_; }

 private:
  std::atomic<int>& users_;
  bool sole_;
};

const std::error_code kConcurrentUse = std::make_error_code(std::errc::device_or_resource_busy);
const std::error_code kNotBlocking = std::make_error_code(std::errc::operation_not_permitted);

}  // namespace

TlsStream::TlsStream(asio::ip::tcp::socket socket, std::shared_ptr<asio::ssl::context> context)
    : context_(std::move(context)),
      strand_(asio::make_strand(socket.get_executor())),
      ssl_(rebind(std::move(socket), strand_), *context_),
      remote_host_(remote_host_of(ssl_.next_layer())),
      fd_(ssl_.next_layer().native_handle()) {}

void TlsStream::read_exact(asio::mutable_buffer buffer, IoHandler handler) {
  asio::async_read(ssl_, buffer, asio::bind_executor(strand_, std::move(handler)));
}

void TlsStream::read_some(asio::mutable_buffer buffer, IoHandler handler) {
  ssl_.async_read_some(buffer, asio::bind_executor(strand_, std::move(handler)));
}

void TlsStream::write_all(std::span<const asio::const_buffer> buffers, IoHandler handler) {
  // Control frames are one buffer; Asio's TLS writes take one buffer per record anyway.
  std::array<asio::const_buffer, 4> list{};
  std::copy_n(buffers.begin(), std::min(buffers.size(), list.size()), list.begin());
  asio::async_write(ssl_, list, asio::bind_executor(strand_, std::move(handler)));
}

void TlsStream::close() {
  if (blocking_) return abort();  // blocked threads may still hold the descriptor's number
  // No close_notify: the frames already written are complete, and the other
  // side treats any end of the stream as the end of the connection.
  std::error_code ignored;
  ssl_.lowest_layer().shutdown(asio::socket_base::shutdown_both, ignored);
  ssl_.lowest_layer().close(ignored);
}

void TlsStream::enter_blocking_mode() {
  if (blocking_) return;
  std::error_code ignored;
  ssl_.lowest_layer().native_non_blocking(false, ignored);
  SSL* ssl = ssl_.native_handle();
  BIO* pair = SSL_get_rbio(ssl);  // Asio's BIO pair: its internal half
  // Ciphertext Asio already fed in but OpenSSL has not read yet moves to the
  // new BIO. (At the switch ferry's protocols are quiet, so this is normally
  // empty; bytes held in Asio's own input buffer could not be recovered.)
  size_t carried = BIO_ctrl_pending(pair);
  if (BIO_ctrl_wpending(pair) != 0) {
    // Output that never reached the socket: the stream is unusable.
    switch_error_ = std::make_error_code(std::errc::protocol_error);
  } else {
    bio_state_.fd = fd_;
    bio_state_.carried_in.resize(carried);
    if (carried > 0 && BIO_read(pair, bio_state_.carried_in.data(), static_cast<int>(carried)) != static_cast<int>(carried))
      switch_error_ = std::make_error_code(std::errc::protocol_error);
    BIO* bio = make_fd_bio(&bio_state_);
    if (!bio)
      switch_error_ = std::make_error_code(std::errc::not_enough_memory);
    else
      SSL_set_bio(ssl, bio, bio);  // frees the pair's internal half
  }
  // Asio's modes suit its BIO pair, not this path: here SSL_write takes a
  // whole buffer in one call, and the record buffers stay allocated instead
  // of being freed and allocated again around every record.
  SSL_clear_mode(ssl, SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_RELEASE_BUFFERS);
  blocking_ = true;
}

std::error_code TlsStream::read_exact_blocking(asio::mutable_buffer buffer) {
  if (!blocking_) return kNotBlocking;
  if (switch_error_) return switch_error_;
  if (aborted_.load()) return asio::error::operation_aborted;
  SoleUser user(users_);
  if (!user.sole()) return kConcurrentUse;
  auto* p = static_cast<uint8_t*>(buffer.data());
  size_t left = buffer.size();
  SSL* ssl = ssl_.native_handle();
  while (left > 0) {
    ERR_clear_error();
    size_t n = 0;
    int r = SSL_read_ex(ssl, p, left, &n);
    if (r <= 0) return last_error(r, false);
    p += n;
    left -= n;
  }
  return {};
}

std::error_code TlsStream::ssl_write(const uint8_t* data, size_t size) {
  while (size > 0) {  // whole, even if partial writes were left on
    ERR_clear_error();
    size_t written = 0;
    int r = SSL_write_ex(ssl_.native_handle(), data, size, &written);
    if (r <= 0) return last_error(r, true);
    data += written;
    size -= written;
  }
  return {};
}

std::error_code TlsStream::write_all_blocking(std::span<const asio::const_buffer> buffers) {
  if (!blocking_) return kNotBlocking;
  if (switch_error_) return switch_error_;
  if (aborted_.load()) return asio::error::operation_aborted;
  SoleUser user(users_);
  if (!user.sole()) return kConcurrentUse;
  // Every record carries 22 bytes of overhead and costs a cipher call: a
  // chunk header alone in a record would waste both. Small pieces (and the
  // start of the next buffer) are gathered into one full record; whole
  // records of a large buffer go straight from the caller's memory.
  if (!staging_) staging_ = std::make_unique<uint8_t[]>(kRecordPlaintext);
  size_t staged = 0;
  for (size_t i = 0; i < buffers.size(); ++i) {
    const auto* p = static_cast<const uint8_t*>(buffers[i].data());
    size_t left = buffers[i].size();
    bool last = i + 1 == buffers.size();
    while (left > 0) {
      if (staged > 0 || left < kRecordPlaintext) {
        size_t take = std::min(left, kRecordPlaintext - staged);
        std::memcpy(staging_.get() + staged, p, take);
        staged += take;
        p += take;
        left -= take;
        if (staged == kRecordPlaintext) {
          if (auto ec = ssl_write(staging_.get(), staged)) return ec;
          staged = 0;
        }
      } else {
        // Whole records; a short tail waits in staging for the next buffer, unless this is the last.
        size_t direct = last ? left : left - left % kRecordPlaintext;
        if (auto ec = ssl_write(p, direct)) return ec;
        p += direct;
        left -= direct;
      }
    }
  }
  if (staged > 0)
    if (auto ec = ssl_write(staging_.get(), staged)) return ec;
  if (!flush_fd_bio(bio_state_)) return {bio_state_.write_errno, std::system_category()};
  return {};
}

std::error_code TlsStream::last_error(int ssl_result, bool writing) {
  int kind = SSL_get_error(ssl_.native_handle(), ssl_result);
  unsigned long queued = ERR_get_error();
  ERR_clear_error();
  // What the socket said comes first: a hang-up or an abort reads as one, as with TcpStream.
  if (writing && bio_state_.write_errno != 0) return {bio_state_.write_errno, std::system_category()};
  if (!writing && bio_state_.read_errno != 0) return {bio_state_.read_errno, std::system_category()};
  if (!writing && bio_state_.eof) return asio::error::eof;
  if (kind == SSL_ERROR_ZERO_RETURN) return asio::error::eof;  // close_notify
  if (aborted_.load()) return asio::error::operation_aborted;
  if (kind == SSL_ERROR_SSL && queued != 0)
    return {static_cast<int>(queued), asio::error::get_ssl_category()};
  return asio::ssl::error::unexpected_result;
}

void TlsStream::abort() {
  aborted_.store(true);
  // shutdown(), not close(): blocked calls wake with an error while the
  // descriptor stays valid (a closed number could be reused under them).
  ::shutdown(fd_, SHUT_RDWR);
}

}  // namespace ferry::net
