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

sockaddr_in address(const std::string& ip, uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  ::inet_pton(AF_INET, ip.c_str(), &a.sin_addr);
  return a;
}

}  // namespace

Fd listen_on(const Host& host, uint16_t port) {
  ScopedNetns in(host.netns);
  Fd s(::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0));
  REQUIRE(s.fd >= 0);
  const int one = 1;
  ::setsockopt(s.fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  const sockaddr_in a = address(host.ip, port);
  REQUIRE(::bind(s.fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) == 0);
  REQUIRE(::listen(s.fd, 8) == 0);
  return s;
}

Fd connect_from(const Host& from, const Host& to, uint16_t port, int timeout_ms) {
  Fd s;
  {
    ScopedNetns in(from.netns);
    s.fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  }
  REQUIRE(s.fd >= 0);
  const sockaddr_in a = address(to.ip, port);
  if (::connect(s.fd, reinterpret_cast<const sockaddr*>(&a), sizeof a) != 0) {
    REQUIRE(errno == EINPROGRESS);
    pollfd p{s.fd, POLLOUT, 0};
    if (::poll(&p, 1, timeout_ms) != 1) return Fd();
    int err = 0;
    socklen_t len = sizeof err;
    ::getsockopt(s.fd, SOL_SOCKET, SO_ERROR, &err, &len);
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
