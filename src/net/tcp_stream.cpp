#include "net/tcp_stream.h"

#include <sys/socket.h>
#include <sys/uio.h>

#include <array>
#include <cerrno>

#include <asio/bind_executor.hpp>
#include <asio/read.hpp>
#include <asio/write.hpp>

#include "net/remote_host.h"
#include "net/strand_socket.h"

namespace ferry::net {

TcpStream::TcpStream(asio::ip::tcp::socket socket)
    : strand_(asio::make_strand(socket.get_executor())),
      socket_(rebind(std::move(socket), strand_)),
      remote_host_(remote_host_of(socket_)),
      fd_(socket_.native_handle()) {}

void TcpStream::read_exact(asio::mutable_buffer buffer, IoHandler handler) {
  asio::async_read(socket_, buffer, asio::bind_executor(strand_, std::move(handler)));
}

void TcpStream::read_some(asio::mutable_buffer buffer, IoHandler handler) {
  socket_.async_read_some(buffer, asio::bind_executor(strand_, std::move(handler)));
}

void TcpStream::write_all(std::span<const asio::const_buffer> buffers, IoHandler handler) {
  // A gather write: a chunk's header and its payload leave in one syscall.
  // The array travels by value inside the operation; unused slots stay empty.
  std::array<asio::const_buffer, 4> list{};
  std::copy_n(buffers.begin(), std::min(buffers.size(), list.size()), list.begin());
  asio::async_write(socket_, list, asio::bind_executor(strand_, std::move(handler)));
}

void TcpStream::close() {
  std::error_code ignored;
  socket_.shutdown(asio::socket_base::shutdown_both, ignored);
  socket_.close(ignored);
}

void TcpStream::enter_blocking_mode() {
  std::error_code ignored;
  socket_.native_non_blocking(false, ignored);
}

std::error_code TcpStream::read_exact_blocking(asio::mutable_buffer buffer) {
  auto* p = static_cast<uint8_t*>(buffer.data());
  size_t left = buffer.size();
  while (left > 0) {
    // MSG_WAITALL: the kernel gathers the whole chunk before it wakes us.
    ssize_t n = ::recv(fd_, p, left, MSG_WAITALL);
    if (n > 0) {
      p += n;
      left -= static_cast<size_t>(n);
    } else if (n == 0) {
      return asio::error::eof;
    } else if (errno != EINTR) {
      return {errno, std::system_category()};
    }
  }
  return {};
}

std::error_code TcpStream::write_all_blocking(std::span<const asio::const_buffer> buffers) {
  std::array<iovec, 4> iov{};
  size_t count = std::min(buffers.size(), iov.size());
  for (size_t i = 0; i < count; ++i)
    iov[i] = {const_cast<void*>(buffers[i].data()), buffers[i].size()};
  iovec* next = iov.data();
  while (count > 0) {
    msghdr msg{};
    msg.msg_iov = next;
    msg.msg_iovlen = count;
    ssize_t n = ::sendmsg(fd_, &msg, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      return {errno, std::system_category()};
    }
    auto sent = static_cast<size_t>(n);
    while (count > 0 && sent >= next->iov_len) {  // drop the buffers sent in full
      sent -= next->iov_len;
      ++next;
      --count;
    }
    if (count > 0) {
      next->iov_base = static_cast<uint8_t*>(next->iov_base) + sent;
      next->iov_len -= sent;
    }
  }
  return {};
}

void TcpStream::abort() {
  // shutdown(), not close(): blocked calls wake with an error while the
  // descriptor stays valid (a closed number could be reused under them).
  ::shutdown(fd_, SHUT_RDWR);
}

}  // namespace ferry::net
