// The chaos proxy against a plain loopback server: it relays bytes intact,
// and each fault does what its name says.
#include <catch2/catch.hpp>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <numeric>
#include <thread>
#include <vector>

#include "chaos_proxy.h"

using namespace ferry::chaos;
using namespace std::chrono_literals;

namespace {

sockaddr_in loopback(uint16_t port) {
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  return a;
}

// A listening socket on a free loopback port.
struct Server {
  Server() {
    fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in a = loopback(0);
    socklen_t len = sizeof a;
    REQUIRE(::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
    REQUIRE(::listen(fd, 8) == 0);
    ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
    port = ntohs(a.sin_port);
  }
  ~Server() { ::close(fd); }
  int accept_one() { return ::accept(fd, nullptr, nullptr); }
  int fd;
  uint16_t port;
};

int dial(uint16_t port) {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a = loopback(port);
  REQUIRE(::connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0);
  return fd;
}

// Safe on any thread (Catch2 assertions are not): false if a send failed.
bool write_all(int fd, const std::vector<uint8_t>& bytes) {
  size_t sent = 0;
  while (sent < bytes.size()) {
    ssize_t n = ::send(fd, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n <= 0) return false;
    sent += static_cast<size_t>(n);
  }
  return true;
}

void send_all(int fd, const std::vector<uint8_t>& bytes) { REQUIRE(write_all(fd, bytes)); }

// Writes `bytes` on its own thread; finish() joins it and checks the writes succeeded.
class BackgroundWriter {
 public:
  BackgroundWriter(int fd, const std::vector<uint8_t>& bytes) : thread_([this, fd, &bytes] { ok_ = write_all(fd, bytes); }) {}
  ~BackgroundWriter() {
    if (thread_.joinable()) thread_.join();
  }
  void finish() {
    thread_.join();
    CHECK(ok_);
  }

 private:
  bool ok_ = false;
  std::thread thread_;
};

// Reads up to `want` bytes within `limit`; stops early on EOF or an error (*error gets errno, or 0 for EOF).
std::vector<uint8_t> receive(int fd, size_t want, std::chrono::milliseconds limit, int* error = nullptr) {
  std::vector<uint8_t> out;
  const auto end = std::chrono::steady_clock::now() + limit;
  while (out.size() < want && std::chrono::steady_clock::now() < end) {
    pollfd p{fd, POLLIN, 0};
    if (::poll(&p, 1, 20) <= 0) continue;
    uint8_t buf[65536];
    ssize_t n = ::recv(fd, buf, std::min(sizeof buf, want - out.size()), 0);
    if (n <= 0) {
      if (error) *error = n == 0 ? 0 : errno;
      break;
    }
    out.insert(out.end(), buf, buf + n);
  }
  return out;
}

std::vector<uint8_t> pattern(size_t n) {
  std::vector<uint8_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<uint8_t>(i * 31 + 7);
  return v;
}

// One connection relayed through a fresh proxy: client -> proxy -> accepted.
struct Relayed {
  explicit Relayed(uint64_t seed) : proxy(seed), route(proxy.add_route(server.port)) {
    client = dial(route);
    accepted = server.accept_one();
  }
  ~Relayed() {
  }
  Server server;
  ChaosProxy proxy;
  uint16_t route;
  int client = -1, accepted = -1;
};

}  // namespace

TEST_CASE("the proxy relays both directions intact and passes an orderly close on", "[chaos][proxy]") {
  Relayed r(1);
  auto& [server, proxy, route, client, accepted] = r;
  const auto data = pattern(3 << 20);
  BackgroundWriter writer(client, data);
  CHECK(receive(accepted, data.size(), 10s) == data);
  writer.finish();
  send_all(accepted, {1, 2, 3});
  CHECK(receive(client, 3, 5s) == std::vector<uint8_t>{1, 2, 3});
  ::shutdown(client, SHUT_WR);
  int error = -1;
  CHECK(receive(accepted, 1, 5s, &error).empty());
  CHECK(error == 0);  // EOF, not a reset
  CHECK(proxy.stats().connections == 1);
}

TEST_CASE("latency holds bytes back, bandwidth paces them", "[chaos][proxy]") {
  Relayed r(1);
  auto& [server, proxy, route, client, accepted] = r;
  proxy.shape(route, RouteShaping{200ms, 0}, ProxyClock::now() + 10s);
  auto t0 = std::chrono::steady_clock::now();
  send_all(client, {42});
  CHECK(receive(accepted, 1, 5s) == std::vector<uint8_t>{42});
  CHECK(std::chrono::steady_clock::now() - t0 >= 190ms);

  proxy.shape(route, RouteShaping{0ms, 1 << 20}, ProxyClock::now() + 10s);  // 1 MiB/s
  const auto data = pattern(1 << 19);
  t0 = std::chrono::steady_clock::now();
  BackgroundWriter writer(client, data);
  CHECK(receive(accepted, data.size(), 10s) == data);
  writer.finish();
  CHECK(std::chrono::steady_clock::now() - t0 >= 350ms);  // 512 KiB at 1 MiB/s, less the first piece
}

TEST_CASE("corrupt flips exactly one byte of what follows", "[chaos][proxy]") {
  Relayed r(7);
  auto& [server, proxy, route, client, accepted] = r;
  proxy.corrupt_next(route);
  const auto data = pattern(4096);
  send_all(client, data);
  const auto got = receive(accepted, data.size(), 5s);
  REQUIRE(got.size() == data.size());
  size_t differing = 0;
  for (size_t i = 0; i < data.size(); ++i) differing += got[i] != data[i];
  CHECK(differing == 1);
  CHECK(proxy.stats().corrupted == 1);
}

TEST_CASE("reset ends both sides with a RST, blackhole keeps them open and silent", "[chaos][proxy]") {
  Relayed r(1);
  auto& [server, proxy, route, client, accepted] = r;
  SECTION("reset") {
    send_all(client, {1});
    REQUIRE(receive(accepted, 1, 5s).size() == 1);
    CHECK(proxy.reset(route) == 1);
    int error = -1;
    receive(accepted, 1, 5s, &error);
    CHECK(error == ECONNRESET);
    error = -1;
    receive(client, 1, 5s, &error);
    CHECK(error == ECONNRESET);
  }
  SECTION("blackhole") {
    // A byte through first: the relay is registered once it is moving bytes,
    // which can be after the server's accept returns.
    send_all(client, {1});
    REQUIRE(receive(accepted, 1, 5s).size() == 1);
    CHECK(proxy.blackhole(route) == 1);
    send_all(client, pattern(1000));
    int error = -1;
    CHECK(receive(accepted, 1, 500ms, &error).empty());
    CHECK(error == -1);  // neither EOF nor reset: just nothing
  }
}
