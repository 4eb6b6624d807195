// How this library names the far end of a connection: an IPv4 peer that
// reached a dual-stack ("::") listener arrives as ::ffff:a.b.c.d, and is
// named a.b.c.d everywhere (the address a neighbour dials, the per-source
// caps on strangers, logs), as it would be on an IPv4 listener.
#pragma once

#include <string>

#include <asio/ip/address.hpp>
#include <asio/ip/tcp.hpp>

namespace ferry::net {

// `address`, an IPv4-mapped IPv6 address as the IPv4 address it stands for.
inline asio::ip::address unmapped(const asio::ip::address& address) {
  if (address.is_v6() && address.to_v6().is_v4_mapped())
    return asio::ip::make_address_v4(asio::ip::v4_mapped, address.to_v6());
  return address;
}

// The connected socket's remote address as text (unmapped), or "?" when the
// socket no longer has one.
inline std::string remote_host_of(const asio::ip::tcp::socket& socket) {
  std::error_code ec;
  auto remote = socket.remote_endpoint(ec);
  return ec ? "?" : unmapped(remote.address()).to_string();
}

}  // namespace ferry::net
