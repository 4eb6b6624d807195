#include "net/shm_stream.h"

#include <poll.h>

#include <asio/post.hpp>

namespace ferry::net {
namespace {

std::error_code wrong_direction() { return std::make_error_code(std::errc::operation_not_supported); }

// True while the connection has not hung up (nothing else ever arrives on it).
bool connection_open(int fd) {
  pollfd p{fd, POLLRDHUP, 0};
  int n = ::poll(&p, 1, 0);
  return n == 0 || (n > 0 && !(p.revents & (POLLRDHUP | POLLHUP | POLLERR | POLLNVAL)));
}

}  // namespace

ShmStream::ShmStream(std::shared_ptr<Stream> connection, std::shared_ptr<ShmRing> ring)
    : connection_(std::move(connection)), ring_(std::move(ring)) {
  int fd = connection_->native_handle();
  ring_->set_alive([fd] { return connection_open(fd); });
}

ShmStream::~ShmStream() { ring_->close(); }

void ShmStream::read_exact(asio::mutable_buffer, IoHandler handler) {
  asio::post(executor(), [h = std::move(handler)]() mutable { h(wrong_direction(), 0); });
}

void ShmStream::read_some(asio::mutable_buffer, IoHandler handler) {
  asio::post(executor(), [h = std::move(handler)]() mutable { h(wrong_direction(), 0); });
}

void ShmStream::write_all(std::span<const asio::const_buffer>, IoHandler handler) {
  asio::post(executor(), [h = std::move(handler)]() mutable { h(wrong_direction(), 0); });
}

void ShmStream::close() {
  ring_->close();
  connection_->close();
}

void ShmStream::enter_blocking_mode() { connection_->enter_blocking_mode(); }

std::error_code ShmStream::read_exact_blocking(asio::mutable_buffer buffer) {
  if (ring_->role() != ShmRing::Role::reader) return wrong_direction();
  return ring_->read(buffer.data(), buffer.size());
}

std::error_code ShmStream::write_all_blocking(std::span<const asio::const_buffer> buffers) {
  if (ring_->role() != ShmRing::Role::writer) return wrong_direction();
  for (const auto& b : buffers)
    if (auto ec = ring_->write(b.data(), b.size())) return ec;
  return {};
}

void ShmStream::abort() {
  ring_->close();
  connection_->abort();  // the far side sees the hang-up even if it is not looking at the ring
}

const uint8_t* ShmStream::borrow_blocking(size_t size, std::error_code& ec) {
  if (ring_->role() != ShmRing::Role::reader) return nullptr;
  return ring_->borrow(size, ec);
}

void ShmStream::release_borrowed(size_t size) { ring_->release(size); }

}  // namespace ferry::net
