#include "wan_sockets.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>

#include "netns.h"

namespace ferry::wan::test {
namespace {

// An IPv4 or IPv6 socket address; `len` is its size, 0 when `ip` is neither.
sockaddr_storage address(const std::string& ip, uint16_t port, socklen_t& len) {
  sockaddr_storage s{};
  auto* a4 = reinterpret_cast<sockaddr_in*>(&s);
  auto* a6 = reinterpret_cast<sockaddr_in6*>(&s);
  len = 0;
  if (::inet_pton(AF_INET, ip.c_str(), &a4->sin_addr) == 1) {
    a4->sin_family = AF_INET;
    a4->sin_port = htons(port);
    len = sizeof *a4;
  } else if (::inet_pton(AF_INET6, ip.c_str(), &a6->sin6_addr) == 1) {
    a6->sin6_family = AF_INET6;
    a6->sin6_port = htons(port);
    len = sizeof *a6;
  }
  return s;
}

}  // namespace

Fd listen_on(const Host& host, uint16_t port, const std::string& ip) {
  ScopedNetns in(host.netns);
  socklen_t len = 0;
  const sockaddr_storage a = address(ip.empty() ? host.ip : ip, port, len);
  REQUIRE(len > 0);
  Fd s(::socket(a.ss_family, SOCK_STREAM | SOCK_CLOEXEC, 0));
  REQUIRE(s.fd >= 0);
  const int one = 1;
  ::setsockopt(s.fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  REQUIRE(::bind(s.fd, reinterpret_cast<const sockaddr*>(&a), len) == 0);
  REQUIRE(::listen(s.fd, 8) == 0);
  return s;
}

Fd connect_from(const Host& from, const Host& to, uint16_t port, int timeout_ms, const std::string& ip) {
  socklen_t len = 0;
  const sockaddr_storage a = address(ip.empty() ? to.ip : ip, port, len);
  REQUIRE(len > 0);
  Fd s;
  {
    ScopedNetns in(from.netns);
    s.fd = ::socket(a.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  }
  REQUIRE(s.fd >= 0);
  if (::connect(s.fd, reinterpret_cast<const sockaddr*>(&a), len) != 0) {
    if (errno == ENETUNREACH) return Fd();  // the host has no route in that family
    REQUIRE(errno == EINPROGRESS);
    pollfd p{s.fd, POLLOUT, 0};
    if (::poll(&p, 1, timeout_ms) != 1) return Fd();
    int err = 0;
    socklen_t err_len = sizeof err;
    ::getsockopt(s.fd, SOL_SOCKET, SO_ERROR, &err, &err_len);
    if (err != 0) return Fd();
  }
  const int one = 1;
  ::setsockopt(s.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return s;
}

Fd accept_one(const Fd& listener, int timeout_ms) {
  pollfd p{listener.fd, POLLIN, 0};
  if (::poll(&p, 1, timeout_ms) != 1) return Fd();
  Fd s(::accept4(listener.fd, nullptr, nullptr, SOCK_CLOEXEC));
  const int one = 1;
  ::setsockopt(s.fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  return s;
}

bool send_all(int fd, const uint8_t* data, size_t n, Clock::time_point deadline) {
  while (n > 0) {
    const ssize_t w = ::send(fd, data, n, MSG_NOSIGNAL);
    if (w > 0) {
      data += w;
      n -= static_cast<size_t>(w);
      continue;
    }
    if (w < 0 && errno != EAGAIN && errno != EINTR) return false;
    pollfd p{fd, POLLOUT, 0};
    if (Clock::now() > deadline || ::poll(&p, 1, 100) < 0) return false;
  }
  return true;
}

bool recv_all(int fd, uint8_t* data, size_t n, Clock::time_point deadline) {
  while (n > 0) {
    const ssize_t r = ::recv(fd, data, n, 0);
    if (r > 0) {
      data += r;
      n -= static_cast<size_t>(r);
      continue;
    }
    if (r == 0 || (errno != EAGAIN && errno != EINTR)) return false;
    pollfd p{fd, POLLIN, 0};
    if (Clock::now() > deadline || ::poll(&p, 1, 100) < 0) return false;
  }
  return true;
}

std::vector<uint8_t> pattern(size_t n, uint64_t seed) {
  std::vector<uint8_t> v(n);
  uint64_t x = seed;
  for (auto& b : v) {
    x = x * 6364136223846793005ull + 1442695040888963407ull;
    b = static_cast<uint8_t>(x >> 56);
  }
  return v;
}

std::pair<Fd, Fd> dial_and_accept(const Host& from, const Host& to, uint16_t port) {
  Fd listener = listen_on(to, port);
  Fd client = connect_from(from, to, port, 3000);
  REQUIRE(client.fd >= 0);
  Fd server = accept_one(listener, 3000);
  REQUIRE(server.fd >= 0);
  return {std::move(client), std::move(server)};
}

void check_both_ways(const Fd& x, const Fd& y) {
  const auto deadline = Clock::now() + std::chrono::seconds(5);
  uint8_t byte = 41;
  REQUIRE(send_all(x.fd, &byte, 1, deadline));
  byte = 0;
  REQUIRE(recv_all(y.fd, &byte, 1, deadline));
  CHECK(byte == 41);
  byte = 42;
  REQUIRE(send_all(y.fd, &byte, 1, deadline));
  byte = 0;
  REQUIRE(recv_all(x.fd, &byte, 1, deadline));
  CHECK(byte == 42);
}

std::future<bool> echo_bytes(const Fd& listener, int rounds, Clock::time_point deadline) {
  return std::async(std::launch::async, [&listener, rounds, deadline] {
    Fd s = accept_one(listener, 5000);
    uint8_t byte = 0;
    for (int i = 0; i < rounds; ++i)
      if (s.fd < 0 || !recv_all(s.fd, &byte, 1, deadline) || !send_all(s.fd, &byte, 1, deadline)) return false;
    return true;
  });
}

}  // namespace ferry::wan::test
