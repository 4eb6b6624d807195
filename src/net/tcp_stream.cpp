#include "net/tcp_stream.h"

#include <array>

#include <asio/bind_executor.hpp>
#include <asio/read.hpp>
#include <asio/write.hpp>

namespace ferry::net {
namespace {

asio::ip::tcp::socket rebind(asio::ip::tcp::socket socket,
                             const asio::strand<asio::any_io_executor>& strand) {
  auto protocol = socket.local_endpoint().protocol();
  asio::ip::tcp::socket out(strand);
  out.assign(protocol, socket.release());
  return out;
}

std::string host_of(const asio::ip::tcp::socket& socket) {
  std::error_code ec;
  auto remote = socket.remote_endpoint(ec);
  if (ec) return "?";
  auto address = remote.address();
  if (address.is_v6() && address.to_v6().is_v4_mapped())
    return asio::ip::make_address_v4(asio::ip::v4_mapped, address.to_v6()).to_string();
  return address.to_string();
}

}  // namespace

TcpStream::TcpStream(asio::ip::tcp::socket socket)
    : strand_(asio::make_strand(socket.get_executor())),
      socket_(rebind(std::move(socket), strand_)),
      remote_host_(host_of(socket_)) {}

void TcpStream::read_exact(asio::mutable_buffer buffer, IoHandler handler) {
  asio::async_read(socket_, buffer, asio::bind_executor(strand_, std::move(handler)));
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

}  // namespace ferry::net
